//===- TestUtil.h - Helpers shared by the schedule unit tests -------------===//

#ifndef PIPEFILL_ALGO_SCHEDULE_TESTS_TESTUTIL_H
#define PIPEFILL_ALGO_SCHEDULE_TESTS_TESTUTIL_H

#include "algo/schedule/Schedule.h"

#include <gtest/gtest.h>

#include <string>

/// Passes when `needle` occurs in `haystack` (both std::string-like).
#define EXPECT_HAS(haystack, needle)                                           \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, std::string(needle),             \
                      std::string(haystack))

namespace pipefill::sched::test {

/// A spec with identical stages and free communication.
inline PipelineSpec uniformSpec(ScheduleKind kind, int p, int m, double f,
                                double b, int v = 1) {
  PipelineSpec spec;
  spec.schedule = kind;
  spec.stages = p;
  spec.microbatches = m;
  spec.virtualStages = v;
  StageCost c;
  c.forwardUs = f;
  c.backwardUs = b;
  spec.costs.assign(p, c);
  return spec;
}

/// Expands and simulates; fails the current test on any error.
inline ::testing::AssertionResult expandAndSimulate(const PipelineSpec &spec,
                                                    Schedule &schedule,
                                                    SimResult &result) {
  std::string error;
  if (!expandSchedule(spec, schedule, error))
    return ::testing::AssertionFailure() << "expandSchedule: " << error;
  if (!simulate(spec, schedule, result, error))
    return ::testing::AssertionFailure() << "simulate: " << error;
  return ::testing::AssertionSuccess();
}

inline Instr compute(InstrKind kind, int mb, double us, int64_t bytes = 0,
                     int chunk = 0) {
  Instr in;
  in.kind = kind;
  in.microbatch = mb;
  in.chunk = chunk;
  in.durationUs = us;
  in.bytes = bytes;
  return in;
}

inline Instr transfer(InstrKind kind, Payload payload, int mb, int peer,
                      int64_t bytes = 0, int chunk = 0) {
  Instr in;
  in.kind = kind;
  in.payload = payload;
  in.microbatch = mb;
  in.chunk = chunk;
  in.peer = peer;
  in.bytes = bytes;
  return in;
}

} // namespace pipefill::sched::test

#endif // PIPEFILL_ALGO_SCHEDULE_TESTS_TESTUTIL_H
