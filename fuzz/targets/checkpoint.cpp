// libFuzzer target: checkpoint bytes through the crash-safe reader (header, size, checksum,
// identity, limits) and the shape check of every in-flight batch against a fixed encoder job.
// The checksum makes random bytes fail early; -use_value_profile helps the fuzzer past it, and
// the seeds are real checkpoints.
#include "runtime/CheckpointFile.h"
#include "runtime/Workload.h"

#include "proto/stream_program.pb.h"

#include <cstddef>
#include <cstdint>

using namespace pfrt;

namespace {
Program makeProgram() {
  Program p;
  FillJob job;
  job.name = "enc";
  job.kind = PFRT_FILL_INFERENCE;
  for (int l = 0; l < 2; ++l) {
    FillLayer layer;
    layer.desc.kind = PFRT_LAYER_ENCODER;
    layer.desc.hidden = 64;
    layer.desc.heads = 4;
    layer.desc.seq = 16;
    layer.desc.ffn = 128;
    job.layers.push_back(layer);
  }
  p.jobs.push_back(job);
  return p;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Program program = makeProgram();
  static const JobShape shape = makeJobShape(program, 0, 128);
  std::string bytes(reinterpret_cast<const char *>(data), size);
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  // Any fingerprint: take the file's own so that the content checks are reached.
  uint64_t fp = size >= 16 ? *reinterpret_cast<const uint64_t *>(data + 8) : 0;
  if (parseCheckpointData(bytes, "fuzz.ckpt", fp, cp, problem) != CheckpointStatus::Ok)
    return 0;
  for (const auto &job : cp.jobs())
    for (const auto &dev : job.devices())
      for (const auto &b : dev.in_flight())
        (void)checkInFlightShape(shape, b);
  return 0;
}
