//===- SimDriver.h - pipefill-sim: options and the run ----------*- C++ -*-===//
//
// The whole of pipefill-sim except main(): its command line, the JobSpec
// setup (through the shared front end, algo/jobspec), the model catalog, trace
// generation, the per-stage analysis, the queue replay and the scale study.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_ALGO_CLUSTER_SIMDRIVER_H
#define PIPEFILL_ALGO_CLUSTER_SIMDRIVER_H

#include "algo/cluster/Trace.h"

#include <string>
#include <vector>

namespace pipefill::cluster {

extern const char *kSimUsage;

struct SimArgs {
  std::string job;
  bool study = false, listModels = false, help = false;
  std::string genTrace;
  std::vector<int> gpus;
  std::string schedule;
  std::vector<std::string> schedules;
  std::string recompute = "auto";
  std::string trace;
  std::string policy = "all";
  bool policyGiven = false; // --policy was on the command line
  int gpusPerJob = 0;
  double horizonS = 0, agingS = 4 * 3600.0, tolerance = 0.02;
  std::vector<std::string> models;
  double fillEfficiency = 0;
  std::string json, svg, markdown;
  bool perJob = false, quiet = false;
  // Trace generation.
  TraceGenOptions gen;
  std::string gpu;
  std::vector<double> weights;
};

bool parseSimArgs(int argc, char **argv, SimArgs &o, std::string &error);
/// `--list-models`: the fill-model zoo and GPU presets.
int simListModels();
/// `--gen-trace`: writes a synthetic trace.
int simGenTrace(const SimArgs &o);
/// Per-stage analysis, trace replay or the study; the exit status.
int simRun(const SimArgs &o);

} // namespace pipefill::cluster

#endif // PIPEFILL_ALGO_CLUSTER_SIMDRIVER_H
