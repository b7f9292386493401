// CUDA backend, the device-side bubble bound (DeviceGate.h): the per-GPU and per-fill-stream
// resources, the %globaltimer calibration, the bubble edges' device-side mark, and GatedLaunch,
// which builds and launches one bounded chunk's gated graphs (one per pass) and reads back how far
// it got. Private to the CUDA backend's .cu files.
#ifndef PFRT_CUDA_GATE_H
#define PFRT_CUDA_GATE_H

#include "runtime/CudaDevice.h"

#include <vector>

namespace pfrt {
namespace cudabk {

// PFRT_CUDA_DEVICE_GATE: "1" (or unset) on, "0" off; anything else is an error. Read before any
// CUDA call, so a bad value is reported on machines without a GPU too.
bool deviceGateRequested();

// GPU g's lastEdge word and calibration buffer; g.gateOn = `requested` (the word is made either
// way: edges always set it).
void createGate(GpuDevice &g, bool requested);
void destroyGate(GpuDevice &g);
// A fill stream's gate state, allocation stream and cuBLAS workspace (captured cuBLAS calls must
// not allocate).
void createStreamGate(CudaStreamState &st);
void destroyStreamGate(CudaStreamState &st);

// Reads %globaltimer and the host clock at (nearly) the same instant: the pair with the shortest
// round trip of a few. The setup stream must be idle (it is, in the loop).
void calibrateGlobalTimer(GpuDevice &g);
// lastEdge = token + 1, ordered on stream s (cuStreamWriteValue64 where the driver has it, else a
// one-thread kernel); nothing while the GPU's gates are off.
void markEdgeOnDevice(GpuDevice &g, cudaStream_t s, int64_t token);

// One bounded chunk as one small graph per pass: a gate kernel and an IF node whose body is
// captured from what the caller enqueues on the stream between beginSegment and endSegment.
// endSegment instantiates the graph and launches it at once, so the GPU runs pass k while the
// host captures pass k + 1: the host's cost to build a graph delays only the first pass as long
// as each pass takes longer on the GPU than the next one takes to build; shorter passes wait for
// their graphs, and their gates see that much less of the bubble. The gates share the stream's GateState, so a pass runs only if every earlier one did. While a
// segment is captured, stream-ordered allocations must go to st.allocStream and nothing may be
// freed; endSegment orders those allocations before the segment.
class GatedLaunch {
public:
  explicit GatedLaunch(CudaStreamState &st);
  // Ends a capture left open; after an error, waits for what was launched before destroying it.
  ~GatedLaunch();
  GatedLaunch(const GatedLaunch &) = delete;
  GatedLaunch &operator=(const GatedLaunch &) = delete;

  void beginSegment(const GateArgs &args);
  void endSegment();
  // Ends a capture left open (an error while enqueuing a segment); what it captured is dropped.
  void abandon();
  // Segments launched so far.
  size_t launched() const { return execs_.size(); }
  // The host's cost of each launched segment, us (PFRT_CUDA_GATE_TRACE): capturing the pass
  // (beginSegment to the end of the capture), instantiating the graph, and launching it.
  struct SegmentCost {
    double captureUs = 0, instantiateUs = 0, launchUs = 0;
  };
  const std::vector<SegmentCost> &costs() const { return costs_; }
  // Orders every allocation made before the stream's later work, waits for the launched
  // segments, and returns the gates' state (passesRun 0 when none was launched);
  // st.lastStartUs/lastEndUs: their span on the GPU, from before the first graph to the end of
  // the graph of the last pass that ran (of the last graph when none ran).
  GateState wait();

private:
  CudaStreamState &st_;
  std::vector<cudaGraph_t> graphs_;
  std::vector<cudaGraphExec_t> execs_;
  std::vector<SegmentCost> costs_;
  double segmentT0_ = 0;
  cudaGraph_t body_ = nullptr; // the segment's IF body (owned by its graph)
  bool capturing_ = false, waited_ = false;
};

} // namespace cudabk
} // namespace pfrt

#endif // PFRT_CUDA_GATE_H
