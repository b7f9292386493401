// pollUntil: the CUDA backend's GPU waits in rank mode with NCCL (PeerWait.h), with fake queries.
#include "runtime/PeerWait.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <chrono>

namespace pfrt {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(PeerWait, ReturnsOnceReadyCheckingThePeersBetweenPolls) {
  int polls = 0, checks = 0;
  PeerWatch watch{[&] { ++checks; }, 5.0};
  pollUntil([&] { return ++polls == 400; }, watch, "the event");
  EXPECT_EQ(polls, 400);
  EXPECT_EQ(checks, 399) << "the peers are checked after every poll that found the GPU busy";
}

// The hang the time limit is for: a query that never completes ends in the limit's error, after
// the limit and not much later (the back-off sleeps at most 1 ms).
TEST(PeerWait, AWaitThatNeverCompletesIsATimeoutNamingTheWait) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    pollUntil([] { return false; }, PeerWatch{nullptr, 0.2},
              "the fake stream's work of iteration 3");
    FAIL() << "no timeout";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), PFRT_ERROR_BACKEND);
    EXPECT_EQ(std::string(e.what()),
              "the fake stream's work of iteration 3 did not finish within 0.2 s while transfers "
              "with other ranks were in flight: a peer rank hung (--peer-timeout sets the limit)");
  }
  const double s = secondsSince(t0);
  EXPECT_GE(s, 0.2);
  EXPECT_LT(s, 5.0);
}

// A peer's failure reported by the communicators ends the wait at once with its own error.
TEST(PeerWait, APeerFailureEndsTheWaitWithItsError) {
  int polls = 0;
  PeerWatch watch{[&] {
                    if (polls == 3)
                      throw Error(PFRT_ERROR_BACKEND, "NCCL a transfer failed: remote error");
                  },
                  60.0};
  try {
    pollUntil([&] { ++polls; return false; }, watch, "the event");
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "NCCL a transfer failed: remote error");
  }
  EXPECT_EQ(polls, 3);
}

} // namespace
} // namespace pfrt
