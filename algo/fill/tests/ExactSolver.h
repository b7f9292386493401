//===- ExactSolver.h - Exact reference optimum for small fill instances ---===//
//
// Written independently of the planner (own cost arithmetic, own packing):
// for every stage, job and knob setting it computes the best long-run number
// of ops per iteration over *all* ways of cutting the op stream into chunks
// and placing them into the repeating bubbles, then enumerates every
// job-to-stage assignment (one job per stage).
//
// Exactness argument:
//  * Within one bubble, starting at cursor c, any sequence of chunks is a
//    sequence of op ranges, each inside one batch, with total time (context
//    switch + makespan each) <= the bubble's budget and each fitting memory.
//    best[a] = minimum total time that advances the cursor by exactly a ops,
//    by a DP over the last chunk; advance a is achievable iff best[a] <= budget.
//  * The future depends only on the cursor at the start of the next
//    iteration, so W[c][c'] = the largest advance of one iteration from c to
//    c' (a DP over the bubbles in order) loses nothing.
//  * The best long-run advance per iteration from cursor 0 is the maximum
//    mean cycle of W among the nodes reachable from 0 (Karp's theorem).
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_FILL_TESTS_EXACTSOLVER_H
#define PIPEFILL_ALGO_FILL_TESTS_EXACTSOLVER_H

#include "algo/fill/Planner.h"

#include <vector>

namespace pipefill::fill::exact {

struct KnobChoice {
  int batch = 0;
  WeightPlacement weights = WeightPlacement::Resident;
  ActPlacement acts = ActPlacement::Device;
  OptimizerPlacement optimizer = OptimizerPlacement::Device;
  bool checkpoint = false;
};

/// Best steady-state ops per iteration of one job with fixed knobs alone on
/// one stage (0 when it cannot run). `finiteCheck`, when not null, receives
/// the best advance over 4 * (ops per batch) iterations, for a sanity check.
double bestOpsPerIteration(const StageBubbles &stage, const Job &job,
                           const KnobChoice &knobs, const Hardware &hw,
                           const Config &config, double *finiteHorizon = nullptr,
                           int *horizon = nullptr, double *maxEdge = nullptr);

struct Optimum {
  double value = 0; // sum over stages of priority * useful us per iteration
  std::vector<int> jobOfStage; // per stage (input order), -1 = none
};

/// The best one-job-per-stage plan over every knob setting and assignment.
Optimum solve(const std::vector<StageBubbles> &stages,
              const std::vector<Job> &jobs, const Hardware &hw,
              const Config &config);

/// The joint optimum (sum over stages of priority-weighted useful us per
/// iteration) of the model in docs/planner.md section 4: per stage every
/// subset of at most maxJobsPerStage jobs and every knob setting per job;
/// the jobs' chunks share each bubble's time in any way (joint cursor
/// states, one per job, a per-bubble knapsack over the jobs' advances) and
/// the time left takes tail chunks (whole batches of a smaller batch size,
/// same placements) when config.tailChunks; Karp's maximum mean cycle over
/// the joint states reachable from all cursors at 0.
double solveJoint(const std::vector<StageBubbles> &stages,
                  const std::vector<Job> &jobs, const Hardware &hw,
                  const Config &config, int maxJobsPerStage);

} // namespace pipefill::fill::exact

#endif // PIPEFILL_ALGO_FILL_TESTS_EXACTSOLVER_H
