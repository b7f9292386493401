// pfrt-gpu-bench's command line: the usage text and the option parser.
#include "runtime/tools/pfrt-gpu-bench/GpuBenchArgs.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace gpubench {
namespace {

const char *kUsage =
    "usage: pfrt-gpu-bench [options]\n"
    "  --backend cuda|host|auto   (default auto)\n"
    "  --iterations N             iterations per run (default 20)\n"
    "  --stages P --microbatches M --forward-us F --backward-us B\n"
    "                             the 1F1B main job (default 4 x 8, 2000/4000 us)\n"
    "  --stage K                  run stage K for real, emulate the others (replay)\n"
    "  --hidden H --heads A --seq S --ffn F --layers L\n"
    "                             the fill job's encoder layers (default 1024/16/512/4096 x 4)\n"
    "  --fill-fraction X          planned share of each bubble to fill (default 0.8)\n"
    "  --time-scale X             host backend clock scale (default 1)\n"
    "  --max-dim N                fill dimension cap (default: backend's)\n"
    "  --report-prefix PATH       write PATH.nofill.json, PATH.fill.json, PATH.switch.json\n";

bool number(const char *s, double &out) {
  char *end = nullptr;
  errno = 0;
  out = std::strtod(s, &end);
  return s && *s && !errno && end && !*end;
}

} // namespace

bool parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "pfrt-gpu-bench: error: %s expects a value\n", k.c_str());
      return false;
    }
    const char *v = argv[++i];
    double x = 0;
    if (k == "--backend") {
      std::string b = v;
      if (b == "cuda")
        a.backend = PFRT_BACKEND_CUDA;
      else if (b == "host")
        a.backend = PFRT_BACKEND_HOST;
      else if (b == "auto")
        a.backend = PFRT_BACKEND_AUTO;
      else {
        std::fprintf(stderr, "pfrt-gpu-bench: error: unknown backend '%s'\n", v);
        return false;
      }
      continue;
    }
    if (k == "--report-prefix") {
      a.reportPrefix = v;
      continue;
    }
    if (!number(v, x) || x < 0) {
      std::fprintf(stderr, "pfrt-gpu-bench: error: %s expects a non-negative number, got '%s'\n",
                   k.c_str(), v);
      return false;
    }
    if (k == "--iterations") a.iterations = static_cast<uint32_t>(x);
    else if (k == "--stages") a.stages = static_cast<uint32_t>(x);
    else if (k == "--microbatches") a.microbatches = static_cast<uint32_t>(x);
    else if (k == "--forward-us") a.forwardUs = x;
    else if (k == "--backward-us") a.backwardUs = x;
    else if (k == "--stage") a.stage = static_cast<int32_t>(x);
    else if (k == "--hidden") a.hidden = static_cast<uint32_t>(x);
    else if (k == "--heads") a.heads = static_cast<uint32_t>(x);
    else if (k == "--seq") a.seq = static_cast<uint32_t>(x);
    else if (k == "--ffn") a.ffn = static_cast<uint32_t>(x);
    else if (k == "--layers") a.layers = static_cast<uint32_t>(x);
    else if (k == "--fill-fraction") a.fillFraction = x;
    else if (k == "--time-scale") a.timeScale = x;
    else if (k == "--max-dim") a.maxDim = static_cast<uint32_t>(x);
    else {
      std::fprintf(stderr, "pfrt-gpu-bench: error: unknown option '%s'\n%s", k.c_str(), kUsage);
      return false;
    }
  }
  if (a.iterations < 2 || a.stages == 0 || a.microbatches == 0 || a.layers == 0 || !a.heads ||
      a.hidden % a.heads || a.timeScale <= 0) {
    std::fprintf(stderr, "pfrt-gpu-bench: error: inconsistent options\n%s", kUsage);
    return false;
  }
  return true;
}

} // namespace gpubench
