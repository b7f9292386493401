//===- TorchScheduleTest.cpp - torch action tables: parse, check, convert -===//
#include "algo/torch/TorchSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace pipefill;
using namespace pipefill::torchsched;

namespace {

sched::PipelineSpec uniformSpec(sched::ScheduleKind kind, int p, int m, int v,
                                double f, double b, double w = 0) {
  sched::PipelineSpec spec;
  spec.schedule = kind;
  spec.stages = p;
  spec.microbatches = m;
  spec.virtualStages = v;
  sched::StageCost c;
  c.forwardUs = f;
  c.backwardUs = b;
  c.backwardWeightUs = w;
  c.activationBytes = 1000;
  c.stashBytes = 4000;
  spec.costs.assign(p, c);
  return spec;
}

/// The compute order of a pipefill-expanded schedule written as a torch
/// table (chunk c of device d is torch stage c*p + d).
std::string tableOf(const sched::PipelineSpec &spec,
                    const sched::Schedule &schedule) {
  std::vector<std::vector<ExportOp>> rows(schedule.size());
  for (size_t d = 0; d < schedule.size(); ++d)
    for (const sched::Instr &in : schedule[d])
      if (in.kind == sched::InstrKind::Forward ||
          sched::isBackwardFamily(in.kind))
        rows[d].push_back({in.kind, in.chunk * spec.stages + int(d),
                           in.microbatch, -1});
  return formatTable(rows);
}

bool importText(const std::string &text, Imported &imp, Diag &diag) {
  Table table;
  return parseTable(text, table, diag) && checkTable(table, imp, diag);
}

void expectSameInstrs(const sched::Schedule &a, const sched::Schedule &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t d = 0; d < a.size(); ++d) {
    ASSERT_EQ(a[d].size(), b[d].size()) << "device " << d;
    for (size_t i = 0; i < a[d].size(); ++i) {
      const sched::Instr &x = a[d][i], &y = b[d][i];
      SCOPED_TRACE("device " + std::to_string(d) + " instr " +
                   std::to_string(i) + ": " + sched::describeInstr(x) +
                   " vs " + sched::describeInstr(y));
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.microbatch, y.microbatch);
      EXPECT_EQ(x.chunk, y.chunk);
      if (x.kind == sched::InstrKind::Send || x.kind == sched::InstrKind::Recv) {
        EXPECT_EQ(x.peer, y.peer);
        EXPECT_EQ(x.payload, y.payload);
      }
      EXPECT_EQ(x.bytes, y.bytes);
      EXPECT_DOUBLE_EQ(x.durationUs, y.durationUs);
    }
  }
}

} // namespace

TEST(Parse, CellsQuotesLineEndingsAndEmptyCells) {
  Table t;
  Diag d;
  // Row 0 has torch's None placeholders (empty cells) and CRLF endings.
  ASSERT_TRUE(parseTable("0F0,,0F1, 0B0 ,\"0B1\"\r\n1F0,1I0,1W0,1F1,1B1\r\n",
                         t, d))
      << d.message;
  ASSERT_EQ(t.ranks.size(), 2u);
  ASSERT_EQ(t.ranks[0].size(), 4u);
  EXPECT_EQ(t.ranks[0][2].kind, ActKind::FullBackward);
  EXPECT_EQ(t.ranks[0][2].loc.line, 1);
  EXPECT_EQ(t.ranks[0][2].loc.col, 11); // after the leading blank
  EXPECT_EQ(t.ranks[0][3].loc.col, 17); // inside the quotes
  EXPECT_EQ(t.ranks[1][1].kind, ActKind::BackwardInput);
  EXPECT_EQ(t.ranks[1][2].kind, ActKind::BackwardWeight);
  EXPECT_FALSE(t.hasComms);
}

