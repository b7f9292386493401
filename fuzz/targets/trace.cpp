// libFuzzer target: a fill-job trace (CSV) through pipefill-sim's trace reader.
#include "algo/cluster/Trace.h"

#include <cstddef>
#include <cstdint>

using namespace pipefill::cluster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ModelResolver models{
      [](const std::string &n) {
        return n == "bert-base" || n == "tiny_mlp" || n == "gpt2" ? n : std::string();
      },
      "bert-base, tiny_mlp, gpt2"};
  std::string text(reinterpret_cast<const char *>(data), size);
  std::vector<TraceJob> jobs;
  std::string error;
  if (parseTrace(text, "fuzz.csv", models, jobs, error))
    (void)formatTrace(jobs);
  return 0;
}
