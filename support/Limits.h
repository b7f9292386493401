//===- Limits.h - documented ranges of every numeric input field -*- C++ -*-===//
//
// One table holds the accepted range of every numeric field of every protobuf
// input (JobSpec, StreamProgram, MeasuredProfile, FillCheckpoint) and the
// largest element count of every repeated field. Readers call checkLimits()
// right after parsing, so no later stage ever sees a NaN, an infinity or a
// size whose products overflow 64 bits. docs/reliability.md prints the table;
// a unit test checks that every numeric field of the schemas has an entry.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_LIMITS_H
#define PIPEFILL_SUPPORT_LIMITS_H

#include "support/ProtoText.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill {

struct FieldLimit {
  const char *field; ///< full protobuf name, e.g. "pipefill.StageCost.forward_us"
  double min, max;   ///< inclusive range (for repeated fields: of each element)
  bool positive;     ///< min is exclusive (value must be > min)
  const char *why;   ///< the reason for the bounds, shown when max is exceeded
};

struct CountLimit {
  const char *field; ///< full name of a repeated field
  double max;        ///< most elements
  const char *why;
};

/// Ranges used by the limits (bytes: 1 PiB covers any GPU and host memory).
constexpr double kMaxBytes = 1125899906842624.0; // 2^50
constexpr double kMaxUs = 1e9;                   // 1000 s for one op or per-sample cost
constexpr double kMaxClockUs = 1e15;             // ~31 years: absolute start / arrival times
constexpr double kMaxCheckpointCount = 1e15;     // samples or steps one fill checkpoint counts

/// The pipeline's shape. The JobSpec reader checks them through the table
/// (pipefill.Pipeline.*), the pipefill.pipeline verifier on MLIR written by
/// hand, so no stage of the compiler sees a pipeline it cannot hold.
constexpr int64_t kMaxStages = 1024;
constexpr int64_t kMaxMicrobatches = 65536;
constexpr int64_t kMaxVirtualStages = 64;
/// Most micro-batch chunks (stages x micro-batches x virtual stages) one
/// pipeline may expand to: about 2^24 instructions, well inside memory and a
/// few seconds of compile time.
constexpr int64_t kMaxPipelineChunks = int64_t(1) << 22;
/// Iterations of one run (the runtime's kMaxIterations; longer runs resume
/// from checkpoints): the compiler's --iterations, pfstream.program and
/// StreamProgram.iterations.
constexpr int64_t kMaxIterations = 1000000;
/// A fill plan's shape (pipefill.assignment): the runtime repeats a chunk at
/// most every 1024 iterations (StreamProgram FillChunkOp.period), runs fill
/// batches of at most 65536 samples, and a prefix longer than a run would
/// never reach its period.
constexpr int64_t kMaxFillPeriod = 1024;
constexpr int64_t kMaxFillBatch = 65536;
constexpr int64_t kMaxFillPrefix = kMaxIterations;

const std::vector<FieldLimit> &fieldLimits();
const std::vector<CountLimit> &countLimits();
const FieldLimit *findFieldLimit(const std::string &fullName);
const CountLimit *findCountLimit(const std::string &fullName);

/// Checks every numeric field of `msg` (recursively) that is set, or written
/// in the text when `tree` is given, against its range, and every repeated
/// field against its count limit. Errors name the field path ("stage[0].
/// forward_us") and, with a tree, its file:line:col. False on any error.
/// A numeric field without a table entry is itself reported (a schema change
/// that forgot its limit). Every `string` field must be UTF-8 (support/Utf8.h).
bool checkLimits(const google::protobuf::Message &msg,
                 const google::protobuf::TextFormat::ParseInfoTree *tree,
                 const std::string &file, Diagnostics &diags,
                 const std::string &pathPrefix = "");

/// "2^50" / "1e+09" style text of a bound for messages and docs.
std::string formatBound(double v);

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_LIMITS_H
