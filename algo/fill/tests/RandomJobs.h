//===- RandomJobs.h - random fill jobs of small planner instances -*- C++ -*-===//
//
// The fill jobs of the small random instances that JointExactTest checks the
// planner on against the exact joint solver, and that bench/FillBench.cpp
// (BM_PlanFillSmallStages) times the planner on: 1-3 jobs of 1-3 layers (a
// quarter training, of 1-2 layers), 5-40 us per sample and layer scaled by
// 0.3-3, weights of a quarter of the layers none. Header-only, so that the
// benchmark, which does not link the tests, draws the same jobs.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_FILL_TESTS_RANDOMJOBS_H
#define PIPEFILL_FILL_TESTS_RANDOMJOBS_H

#include "algo/fill/Planner.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace pipefill::fill {

/// Draws the jobs from `rng`. `variedTraining`: a training layer's backward
/// time is 1-2x its forward time and half of them stash activations;
/// otherwise backward is 1.5x forward and nothing is stashed (and fewer
/// numbers are drawn).
inline std::vector<Job> randomFillJobs(std::mt19937_64 &rng,
                                       bool variedTraining) {
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  std::vector<Job> jobs;
  int numJobs = pick(1, 3);
  for (int j = 0; j < numJobs; ++j) {
    Job job;
    job.name = "job" + std::to_string(j);
    job.kind = pick(0, 3) == 0 ? JobKind::Training : JobKind::Inference;
    job.samples = 1000000;
    job.priority = pick(0, 2) == 0 ? uni(0.5, 2) : 1;
    int numLayers = job.kind == JobKind::Training ? pick(1, 2) : pick(1, 3);
    double scale = uni(0.3, 3);
    for (int l = 0; l < numLayers; ++l) {
      Layer layer;
      layer.name = "l" + std::to_string(l);
      layer.forwardUsPerSample = std::round(scale * uni(5, 40));
      layer.weightBytes = pick(0, 3) == 0 ? 0 : int64_t(uni(0.5e6, 10e6));
      layer.activationBytesPerSample = int64_t(uni(0.1e6, 1.5e6));
      if (job.kind == JobKind::Training) {
        layer.backwardUsPerSample = std::round(
            layer.forwardUsPerSample * (variedTraining ? uni(1, 2) : 1.5));
        layer.gradBytes = layer.weightBytes;
        layer.optimizerBytes = 2 * layer.weightBytes;
        if (variedTraining)
          layer.stashBytesPerSample =
              pick(0, 1) ? int64_t(layer.activationBytesPerSample * uni(1, 3))
                         : 0;
      }
      job.layers.push_back(layer);
    }
    jobs.push_back(job);
  }
  return jobs;
}

} // namespace pipefill::fill

#endif // PIPEFILL_FILL_TESTS_RANDOMJOBS_H
