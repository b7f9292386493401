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

// A head of a chunk cut between passes: what it did not run joins the chunk's rest where that waits,
// also behind a chunk passed over (Session::drain, Executor::runFill run items behind one that
// fits no bubble). Only the front was looked at, so the rest of a head run at index 1 went to the
// front as an item of its own: two queued items for one chunk (review finding).
TEST(FillQueueTest, TheRestOfACutHeadJoinsItsChunkBehindAPassedOverOne) {
  FillQueue q;
  q.backlog.push_back(item(0, 0, 1));  // passed over: fits no bubble
  WorkItem chunk = item(4, 0, 4);      // its head [0, 2) runs, cut after pass 1
  WorkItem head = item(4, 0, 2);
  q.backlog.push_back(chunk);
  FillQueue::dropHead(q.backlog.at(1), head); // [2, 4) waits at index 1
  FillQueue::Ran ran;
  ran.passEnd = 1;
  ran.plannedUs = 10;
  q.pushRest(head, ran);
  ASSERT_EQ(q.backlog.size(), 2u) << "the chunk is one queued item";
  EXPECT_EQ(q.backlog.at(0).sampleBegin, 0u);
  EXPECT_EQ(q.backlog.at(1).sampleBegin, 4u);
  EXPECT_EQ(q.backlog.at(1).passBegin, 1u);
  EXPECT_EQ(q.backlog.at(1).passEnd, 4u);
  EXPECT_DOUBLE_EQ(q.backlog.at(1).plannedUs, 30.0); // 10 not run of the head + 20 of [2, 4)
  // A whole item cut (not a head): its rest is first in line, as before.
  q.pushRest(item(8, 0, 4), ran);
  EXPECT_EQ(q.backlog.front().sampleBegin, 8u);
  EXPECT_EQ(q.backlog.front().passBegin, 1u);
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

// Backpressure (FillQueue::planIteration): a loop iteration that finds `holdAt` items deferred
// begins no work of the plan; the plan iteration waits, so the next iteration that does begin
// work gets the samples the held one would have had (none skipped), and the samples planned in
// held iterations are counted from the plan.
TEST(FillQueueTest, HeldIterationsShiftThePlanAndCountItsSamples) {
  Stream st;
  Op wait; // not a fill op
  wait.kind = OpKind::Wait;
  st.ops.push_back(wait);
  auto fillOp = [](uint32_t job, uint32_t begin, uint32_t end, uint32_t period) {
    Op op;
    op.kind = OpKind::Fill;
    op.fill.job = job;
    op.fill.layer_begin = begin;
    op.fill.layer_end = end;
    op.fill.batch = 4;
    op.fill.period = period;
    return op;
  };
  st.ops.push_back(fillOp(0, 0, 2, 1));
  st.ops.push_back(fillOp(0, 2, 4, 1));
  st.ops.push_back(fillOp(1, 0, 4, 1));
  // Two iterations of job 0's two chunks; at least 2 for job 2 (no chunk here).
  EXPECT_EQ(FillQueue::holdThreshold(st, 0), 4u);
  EXPECT_EQ(FillQueue::holdThreshold(st, 2), 2u);
  st.ops.push_back(fillOp(0, 0, 4, 2)); // every other iteration: half a chunk per iteration
  EXPECT_EQ(FillQueue::holdThreshold(st, 0), 5u);
  st.ops.pop_back();

  FillJob job;
  job.samples = 10;
  const uint64_t stride = 4;
  const pfrt_fill_chunk_desc &first = st.ops[1].fill;
  FillQueue q;
  q.holdAt = 2;
  WorkItem own;
  ASSERT_EQ(q.ownWork(first, 0, job, stride, own), FillQueue::Own::Ready);
  EXPECT_EQ(own.sampleBegin, 0u);
  q.backlog.push_back(item(0, 0, 2));
  q.backlog.push_back(item(0, 2, 4));
  // Iteration 1 finds two items: held, and decided once for the whole iteration.
  EXPECT_EQ(q.ownWork(first, 1, job, stride, own), FillQueue::Own::Held);
  q.backlog.clear();
  EXPECT_EQ(q.ownWork(first, 1, job, stride, own), FillQueue::Own::Held);
  EXPECT_EQ(q.held, 1);
  // Iteration 2 begins plan iteration 1: samples [4, 8), the ones iteration 1 would have begun.
  ASSERT_EQ(q.ownWork(first, 2, job, stride, own), FillQueue::Own::Ready);
  EXPECT_EQ(own.sampleBegin, 4u);
  EXPECT_EQ(q.loopEnd(0), 3);
  // By loop iteration 3 the plan has scheduled plan iterations 0..2; plan iteration 2 (samples
  // [8, 10): the job has 10) is the one not begun. Only chunks that complete a batch count.
  EXPECT_EQ(FillQueue::heldSamples(st, 0, 4, stride, job.samples, q.held, 3), 2u);
  EXPECT_EQ(FillQueue::heldSamples(st, 0, 4, stride, 0, q.held, 3), 4u);       // unbounded job: the whole batch
  EXPECT_EQ(FillQueue::heldSamples(st, 0, 4, stride, job.samples, q.held, 4), 0u); // plan iteration 3: none left
  q.resetPlan();
  EXPECT_EQ(q.held, 0);
  EXPECT_EQ(q.loopEnd(7), 7);
}

// batchSamplesIn's closed form against the iteration-by-iteration sum it replaces (the chunk's
// runs by chunkRunsIn, each its batch cut at the job's total), over random periodic chunks
// (phases, periods, negative offsets, strides smaller than, equal to and larger than the batch,
// zero stride, totals that cut several batches or none) and windows that start before, at and
// after the phase.
TEST(FillQueueTest, BatchSamplesInMatchesTheSumOverIterations) {
  std::mt19937_64 rng(20261203);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 20000; ++trial) {
    pfrt_fill_chunk_desc f{};
    f.batch = static_cast<uint32_t>(pick(1, 16));
    f.sample_begin = static_cast<uint64_t>(pick(0, 40));
    f.iteration_offset = static_cast<int32_t>(pick(-6, 4));
    f.period = static_cast<uint32_t>(pick(0, 4));
    f.phase = static_cast<uint32_t>(pick(0, 5));
    const uint64_t stride = static_cast<uint64_t>(pick(0, 3) == 0 ? 0 : pick(1, 24));
    const uint64_t total = static_cast<uint64_t>(pick(0, 2) == 0 ? 0 : pick(1, 300));
    const int64_t from = pick(0, 30), to = from + pick(-2, 60);
    uint64_t want = 0;
    for (int64_t it = from; it < to; ++it) {
      int64_t logical = 0;
      if (!chunkRunsIn(f, it, &logical) || logical < 0)
        continue;
      const uint64_t sb = f.sample_begin + static_cast<uint64_t>(logical) * stride;
      if (total && sb >= total)
        continue;
      want += total ? std::min<uint64_t>(f.batch, total - sb) : f.batch;
    }
    ASSERT_EQ(batchSamplesIn(f, from, to, stride, total), want)
        << "trial " << trial << ": batch " << f.batch << " sample_begin " << f.sample_begin
        << " offset " << f.iteration_offset << " period " << f.period << " phase " << f.phase
        << " stride " << stride << " total " << total << " window [" << from << ", " << to
        << ")";
  }
}

} // namespace
} // namespace test
} // namespace pfrt
