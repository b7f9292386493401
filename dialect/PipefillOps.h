//===- PipefillOps.h - pipefill operations ----------------------*- C++ -*-===//
#ifndef PIPEFILL_DIALECT_PIPEFILLOPS_H
#define PIPEFILL_DIALECT_PIPEFILLOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialect/PipefillDialect.h"
#include "dialect/PipefillEnums.h.inc"
#include "dialect/FillTable.h"
#include "dialect/InstrTiming.h"

#include "llvm/ADT/STLExtras.h"

#include <type_traits>
#include <utility>

namespace pipefill::detail {
// What an instruction op carries, for InstructionOpInterface's default
// implementations (resolved at compile time per op class).
template <typename T>
using MicrobatchGetter = decltype(std::declval<T &>().getMicrobatch());
template <typename T>
using DurationGetter = decltype(std::declval<T &>().getDurationUs());
template <typename T>
using PeerGetter = decltype(std::declval<T &>().getPeer());
template <typename T>
using BytesGetter = decltype(std::declval<T &>().getBytes());
template <typename T>
inline constexpr bool kHasMicrobatch = llvm::is_detected<MicrobatchGetter, T>::value;
template <typename T>
inline constexpr bool kHasDuration = llvm::is_detected<DurationGetter, T>::value;
template <typename T>
inline constexpr bool kHasPeer = llvm::is_detected<PeerGetter, T>::value;
template <typename T>
inline constexpr bool kHasBytes = llvm::is_detected<BytesGetter, T>::value;
} // namespace pipefill::detail

#include "dialect/PipefillInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/PipefillOps.h.inc"

namespace pipefill {
/// The fill time (time x repeat) a bubble's chunks of one job put into one
/// iteration of that job's plan.
struct FillIterationTotal {
  llvm::StringRef job;
  int64_t iteration;
  double us;
};

/// A bubble's (job, iteration) totals, each summed in chunk order, sorted by
/// (job name, iteration).
llvm::SmallVector<FillIterationTotal, 8> fillIterationTotals(BubbleOp bubble);

/// Each job's worst iteration total in `totals` (sorted as above), in job
/// name order.
llvm::SmallVector<std::pair<llvm::StringRef, double>, 4>
worstIterationPerJob(llvm::ArrayRef<FillIterationTotal> totals);

/// The most fill time any iteration of the run puts into `bubble`, all jobs
/// together. Iteration t of the run is a job's listed iteration t < prefix ?
/// t : prefix + (t - prefix) % period (its pipefill.assignment), so all repeat
/// after max prefix + lcm of the periods; past 4096 iterations (or without
/// assignments) it is the stricter sum of each job's largest iteration total.
/// That sum is also returned, without walking the iterations, when it fits
/// the bubble: an upper bound, exact for one job. Callers compare the result
/// with the duration: the verifier holds it to it; the report's predicted
/// slowdown is what passes it.
double worstIterationFillUs(BubbleOp bubble);

/// A stage's pipefill.assignment ops, in order. They are its leading ops
/// (AssignmentOp's verifier keeps them before every instruction and
/// bubble), so they are found without walking the 10^3-10^5 ops after them.
inline auto stageAssignments(StageOp stage) {
  mlir::Block &body = stage.getBody().front();
  mlir::Block::iterator end = body.begin();
  while (end != body.end() && mlir::isa<AssignmentOp>(*end))
    ++end;
  return llvm::map_range(llvm::make_range(body.begin(), end),
                         [](mlir::Operation &op) { return mlir::cast<AssignmentOp>(op); });
}
} // namespace pipefill

#endif // PIPEFILL_DIALECT_PIPEFILLOPS_H
