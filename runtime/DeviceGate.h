// The CUDA backend's device-side bubble bound (docs/runtime.md, "The bound on the GPU").
//
// The host decides whether a fill chunk fits what is left of its bubble before it enqueues the
// chunk, with the fill stream idle; but a chunk's passes are enqueued at once, so nothing on the
// host can stop a chunk that runs longer than predicted. So in a bounded chunk of two passes or
// more, every pass is launched as a small CUDA graph in which the pass sits in the body of a
// conditional IF node, behind a one-thread gate kernel. The gate reads the GPU's clock
// (%globaltimer) when the fill stream reaches it and runs the pass only if
//   - every earlier pass of the chunk ran (the passes that run are always a prefix),
//   - the main stream has not passed an edge after the bubble's begin edge (main has resumed:
//     the bubble is over; for a bubble followed by others before main resumes, such as a tail
//     bubble and the next warm-up bubble, the reference is the last of their begin edges), and
//   - now + the pass's predicted time <= the bubble's deadline.
// Otherwise the pass's kernels, cuBLAS calls included, never launch. The host reads the gate
// state after the chunk and keeps the passes that ran; the rest goes back to the job's queue.
//
// This header holds the decision itself, in plain C++ that both the gate kernel and the host unit
// tests compile (nvcc sees __host__ __device__).
#ifndef PFRT_DEVICE_GATE_H
#define PFRT_DEVICE_GATE_H

#include "runtime/HostDevice.h"

#include <cstdint>

namespace pfrt {

// What one gate decided (GateState::stop holds the first stop of a chunk).
enum GateOutcome : uint32_t {
  kGateRuns = 0,     // the pass runs
  kGateEnded = 1,    // the main stream passed the bubble's end before the fill stream got here
  kGateDeadline = 2, // the pass's predicted time does not fit before the deadline
  kGateEarlier = 3,  // an earlier pass of the chunk did not run
};

// The inputs of the gate before the chunk's pass number `pass` (0: its first). Times are
// %globaltimer ns.
struct GateArgs {
  uint32_t pass = 0;
  // Token + 1 of the bubble's begin edge, or of the last begin edge of the bubbles that follow it
  // before main resumes (0: none known; then only the deadline is checked).
  uint64_t beginEdge = 0;
  uint64_t deadlineNs = 0;
  uint64_t needNs = 0; // the pass's predicted time
};

// Written by the gates of one chunk (host memory mapped into the device; one per fill stream).
struct GateState {
  uint32_t passesRun = 0;
  uint32_t stop = kGateRuns; // why the first pass that did not run stopped
  uint64_t stopNs = 0;       // %globaltimer at that gate
  // Diagnostics (PFRT_CUDA_GATE_TRACE): %globaltimer at the chunk's first gate, and the device
  // word of the last bubble edge (token + 1) that the stopping gate read.
  uint64_t firstNs = 0;
  uint64_t stopEdge = 0;
};

// lastEdge: token + 1 of the last bubble edge the main stream has passed (0: none yet). Edges of
// one device are numbered in the order they are enqueued on the main stream, so an edge later
// than the begin edge having passed means main has resumed (or opened a later bubble).
PFRT_HOST_DEVICE inline GateOutcome gateDecide(uint64_t nowNs, uint64_t lastEdge,
                                               uint32_t passesRun, const GateArgs &a) {
  if (passesRun != a.pass)
    return kGateEarlier;
  if (a.beginEdge != 0 && lastEdge > a.beginEdge)
    return kGateEnded;
  if (a.needNs > a.deadlineNs || nowNs > a.deadlineNs - a.needNs)
    return kGateDeadline;
  return kGateRuns;
}

// Applies one gate to the chunk's state; returns whether its pass runs. Gate 0 starts the
// chunk's state afresh (the state is reused by every chunk of the stream, one at a time).
PFRT_HOST_DEVICE inline bool gateApply(uint64_t nowNs, uint64_t lastEdge, GateState &s,
                                       const GateArgs &a) {
  if (a.pass == 0) {
    s.passesRun = 0;
    s.stop = kGateRuns;
    s.stopNs = 0;
    s.firstNs = nowNs;
    s.stopEdge = 0;
  }
  const GateOutcome o = gateDecide(nowNs, lastEdge, s.passesRun, a);
  if (o == kGateRuns) {
    s.passesRun = a.pass + 1;
    return true;
  }
  if (o != kGateEarlier) {
    s.stop = o;
    s.stopNs = nowNs;
    s.stopEdge = lastEdge;
  }
  return false;
}

// Whether the host may leave the graph of a chunk's next pass unbuilt because its gate is sure to
// refuse it: `seen` is the chunk's gate state as the host reads it now (the gates write it to
// host memory mapped into the device, and the host clears it before the chunk), and the gate runs
// no earlier than `nowUs`, since its graph would be launched after this. So a pass that does not
// fit before the deadline on the host's clock, with `slackUs` to spare, fits on the GPU's neither:
// the two clocks agree to the calibration's error (half the round trip of its reading, a few
// microseconds, and whatever they drifted since), which the caller gives as the slack. Building a
// pass takes the host about as long as the pass runs
// when its kernels are small (docs/runtime.md §10b): without this check, a chunk whose first gate
// closed kept the fill stream busy with closed gates for as long as the host took to build them.
inline bool gateSureToRefuse(const GateState &seen, double nowUs, double needUs,
                             double deadlineUs, double slackUs) {
  return seen.stop != kGateRuns || nowUs + needUs > deadlineUs + slackUs;
}

// A deadline on the host clock (us) as %globaltimer ns, given one reading of both clocks at the
// same instant (gtNs at hostUs). Past the timer's start: 0; unbounded (+inf): the largest value.
// The offset is added in integers: the timer counts from an epoch (~1.7e18 ns), where a double
// would round to 256 ns.
inline uint64_t deadlineToGlobalNs(double deadlineUs, double hostUs, uint64_t gtNs) {
  const double deltaNs = (deadlineUs - hostUs) * 1000.0;
  if (deltaNs != deltaNs || deltaNs <= -static_cast<double>(gtNs))
    return 0; // NaN, or before the timer's start
  if (deltaNs >= static_cast<double>(UINT64_MAX - gtNs))
    return UINT64_MAX;
  return deltaNs >= 0 ? gtNs + static_cast<uint64_t>(deltaNs)
                      : gtNs - static_cast<uint64_t>(-deltaNs);
}

} // namespace pfrt

#endif // PFRT_DEVICE_GATE_H
