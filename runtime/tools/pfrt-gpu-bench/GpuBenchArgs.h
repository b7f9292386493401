// pfrt-gpu-bench's command line (GpuBenchArgs.cpp); GpuBench.cpp runs the benchmark.
#ifndef PFRT_TOOLS_GPU_BENCH_ARGS_H
#define PFRT_TOOLS_GPU_BENCH_ARGS_H

#include "runtime/pfrt.h"

#include <cstdint>
#include <string>

namespace gpubench {

struct Args {
  pfrt_backend backend = PFRT_BACKEND_AUTO;
  uint32_t iterations = 20;
  uint32_t stages = 4, microbatches = 8;
  double forwardUs = 2000, backwardUs = 4000, p2pUs = 30;
  int32_t stage = -1;
  uint32_t hidden = 1024, heads = 16, seq = 512, ffn = 4096, layers = 4;
  double fillFraction = 0.8;
  double timeScale = 1.0;
  uint32_t maxDim = 0;
  std::string reportPrefix;
};

/// Reads the options into `a`; false after printing the error. --help
/// prints the usage and exits.
bool parse(int argc, char **argv, Args &a);

} // namespace gpubench

#endif // PFRT_TOOLS_GPU_BENCH_ARGS_H
