// CUDA backend, the device-side bubble bound (DeviceGate.h): the per-GPU and per-fill-stream
// resources, the %globaltimer calibration, the bubble edges' device-side mark, and GatedLaunch,
// which builds one bounded chunk's graph of gates and conditional bodies, launches it and reads
// back how far it got. Private to the CUDA backend's .cu files.
#ifndef PFRT_CUDA_GATE_H
#define PFRT_CUDA_GATE_H

#include "runtime/CudaDevice.h"

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
// one-thread kernel).
void markEdgeOnDevice(GpuDevice &g, cudaStream_t s, int64_t token);

// One bounded chunk as a graph: for each of its passes (a segment), a gate kernel and an IF node
// whose body is captured from what the caller enqueues on the stream between beginSegment and
// endSegment. While a segment is captured, stream-ordered allocations must go to st.allocStream
// and nothing may be freed; launchAndWait() orders those allocations before the graph.
class GatedLaunch {
public:
  explicit GatedLaunch(CudaStreamState &st);
  ~GatedLaunch();
  GatedLaunch(const GatedLaunch &) = delete;
  GatedLaunch &operator=(const GatedLaunch &) = delete;

  void beginSegment(const GateArgs &args);
  void endSegment();
  // Ends a capture left open (an error while enqueuing a segment); what it captured is dropped.
  void abandon();
  void instantiate();
  // Launches the instantiated graph after the allocations, waits for it, and returns the gates'
  // state; st.lastStartUs/lastEndUs: the graph's span on the GPU (events around it).
  GateState launchAndWait();

private:
  CudaStreamState &st_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaGraphNode_t last_ = nullptr;
  cudaGraph_t body_ = nullptr;
  bool capturing_ = false;
};

} // namespace cudabk
} // namespace pfrt

#endif // PFRT_CUDA_GATE_H
