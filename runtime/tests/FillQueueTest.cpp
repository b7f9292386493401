// The fill queue's backlog and the continuation rule that reads it (FillQueue::ownWork): whether a
// batch is queued is answered from the backlog's per-batch counts, checked here against a scan of
// its items (the reference) through a random sequence of the operations the executor and
// sessions apply, and through ownWork's verdicts for continuation chunks.
#include "runtime/FillQueue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pfrt {
namespace test {
namespace {

bool scanHolds(const Backlog &b, uint64_t sampleBegin) {
  return std::any_of(b.begin(), b.end(),
                     [&](const WorkItem &w) { return w.sampleBegin == sampleBegin; });
}

WorkItem item(uint64_t sampleBegin, uint32_t passBegin, uint32_t passEnd) {
  WorkItem w;
  w.sampleBegin = sampleBegin;
  w.batch = 4;
  w.passBegin = passBegin;
  w.passEnd = passEnd;
  w.plannedUs = 10.0 * (passEnd - passBegin);
  return w;
}

TEST(FillQueueTest, BacklogKnowsItsBatchesLikeAScan) {
  std::mt19937_64 rng(20261203);
  Backlog b;
  std::deque<WorkItem> mirror; // the same operations on a plain deque
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 7);
    // Few batches, so that several items of one batch are often queued together.
    const WorkItem w = item(4 * (rng() % 16), 0, 4);
    if (op <= 2) {
      b.push_back(w);
      mirror.push_back(w);
    } else if (op == 3) {
      b.push_front(w);
      mirror.push_front(w);
    } else if (op <= 5 && !mirror.empty()) {
      b.pop_front();
      mirror.pop_front();
    } else if (!mirror.empty()) {
      // dropHead / pushRest edit the front item's passes, never its batch.
      FillQueue::dropHead(b.front(), item(b.front().sampleBegin, 0, 1));
      FillQueue::dropHead(mirror.front(), item(mirror.front().sampleBegin, 0, 1));
    }
    if (step % 5000 == 4999) {
      b.clear();
      mirror.clear();
    }
    ASSERT_EQ(b.size(), mirror.size());
    ASSERT_TRUE(std::equal(b.begin(), b.end(), mirror.begin(), mirror.end(),
                           [](const WorkItem &x, const WorkItem &y) {
                             return x.sampleBegin == y.sampleBegin && x.passBegin == y.passBegin;
                           }));
    for (uint64_t sb = 0; sb < 64; sb += 4)
      ASSERT_EQ(b.holds(sb), scanHolds(b, sb)) << "step " << step << ", batch at " << sb;
  }
}

// A continuation (layers [2, 4) of a batch of 4 samples per iteration) runs only when its batch is
// in flight or queued; with the batch in flight and nothing queued it must also be at its pass.
TEST(FillQueueTest, ContinuationNeedsItsBatchInFlightOrQueued) {
  FillJob job;
  job.samples = 0; // unbounded
  pfrt_fill_chunk_desc f{};
  f.layer_begin = 2;
  f.layer_end = 4;
  f.batch = 4;
  f.planned_us = 20;
  const uint64_t stride = 4;
  FillQueue q;
  WorkItem own;
  // Iteration 3's batch begins at sample 12; nothing knows it.
  EXPECT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Skipped);
  // Its first passes queued (deferred) behind other batches: the continuation is ready and queues
  // behind them, as plan order wants.
  q.backlog.push_back(item(4, 0, 2));
  q.backlog.push_back(item(8, 0, 2));
  EXPECT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Skipped);
  q.backlog.push_back(item(12, 0, 2));
  ASSERT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Ready);
  EXPECT_EQ(own.sampleBegin, 12u);
  EXPECT_EQ(own.passBegin, 2u);
  EXPECT_EQ(own.passEnd, 4u);
  // Once those items ran and left the backlog, a batch that is not in flight is unknown again.
  q.backlog.pop_front();
  q.backlog.pop_front();
  q.backlog.pop_front();
  EXPECT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Skipped);
  // In flight at the continuation's pass: ready; at another pass (nothing queued): skipped.
  Flight fl;
  fl.batch = 4;
  fl.next = 2;
  q.flights[12] = std::move(fl);
  EXPECT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Ready);
  q.flights[12].next = 1;
  EXPECT_EQ(q.ownWork(f, 3, job, stride, own), FillQueue::Own::Skipped);
}

} // namespace
} // namespace test
} // namespace pfrt