TEST(Parse, CommsAndOverlapGroups) {
  Table t;
  Diag d;
  ASSERT_TRUE(parseTable("0F0,0SEND_F0,0WAIT_SEND_F0,0UNSHARD,0REDUCE_GRAD\n"
                         "(1F1;1B0)OVERLAP_F_B,12RECV_B34\n",
                         t, d))
      << d.message;
  EXPECT_TRUE(t.hasComms);
  EXPECT_EQ(t.ranks[0][1].kind, ActKind::SendF);
  EXPECT_EQ(t.ranks[0][2].kind, ActKind::WaitSendF);
  EXPECT_EQ(t.ranks[0][3].kind, ActKind::Unshard);
  EXPECT_EQ(t.ranks[0][3].microbatch, -1);
  EXPECT_EQ(t.ranks[0][4].kind, ActKind::ReduceGrad);
  const Action &g = t.ranks[1][0];
  ASSERT_EQ(g.kind, ActKind::OverlapFB);
  ASSERT_EQ(g.sub.size(), 2u);
  EXPECT_EQ(g.sub[1].kind, ActKind::FullBackward);
  EXPECT_EQ(g.sub[1].loc.col, 6);
  EXPECT_EQ(t.ranks[1][1].stage, 12);
  EXPECT_EQ(t.ranks[1][1].microbatch, 34);
}

TEST(Parse, ErrorsNameLineAndColumn) {
  struct Case {
    const char *text;
    int line, col;
    const char *needle;
  } cases[] = {
      {"0F0,0X1\n", 1, 5, "unknown type"},
      {"0F0\n1F0,1Fx\n", 2, 5, "trailing text"},
      {"0F0,F1\n", 1, 5, "stage index"},
      {"0F0,0B\n", 1, 5, "needs a micro-batch"},
      {"0F0,(0F1;0SEND_F1)OVERLAP_F_B\n", 1, 10, "only compute"},
      {"(0F1;0B0)OVERLAP\n", 1, 10, "OVERLAP_F_B"},
      {"0F0,\"0B0\n", 1, 5, "unterminated"},
      {"\n\n", 1, 1, "empty"},
  };
  for (const Case &c : cases) {
    Table t;
    Diag d;
    EXPECT_FALSE(parseTable(c.text, t, d)) << c.text;
    EXPECT_EQ(d.loc.line, c.line) << c.text;
    EXPECT_EQ(d.loc.col, c.col) << c.text << ": " << d.message;
    EXPECT_NE(d.message.find(c.needle), std::string::npos)
        << c.text << ": " << d.message;
  }
}

// pipefill's own expansions, written as torch tables and imported again,
// give back the very same instruction lists (sends, recvs, bytes, durations).
TEST(Import, ReproducesPipefillExpansions) {
  struct K {
    sched::ScheduleKind kind;
    int p, m, v;
    Placement placement;
  } cases[] = {
      {sched::ScheduleKind::GPipe, 4, 6, 1, Placement::Single},
      {sched::ScheduleKind::OneFOneB, 4, 8, 1, Placement::Single},
      {sched::ScheduleKind::OneFOneB, 3, 2, 1, Placement::Single},
      {sched::ScheduleKind::Interleaved1F1B, 4, 8, 2, Placement::Interleaved},
      {sched::ScheduleKind::Interleaved1F1B, 2, 4, 3, Placement::Interleaved},
      {sched::ScheduleKind::ZBH1, 4, 8, 1, Placement::Single},
  };
  for (const K &k : cases) {
    SCOPED_TRACE(std::string(sched::toString(k.kind)) + " p=" +
                 std::to_string(k.p) + " m=" + std::to_string(k.m));
    sched::PipelineSpec spec =
        uniformSpec(k.kind, k.p, k.m, k.v, 12, 24,
                    k.kind == sched::ScheduleKind::ZBH1 ? 10 : 0);
    sched::Schedule native;
    std::string error;
    ASSERT_TRUE(sched::expandSchedule(spec, native, error)) << error;
    Imported imp;
    Diag d;
    ASSERT_TRUE(importText(tableOf(spec, native), imp, d)) << d.message;
    EXPECT_EQ(imp.ranks, k.p);
    EXPECT_EQ(imp.microbatches, k.m);
    EXPECT_EQ(imp.chunksPerRank, k.v);
    EXPECT_EQ(imp.stages, k.p * k.v);
    EXPECT_EQ(imp.placement, k.placement);
    EXPECT_EQ(imp.splitBackward, k.kind == sched::ScheduleKind::ZBH1);
    sched::Schedule imported;
    toPipefill(imp, spec, imported);
    expectSameInstrs(imported, native);
  }
}

