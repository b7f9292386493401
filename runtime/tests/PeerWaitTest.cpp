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

TEST(PeerWait, ReturnsOnceReadyCheckingThePeersWhileItWaits) {
  int polls = 0, checks = 0;
  PeerWatch watch{[&] { ++checks; }, 5.0};
  pollUntil([&] { return ++polls == 400; }, watch, "the event");
  EXPECT_EQ(polls, 400);
  EXPECT_GE(checks, 1) << "the peers are checked as soon as the GPU is found busy";
  EXPECT_LE(checks, 399);
  // Ready at once: nothing to check.
  checks = 0;
  pollUntil([] { return true; }, watch, "the event");
  EXPECT_EQ(checks, 0);
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

// A peer's failure reported by the communicators ends the wait with its own error.
TEST(PeerWait, APeerFailureEndsTheWaitWithItsError) {
  int checks = 0;
  PeerWatch watch{[&] {
                    if (++checks == 2)
                      throw Error(PFRT_ERROR_BACKEND, "NCCL a transfer failed: remote error");
                  },
                  60.0};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    pollUntil([] { return false; }, watch, "the event");
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "NCCL a transfer failed: remote error");
  }
  EXPECT_EQ(checks, 2);
  EXPECT_LT(secondsSince(t0), 5.0) << "checked about once a millisecond";
}

// After one wait ran past the limit, every later wait of the rank fails at once: a failed thread
// resolving its pending events on its way out must not wait the limit again.
TEST(PeerWait, OnceAWaitExpiredTheOthersFailAtOnce) {
  PeerWatch watch{nullptr, 0.1, std::make_shared<std::atomic<bool>>(false)};
  EXPECT_THROW(pollUntil([] { return false; }, watch, "the first wait"), Error);
  EXPECT_TRUE(watch.expired->load());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    pollUntil([] { return false; }, watch, "a stream's work");
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("a stream's work did not finish within 0.1 s while "
                                         "transfers with other ranks were in flight: a peer rank "
                                         "hung (--peer-timeout sets the limit) (an earlier wait "
                                         "of this rank ran past the limit)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(secondsSince(t0), 0.05);
  // A wait that is ready still returns: only waits that would block fail.
  pollUntil([] { return true; }, watch, "a finished event");
}

} // namespace
} // namespace pfrt
