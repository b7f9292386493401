//===- pipefill-sim.cpp - Cluster-scale fill-job simulation and study -----===//
//
// Plain C++ tool (protobuf + the algo libraries, no MLIR). Reads a JobSpec
// with a `model { }` block, derives the main job's stage costs, bubbles and
// per-stage fill rates, and then either replays a fill-job trace under the
// FIFO / SJF / efficiency-aware policies, or runs the 1K-8K GPU scale study.
// `pipefill-sim --help` lists the options; docs/cluster.md explains them. The
// logic lives in algo/cluster/SimDriver.cpp.
//
//===----------------------------------------------------------------------===//

#include "algo/cluster/SimDriver.h"

#include <google/protobuf/stubs/common.h>

#include <iostream>

int main(int argc, char **argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  pipefill::cluster::SimArgs o;
  std::string error;
  if (!pipefill::cluster::parseSimArgs(argc, argv, o, error)) {
    std::cerr << "pipefill-sim: error: " << error << "\n";
    return 1;
  }
  if (o.help || argc == 1) {
    std::cout << pipefill::cluster::kSimUsage;
    return o.help ? 0 : 1;
  }
  if (o.listModels)
    return pipefill::cluster::simListModels();
  if (!o.genTrace.empty())
    return pipefill::cluster::simGenTrace(o);
  return pipefill::cluster::simRun(o);
}