// A V-shape table pipefill cannot expand itself, timed by hand: p = 2,
// rank 0 holds stages 0 and 3, rank 1 stages 1 and 2, F = B = 1 us, free
// transfers. Critical path: 0F0 0F1 | 1F0@1 1F1 2F0 2F1 | 3F0@4 3F1 3B0 3B1 |
// 2B0@7 2B1 1B0 1B1 | 0B0@10 0B1 -> 12 us; each rank is busy 8 us.
TEST(Import, VShapeTimedByHand) {
  const char *text = "0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n"
                     "1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n";
  Imported imp;
  Diag d;
  ASSERT_TRUE(importText(text, imp, d)) << d.message;
  EXPECT_EQ(imp.placement, Placement::VShape);
  EXPECT_EQ(imp.chunksPerRank, 2);
  EXPECT_EQ(imp.chunkOfStage, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(imp.rankOfStage, (std::vector<int>{0, 1, 1, 0}));
  sched::PipelineSpec spec =
      uniformSpec(sched::ScheduleKind::OneFOneB, 2, 2, 2, 2, 2);
  sched::Schedule s;
  toPipefill(imp, spec, s);
  int sends = 0, recvs = 0;
  for (const auto &list : s)
    for (const sched::Instr &in : list) {
      sends += in.kind == sched::InstrKind::Send;
      recvs += in.kind == sched::InstrKind::Recv;
    }
  // Cross-rank edges: 0->1 and 2->3 forward, 3->2 and 1->0 backward, per mb.
  EXPECT_EQ(sends, 8);
  EXPECT_EQ(recvs, 8);
  sched::SimResult r;
  std::string error;
  ASSERT_TRUE(sched::simulate(spec, s, r, error)) << error;
  EXPECT_DOUBLE_EQ(r.iterationUs, 12.0);
  EXPECT_DOUBLE_EQ(r.stages[0].busyUs, 8.0);
  EXPECT_DOUBLE_EQ(r.stages[1].busyUs, 8.0);
  EXPECT_NEAR(sched::bubbleFraction(r), 1.0 / 3.0, 1e-12);
}

TEST(Import, OverlapGroupsAndMixedBackwards) {
  // DualPipeV-style: a stage mixes B and I/W across micro-batches, and an
  // OVERLAP_F_B cell runs a forward and a backward of different stages.
  const char *text = "0F0,0F1,3F0,(3F1;3B0)OVERLAP_F_B,3I1,0B0,3W1,0I1,0W1\n"
                     "1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n";
  Imported imp;
  Diag d;
  ASSERT_TRUE(importText(text, imp, d)) << d.message;
  EXPECT_TRUE(imp.splitBackward);
  ASSERT_EQ(imp.order[0].size(), 10u);
  EXPECT_EQ(imp.order[0][3].overlapGroup, 0);
  EXPECT_EQ(imp.order[0][4].overlapGroup, 0);
  EXPECT_EQ(imp.order[0][5].overlapGroup, -1);
  // Export writes the group back as one cell.
  std::vector<std::vector<ExportOp>> rows(2);
  for (int r = 0; r < 2; ++r)
    for (const ComputeOp &op : imp.order[r])
      rows[r].push_back({op.kind, op.stage, op.microbatch, op.overlapGroup});
  EXPECT_EQ(formatTable(rows), text);
}

TEST(Import, CommsTableChecksTransfers) {
  // torch's own lowering of 1F1B for p=2, m=1 with sends and recvs.
  const char *ok = "0F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n";
  Imported imp;
  Diag d;
  ASSERT_TRUE(importText(ok, imp, d)) << d.message;
  EXPECT_TRUE(imp.hadComms);
  struct Case {
    const char *text;
    int line, col;
    const char *needle;
  } cases[] = {
      // No RECV_F on rank 1.
      {"0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n", 2, 1, "1RECV_F0"},
      // RECV after its consumer.
      {"0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n", 2, 5,
       "must come before"},
      // SEND before its producer.
      {"0SEND_F0,0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n", 1, 1,
       "must come after"},
      // A send to a stage that does not exist.
      {"0F0,0SEND_F0,0RECV_B0,0B0,0SEND_B0\n1RECV_F0,1F0,1B0,1SEND_B0\n", 1,
       27, "no peer"},
      // WAIT_SEND before its SEND.
      {"0F0,0WAIT_SEND_F0,0SEND_F0,0RECV_B0,0B0\n"
       "1RECV_F0,1F0,1B0,1SEND_B0\n",
       1, 5, "waits for 0SEND_F0"},
  };
  for (const Case &c : cases) {
    Table t;
    Diag e;
    EXPECT_FALSE(parseTable(c.text, t, e) && checkTable(t, imp, e)) << c.text;
    EXPECT_EQ(e.loc.line, c.line) << c.text << ": " << e.message;
    EXPECT_EQ(e.loc.col, c.col) << c.text << ": " << e.message;
    EXPECT_NE(e.message.find(c.needle), std::string::npos)
        << c.text << ": " << e.message;
  }
}

TEST(Import, CommsDeadlockOnWaitSend) {
  // Rank 0 waits for its first send to be received (WAIT_SEND_F) before it
  // sends micro-batch 1; rank 1 computes micro-batch 1 before it posts the
  // receive of micro-batch 0: each waits for the other.
  const char *dead = "0F0,0SEND_F0,0WAIT_SEND_F0,0F1,0SEND_F1,0WAIT_SEND_F1,0RECV_B0,"
                     "0B0,0RECV_B1,0B1\n"
                     "1RECV_F1,1F1,1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0,1B1,1SEND_B1,"
                     "1WAIT_SEND_B1\n";
  Imported imp;
  Diag d;
  EXPECT_FALSE(importText(dead, imp, d));
  EXPECT_EQ(d.loc.line, 1);
  EXPECT_EQ(d.loc.col, 14);
  EXPECT_NE(d.message.find("rank 0 blocks at 0WAIT_SEND_F0, which waits for "
                           "1RECV_F0 on rank 1"),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("rank 1 at 1F1"), std::string::npos) << d.message;
  // Without the wait the same order runs.
  const char *fine = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                     "1RECV_F1,1F1,1RECV_F0,1F0,1B0,1SEND_B0,1B1,1SEND_B1\n";
  EXPECT_TRUE(importText(fine, imp, d)) << d.message;
}

TEST(Check, RejectsIncompleteAndMisorderedTables) {
  struct Case {
    const char *text;
    int line, col; ///< col 0: the row as a whole
    const char *needle;
  } cases[] = {
      // Missing forward of stage 1 micro-batch 1 (row of rank 1).
      {"0F0,0F1,0B0,0B1\n1F0,1B0,1B1\n", 2, 9, "before its forward"},
      {"0F0,0F1,0B0,0B1\n1F0,1B0\n", 2, 0, "no forward (1F1)"},
      // Missing backward.
      {"0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n", 1, 0, "no backward (0B1"},
      // I without W.
      {"0F0,0I0\n1F0,1B0\n", 1, 5, "no weight gradient (0W0)"},
      // W before I, and W after a full B.
      {"0F0,0W0,0I0\n1F0,1B0\n", 1, 5, "before its input gradient"},
      {"0F0,0B0,0W0\n1F0,1B0\n", 1, 9, "already ran a full backward"},
      // Duplicates.
      {"0F0,0F0,0B0\n1F0,1B0\n", 1, 5, "repeats the forward"},
      {"0F0,0B0,0I0,0W0\n1F0,1B0\n", 1, 9, "repeats the backward"},
      // A stage on two ranks; uneven stage counts; a gap in stage numbers.
      {"0F0,0B0\n0F1,1F0,1B0\n", 2, 1, "runs on rank 0"},
      {"0F0,2F0,2B0,0B0\n1F0,1B0\n", 2, 0, "runs 1 stage(s) but rank 0 runs 2"},
      {"0F0,0B0\n2F0,2B0\n", 2, 1, "stage 1 never runs"},
      // An empty row.
      {"0F0,0B0\n\n1F0,1B0\n", 2, 0, "no actions"},
      // A non-compute action naming a foreign stage.
      {"0F0,0B0,1UNSHARD\n1F0,1B0\n", 1, 9, "runs on rank 1"},
  };
  for (const Case &c : cases) {
    Imported imp;
    Diag d;
    EXPECT_FALSE(importText(c.text, imp, d)) << c.text;
    EXPECT_EQ(d.loc.line, c.line) << c.text << ": " << d.message;
    EXPECT_EQ(d.loc.col, c.col) << c.text << ": " << d.message;
    EXPECT_NE(d.message.find(c.needle), std::string::npos)
        << c.text << ": " << d.message;
  }
}

TEST(Check, ReportsTheFirstBlockedActionOfADeadlock) {
  // V-shape, rank 0 runs 3F0 before 0F0: it waits for 2F0 on rank 1, which
  // waits (through 1F0) for 0F0 on rank 0.
  const char *text = "3F0,0F0,3B0,0B0\n1F0,2F0,2B0,1B0\n";
  Imported imp;
  Diag d;
  EXPECT_FALSE(importText(text, imp, d));
  EXPECT_EQ(d.loc.line, 1);
  EXPECT_EQ(d.loc.col, 1);
  EXPECT_NE(d.message.find("deadlock: rank 0 blocks at 3F0, which waits for "
                           "2F0 on rank 1"),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("rank 1 at 1F0 (2:1)"), std::string::npos)
      << d.message;
  // The same table in a valid order imports: the check is not vacuous.
  EXPECT_TRUE(importText("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n", imp, d))
      << d.message;
}

TEST(Check, OverlapGroupWaitsForAllItsInputs) {
  // The group starts only when both 1F1 (needs 0F1) and 1B0 can run; rank 0
  // runs 0F1 only after 0B0, which needs the group's 1B0: a cycle through
  // the group. Run one after the other, the same actions would not block.
  const char *text = "0F0,0B0,0F1,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1B1\n";
  Imported imp;
  Diag d;
  EXPECT_FALSE(importText(text, imp, d));
  EXPECT_NE(d.message.find("deadlock: rank 0 blocks at 0B0, which waits for "
                           "the backward of stage 1 micro-batch 0"),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("rank 1 at (1F1;1B0)OVERLAP_F_B (2:5)"),
            std::string::npos)
      << d.message;
  EXPECT_TRUE(importText("0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n", imp, d))
      << d.message;
}

TEST(Format, RoundTripsThroughTheParser) {
  std::vector<std::vector<ExportOp>> rows = {
      {{sched::InstrKind::Forward, 0, 0, -1},
       {sched::InstrKind::Forward, 0, 1, 3},
       {sched::InstrKind::BackwardInput, 3, 0, 3},
       {sched::InstrKind::BackwardWeight, 3, 0, -1}},
      {{sched::InstrKind::Backward, 12, 7, -1}}};
  std::string text = formatTable(rows);
  EXPECT_EQ(text, "0F0,(0F1;3I0)OVERLAP_F_B,3W0\n12B7\n");
  Table t;
  Diag d;
  ASSERT_TRUE(parseTable(text, t, d)) << d.message;
  ASSERT_EQ(t.ranks[0].size(), 3u);
  EXPECT_EQ(t.ranks[0][1].sub.size(), 2u);
}

namespace {

/// p ranks, each running its own stage's forward and backward of micro-batch 0.
std::string oneMicrobatchPerRank(int p) {
  std::string text;
  for (int r = 0; r < p; ++r)
    text += std::to_string(r) + "F0," + std::to_string(r) + "B0\n";
  return text;
}

} // namespace

// The pipeline limits of support/Limits.h, checked with the shape: the first row past 1024
// ranks (column 0: the row), the cell of the micro-batch past 65536, the rank holding more than 64 stages, and the
// stage x micro-batch count.
TEST(Import, ShapeLimits) {
  struct Case {
    std::string text;
    int line, col;
    const char *needle;
  };
  std::string manyStages;
  for (int s = 0; s < 65; ++s)
    manyStages += std::to_string(s) + "F0,";
  for (int s = 64; s >= 0; --s)
    manyStages += std::to_string(s) + "B0" + (s ? "," : "\n");
  std::string manyChunks; // 1024 ranks x 4097 micro-batches > 2^22
  for (int r = 0; r < 1024; ++r)
    manyChunks += std::to_string(r) + "F0," + std::to_string(r) + "B0" +
                  (r == 1023 ? ",1023F4096\n" : "\n");
  const std::vector<Case> cases = {
      {oneMicrobatchPerRank(1025), 1025, 0,
       "the table has 1025 rank rows; a pipeline has at most 1024 ranks (pipeline.stages)"},
      {"0F0,0F65536\n", 1, 5,
       "micro-batch 65536 is beyond the 65536 micro-batches a pipeline runs"},
      {manyStages, 1, 0, "every rank runs 65 stages; a rank holds at most 64"},
      {manyChunks, 1, 0,
       "the table's 1024 stages x 4097 micro-batches exceed the 4194304 micro-batch chunks"},
  };
  for (const Case &c : cases) {
    Table t;
    Imported imp;
    Diag e;
    ASSERT_TRUE(parseTable(c.text, t, e)) << e.message;
    EXPECT_FALSE(checkTableShape(t, imp, e));
    EXPECT_EQ(e.loc.line, c.line) << e.message;
    EXPECT_EQ(e.loc.col, c.col) << e.message;
    EXPECT_NE(e.message.find(c.needle), std::string::npos) << e.message;
  }
  // At the limits, the shape passes.
  Table t;
  Imported imp;
  Diag e;
  ASSERT_TRUE(parseTable(oneMicrobatchPerRank(1024), t, e));
  EXPECT_TRUE(checkTableShape(t, imp, e)) << e.message;
  EXPECT_EQ(imp.ranks, 1024);
}

// A stage index past 1024 ranks x 64 stages per rank is refused while parsing, at its cell (also
// inside an OVERLAP_F_B group): the layout check sized a record per stage up to the largest
// index, 120 MB for a 10-byte `9999999F0`. The last index that fits parses.
TEST(Import, StageIndexLimit) {
  struct Case {
    std::string text;
    int col;
    const char *needle;
  };
  const std::vector<Case> cases = {
      {"9999999F0", 1, "stage 9999999 in '9999999F0' is beyond the 65536 stages a pipeline holds"},
      {"0F0,65536B0\n", 5, "stage 65536 in '65536B0' is beyond the 65536 stages"},
      {"0F0,(0B0;65536F1)OVERLAP_F_B\n", 10, "stage 65536 in '65536F1' is beyond"},
      {"0F0,65536UNSHARD\n", 5, "stage 65536 in '65536UNSHARD' is beyond"},
  };
  for (const Case &c : cases) {
    Table t;
    Diag e;
    EXPECT_FALSE(parseTable(c.text, t, e)) << c.text;
    EXPECT_EQ(e.loc.line, 1) << e.message;
    EXPECT_EQ(e.loc.col, c.col) << e.message;
    EXPECT_NE(e.message.find(c.needle), std::string::npos) << e.message;
  }
  Table t;
  Diag e;
  ASSERT_TRUE(parseTable("65535F0\n", t, e)) << e.message;
  EXPECT_EQ(t.ranks[0][0].stage, 65535);
}

// checkTableShape fills the sizes and placement without looking at the order: a table whose
// order is wrong passes it, and checkTableOrder (and checkTable) then refuse it.
TEST(Import, ShapeBeforeOrder) {
  Table t;
  Imported imp;
  Diag e;
  ASSERT_TRUE(parseTable("0B0,0F0\n1F0,1B0\n", t, e));
  ASSERT_TRUE(checkTableShape(t, imp, e)) << e.message;
  EXPECT_EQ(imp.ranks, 2);
  EXPECT_EQ(imp.stages, 2);
  EXPECT_EQ(imp.chunksPerRank, 1);
  EXPECT_EQ(imp.microbatches, 1);
  EXPECT_EQ(imp.placement, Placement::Single);
  EXPECT_FALSE(checkTableOrder(t, imp, e));
  EXPECT_NE(e.message.find("before its forward"), std::string::npos) << e.message;
  EXPECT_FALSE(checkTable(t, imp, e));
  EXPECT_NE(e.message.find("before its forward"), std::string::npos) << e.message;
}
