//===- Expand.cpp - Per-stage instruction orders for each schedule kind ---===//
//
// Each schedule kind first produces a device's order of compute operations
// (forward / backward / backward-input / backward-weight of a microbatch and
// chunk). A common step then materializes it into instructions: a Recv
// immediately before each compute that needs remote data, a Send right after
// each compute whose result a remote device needs, and the optional tail.
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/Schedule.h"

#include <algorithm>

namespace pipefill::sched {
namespace {

struct Op {
  InstrKind kind;
  int mb;
  int chunk;
};

// GPipe: all forwards, then all backwards, both in microbatch order 0..m-1.
void gpipeOrder(const PipelineSpec &spec, int, std::vector<Op> &ops) {
  int m = spec.microbatches;
  ops.reserve(2 * size_t(m));
  for (int k = 0; k < m; ++k)
    ops.push_back({InstrKind::Forward, k, 0});
  for (int k = 0; k < m; ++k)
    ops.push_back({InstrKind::Backward, k, 0});
}

// 1F1B (PipeDream-flush / Megatron non-interleaved): stage i runs
// min(p-1-i, m) warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards.
void oneFOneBOrder(const PipelineSpec &spec, int d, std::vector<Op> &ops) {
  int p = spec.stages, m = spec.microbatches;
  ops.reserve(2 * size_t(m));
  int warm = std::min(p - 1 - d, m);
  for (int k = 0; k < warm; ++k)
    ops.push_back({InstrKind::Forward, k, 0});
  for (int k = 0; k < m - warm; ++k) {
    ops.push_back({InstrKind::Forward, warm + k, 0});
    ops.push_back({InstrKind::Backward, k, 0});
  }
  for (int k = m - warm; k < m; ++k)
    ops.push_back({InstrKind::Backward, k, 0});
}

// Interleaved 1F1B in Megatron-LM's order. Device d holds chunks
// 0..v-1; chunk c on device d is virtual stage c*p + d.
void interleavedOrder(const PipelineSpec &spec, int d, std::vector<Op> &ops) {
  int p = spec.stages, m = spec.microbatches, v = spec.virtualStages;
  int total = m * v;
  int group = p * v;
  auto mbOf = [&](int k) { return (k / group) * p + k % p; };
  auto fwdChunk = [&](int k) { return (k % group) / p; };
  auto bwdChunk = [&](int k) { return v - 1 - (k % group) / p; };
  ops.reserve(2 * size_t(total));
  int64_t warmWanted = int64_t(p - d - 1) * 2 + int64_t(v - 1) * p;
  int warm = static_cast<int>(std::min<int64_t>(warmWanted, total));
  for (int k = 0; k < warm; ++k)
    ops.push_back({InstrKind::Forward, mbOf(k), fwdChunk(k)});
  for (int k = 0; k < total - warm; ++k) {
    int f = warm + k;
    ops.push_back({InstrKind::Forward, mbOf(f), fwdChunk(f)});
    ops.push_back({InstrKind::Backward, mbOf(k), bwdChunk(k)});
  }
  for (int k = total - warm; k < total; ++k)
    ops.push_back({InstrKind::Backward, mbOf(k), bwdChunk(k)});
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023, section 3.1).
// The backward is split into B (input gradient, on the critical path) and W
// (weight gradient, off it). Stage i follows the 1F1B order of F and B, and
// runs W(k) right after B(k + i): the W passes lag by i microbatches, i.e.
// by p - 1 minus the stage's warm-up count. The W passes left over at the end
// (k + i >= m) run after the last B, where they fill the cool-down triangle:
// with equal F, B and W every stage then finishes at the same time and the
// bubble per stage is (p-1)(F + B - W) instead of 1F1B's (p-1)(F + B + W).
// A stage holds at most p microbatches in flight (forward done, W not done):
// the same count as 1F1B's first stage, which is the paper's memory bound.
void zbh1Order(const PipelineSpec &spec, int d, std::vector<Op> &ops) {
  int m = spec.microbatches;
  std::vector<Op> base;
  oneFOneBOrder(spec, d, base);
  ops.reserve(3 * size_t(m));
  int nextW = 0;
  for (const Op &op : base) {
    if (op.kind == InstrKind::Forward) {
      ops.push_back(op);
      continue;
    }
    ops.push_back({InstrKind::BackwardInput, op.mb, 0});
    if (op.mb >= d) // W(op.mb - d) lags this B by d microbatches
      ops.push_back({InstrKind::BackwardWeight, nextW++, 0});
  }
  while (nextW < m)
    ops.push_back({InstrKind::BackwardWeight, nextW++, 0});
}

void materialize(const PipelineSpec &spec, int d, const std::vector<Op> &order,
                 std::vector<Instr> &list) {
  const int p = spec.stages;
  const int v = spec.virtualStages;
  const int lastVirtual = p * v - 1;
  const bool zb = spec.schedule == ScheduleKind::ZBH1;
  const StageCost &c = spec.costs[d];
  list.clear();
  list.reserve(order.size() * 2 + 2);
  auto comm = [&](InstrKind kind, Payload payload, int mb, int chunk,
                  int peer, int64_t bytes) {
    list.push_back(transferInstr(kind, payload, mb, chunk, peer, bytes));
  };
  for (const Op &op : order) {
    int vs = op.chunk * p + d;
    int prevDev = (vs - 1 + p) % p, prevChunk = (vs - 1) / p;
    int nextDev = (vs + 1) % p, nextChunk = (vs + 1) / p;
    bool hasPrev = vs > 0 && prevDev != d;
    bool hasNext = vs < lastVirtual && nextDev != d;
    Instr in;
    in.kind = op.kind;
    in.microbatch = op.mb;
    in.chunk = op.chunk;
    switch (op.kind) {
    case InstrKind::Forward:
      if (hasPrev)
        comm(InstrKind::Recv, Payload::Activation, op.mb, prevChunk,
             prevDev, spec.costs[prevDev].activationBytes);
      in.durationUs = c.forwardUs / v;
      in.bytes = c.stashBytes / v;
      list.push_back(in);
      if (hasNext)
        comm(InstrKind::Send, Payload::Activation, op.mb, op.chunk,
             nextDev, c.activationBytes);
      break;
    case InstrKind::Backward:
    case InstrKind::BackwardInput:
      if (hasNext)
        comm(InstrKind::Recv, Payload::Gradient, op.mb, nextChunk, nextDev,
             c.activationBytes);
      in.durationUs = zb ? c.backwardUs - c.backwardWeightUs
                         : c.backwardUs / v;
      list.push_back(in);
      if (hasPrev)
        comm(InstrKind::Send, Payload::Gradient, op.mb, op.chunk, prevDev,
             spec.costs[prevDev].activationBytes);
      break;
    case InstrKind::BackwardWeight:
      in.durationUs = c.backwardWeightUs;
      list.push_back(in);
      break;
    default:
      break;
    }
  }
  appendIterationTail(spec, list);
}

} // namespace

void expandStage(const PipelineSpec &spec, int stage, std::vector<Instr> &out) {
  std::vector<Op> order;
  switch (spec.schedule) {
  case ScheduleKind::GPipe:
    gpipeOrder(spec, stage, order);
    break;
  case ScheduleKind::OneFOneB:
    oneFOneBOrder(spec, stage, order);
    break;
  case ScheduleKind::Interleaved1F1B:
    interleavedOrder(spec, stage, order);
    break;
  case ScheduleKind::ZBH1:
    zbh1Order(spec, stage, order);
    break;
  }
  materialize(spec, stage, order, out);
}

bool expandSchedule(const PipelineSpec &spec, Schedule &out,
                    std::string &error) {
  if (!validateSpec(spec, error))
    return false;
  out.assign(spec.stages, {});
  for (int d = 0; d < spec.stages; ++d)
    expandStage(spec, d, out[d]);
  return true;
}

} // namespace pipefill::sched
