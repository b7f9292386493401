//===- TorchSchedule.h - torch.distributed.pipelining action tables -------===//
//
// Plain C++17 reading, checking and writing of the per-rank action tables
// that torch.distributed.pipelining's `_PipelineScheduleRuntime` loads with
// `_load_csv` (one CSV row per pipeline rank, one action per cell, e.g.
// `0F3`, `1I2`, `1W2`, `0B1`, `2SEND_F0`, `(0F1;3B0)OVERLAP_F_B`).
//
// The importer turns a table into pipefill's per-device instruction lists
// (algo/schedule/Schedule.h): torch stage s is placed on the rank whose row
// runs it, its chunk is its position among that rank's stages in ascending
// order, and a send/recv pair is made wherever neighbouring stages sit on
// different ranks. Before that it checks the table completely and reports
// the first problem with the line and column of the offending cell; nothing
// here throws or aborts on bad input. docs/torch.md describes the format,
// the checks and the mapping.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_TORCH_TORCHSCHEDULE_H
#define PIPEFILL_ALGO_TORCH_TORCHSCHEDULE_H

#include "algo/schedule/Schedule.h"

#include <string>
#include <string_view>
#include <vector>

namespace pipefill::torchsched {

/// torch's `_ComputationType`, as spelled in a table cell.
enum class ActKind {
  Forward,        ///< F
  FullBackward,   ///< B
  BackwardInput,  ///< I
  BackwardWeight, ///< W
  SendF,
  RecvF,
  SendB,
  RecvB,
  WaitSendF,
  WaitSendB,
  Unshard,
  Reshard,
  ReduceGrad,
  WaitReduceGrad,
  OverlapFB ///< a group of compute sub-actions run as one action
};

const char *toString(ActKind kind); ///< torch's spelling ("F", "SEND_F", ...)
bool isCompute(ActKind kind);       ///< F, B, I, W

/// Where a cell sits in the file (1-based). A problem with a row as a whole
/// (an action missing from it) is located at its line, column 0.
struct Loc {
  int line = 0, col = 0;
};

struct Action {
  ActKind kind = ActKind::Forward;
  int stage = -1;      ///< torch stage index; -1 for OVERLAP_F_B groups
  int microbatch = -1; ///< -1 when the action has none (UNSHARD, ...)
  Loc loc;
  std::vector<Action> sub; ///< OVERLAP_F_B only: its compute sub-actions
};

/// The parsed table: row r is rank r's actions in order. Empty cells (torch's
/// `None` placeholders of the compute-only format) are dropped.
struct Table {
  std::vector<std::vector<Action>> ranks;
  std::vector<int> rowLine; ///< file line of each rank's row
  bool hasComms = false;    ///< any SEND/RECV/WAIT_SEND action
};

/// A problem with the table, located at a cell, a row (column 0) or at
/// line 1 col 1.
struct Diag {
  Loc loc;
  std::string message;
};

/// Parses CSV text (rows separated by "\n" or "\r\n"; cells by ","; a cell
/// may be double-quoted). A trailing empty line ends the file; any other
/// empty line is a rank without actions. Accepts exactly torch's cell
/// grammar: `<stage><TYPE>[<microbatch>]` and `(<a>;<b>;...)OVERLAP_F_B`.
bool parseTable(std::string_view text, Table &table, Diag &diag);

/// Parses one cell's text (already trimmed) into `action`, located at
/// (line, col); the grammar of parseTable.
bool parseAction(std::string_view text, int line, int col, Action &action,
                 Diag &diag);

/// One compute operation of an imported schedule, in rank order.
struct ComputeOp {
  sched::InstrKind kind = sched::InstrKind::Forward; ///< Forward, Backward,
                                                     ///< BackwardInput/Weight
  int stage = 0;      ///< torch stage
  int chunk = 0;      ///< position of the stage on its rank
  int microbatch = 0;
  int overlapGroup = -1; ///< index of its OVERLAP_F_B cell on the rank, or -1
  Loc loc;
};

/// How stages are laid out over ranks.
enum class Placement {
  Single,      ///< one stage per rank, stage r on rank r
  Interleaved, ///< stage s on rank s mod p (torch's "loop" style)
  VShape,      ///< two stages per rank: r and 2p-1-r (ZBV, DualPipeV)
  Custom       ///< any other layout with the same stage count on every rank
};
const char *toString(Placement placement);

/// A checked table: sizes, placement and each rank's compute order.
struct Imported {
  int ranks = 0;        ///< p
  int stages = 0;       ///< S = p * v torch stages
  int chunksPerRank = 0; ///< v
  int microbatches = 0; ///< m
  Placement placement = Placement::Single;
  std::vector<int> rankOfStage;               ///< [S]
  std::vector<int> chunkOfStage;              ///< [S]
  std::vector<std::vector<int>> stagesOfRank; ///< [p][v], ascending
  std::vector<std::vector<ComputeOp>> order;  ///< [p]
  bool hadComms = false;
  bool splitBackward = false; ///< some stage uses I + W
};

/// Checks a parsed table and derives the placement:
///  - cells well formed for their kind (compute and SEND/RECV/WAIT_SEND
///    actions need a micro-batch; stages and micro-batches are numbered
///    densely from 0; every rank holds the same number of stages and every
///    stage runs on exactly one rank);
///  - every (stage, micro-batch) has exactly one F and either one B or one I
///    and one W, with B/I after F and W after I on the rank;
///  - with communication actions, every cross-rank F or B/I dependency has
///    its SEND on the producer's rank after the producer and its RECV on the
///    consumer's rank before the consumer, and no other transfers exist;
///  - the table runs to completion: ranks execute their rows in order, a
///    compute waits for its inputs (F of stage s-1, B/I of stage s+1 of the
///    same micro-batch), a RECV for its SEND, a WAIT_SEND for its RECV;
///    when no rank can move, the first blocked action (in rank order) is
///    reported with what it waits for.
bool checkTable(const Table &table, Imported &out, Diag &diag);
/// checkTable in two halves. checkTableShape checks the layout and the
/// placement (the first point above) and fills `out`'s sizes and placement,
/// refusing tables beyond the pipeline limits of support/Limits.h (1024
/// ranks, 64 stages per rank, 65536 micro-batches, 2^22 chunks); its cost is
/// linear in the table. checkTableOrder checks the rest on a table
/// checkTableShape accepted; its run to completion costs ranks x actions, so
/// a caller that compares the shape with something else (the importer: with
/// the job) does that in between.
bool checkTableShape(const Table &table, Imported &out, Diag &diag);
bool checkTableOrder(const Table &table, Imported &out, Diag &diag);

/// Per-device costs, one entry per rank (pipefill's convention: the whole
/// device, all of its chunks together; each chunk costs 1/v of it).
/// Builds pipefill's instruction lists: a Recv right before every compute
/// whose input comes from another rank, a Send right after every compute
/// whose output another rank needs, the iteration tail when spec.tail.
/// `spec` supplies costs (spec.costs.size() == ranks) and the tail.
void toPipefill(const Imported &imported, const sched::PipelineSpec &spec,
                sched::Schedule &out);

/// One compute action to write back, per rank in order.
struct ExportOp {
  sched::InstrKind kind = sched::InstrKind::Forward;
  int stage = 0;
  int microbatch = 0;
  int overlapGroup = -1; ///< consecutive ops with the same group >= 0 form
                         ///< one OVERLAP_F_B cell
};

/// Writes torch's compute-only CSV: one row per rank, cells `<s>F<mb>`,
/// `<s>B<mb>`, `<s>I<mb>`, `<s>W<mb>` and `(<a>;<b>)OVERLAP_F_B`, rows ended
/// by "\n" (torch's csv reader takes either line ending).
std::string formatTable(const std::vector<std::vector<ExportOp>> &ranks);

} // namespace pipefill::torchsched

#endif // PIPEFILL_ALGO_TORCH_TORCHSCHEDULE_H
