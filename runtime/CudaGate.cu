// CUDA backend, the device-side bubble bound (see CudaGate.h and DeviceGate.h).
#include "runtime/CudaGate.h"

#include "runtime/CudaKernels.h"

#include <cuda.h> // driver types for cuStreamWriteValue64, fetched at run time (no libcuda link)

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace pfrt {
namespace cudabk {

namespace {

constexpr size_t kBlasWorkspace = size_t(32) << 20; // cuBLAS's recommendation for Hopper

using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

// cuStreamWriteValue64 from the driver the runtime loaded; null when it has none.
WriteValue64 writeValue64() {
  static const WriteValue64 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return WriteValue64(nullptr);
    }
    return reinterpret_cast<WriteValue64>(p);
  }();
  return fn;
}

const char *nodeTypeName(cudaGraphNodeType t) {
  switch (t) {
  case cudaGraphNodeTypeKernel:
    return "kernel";
  case cudaGraphNodeTypeMemcpy:
    return "memcpy";
  case cudaGraphNodeTypeMemset:
    return "memset";
  case cudaGraphNodeTypeHost:
    return "host";
  case cudaGraphNodeTypeGraph:
    return "child graph";
  case cudaGraphNodeTypeEmpty:
    return "empty";
  case cudaGraphNodeTypeWaitEvent:
    return "event wait";
  case cudaGraphNodeTypeEventRecord:
    return "event record";
  case cudaGraphNodeTypeExtSemaphoreSignal:
    return "external semaphore signal";
  case cudaGraphNodeTypeExtSemaphoreWait:
    return "external semaphore wait";
  case cudaGraphNodeTypeMemAlloc:
    return "allocation";
  case cudaGraphNodeTypeMemFree:
    return "free";
  case cudaGraphNodeTypeConditional:
    return "conditional";
  default:
    return "unknown";
  }
}

// "12 kernel, 2 memcpy, 1 memset": the node types of a graph (its top level), for diagnostics.
std::string describeGraph(cudaGraph_t graph) {
  size_t n = 0;
  if (!graph || cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
    cudaGetLastError();
    return "unknown";
  }
  std::vector<cudaGraphNode_t> nodes(n);
  if (n && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
    cudaGetLastError();
    return "unknown";
  }
  std::map<std::string, size_t> count;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    ++count[cudaGraphNodeGetType(node, &t) == cudaSuccess ? nodeTypeName(t) : "unknown"];
  }
  std::string out;
  for (const auto &[type, k] : count)
    out += (out.empty() ? "" : ", ") + std::to_string(k) + " " + type;
  return out.empty() ? "no nodes" : out;
}

} // namespace

bool deviceGateRequested() { return envSwitch("PFRT_CUDA_DEVICE_GATE"); }

void createGate(GpuDevice &g, bool requested) {
  PFRT_CUDA(cudaMalloc(&g.lastEdge, sizeof(unsigned long long)));
  PFRT_CUDA(cudaMemsetAsync(g.lastEdge, 0, sizeof(unsigned long long), g.setup));
  PFRT_CUDA(cudaHostAlloc(&g.timerHost, sizeof(unsigned long long), cudaHostAllocMapped));
  PFRT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void **>(&g.timerDevice), g.timerHost, 0));
  // Stream memory operations need driver support
  // (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS): try one with a value the word does not
  // hold and read it back (a write accepted but not done would leave every gate blind to main's
  // edges); fall back to a kernel if refused or not done.
  if (WriteValue64 fn = writeValue64()) {
    constexpr unsigned long long kProbe = 0x7066727470726f62ull;
    bool done = fn(g.setup, reinterpret_cast<CUdeviceptr>(g.lastEdge), kProbe,
                   CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS;
    if (done) {
      // A write accepted but failing when it runs (a virtualised GPU may refuse stream memory
      // operations late) is a fallback too, not a failed run: nothing here throws.
      unsigned long long back = 0;
      done = cudaMemcpyAsync(&back, g.lastEdge, sizeof back, cudaMemcpyDeviceToHost, g.setup) ==
                 cudaSuccess &&
             cudaStreamSynchronize(g.setup) == cudaSuccess && back == kProbe;
    }
    cudaGetLastError(); // a refused probe's error is not the next call's
    g.edgeMemOp = done;
    PFRT_CUDA(cudaMemsetAsync(g.lastEdge, 0, sizeof(unsigned long long), g.setup));
  }
  PFRT_CUDA(cudaStreamSynchronize(g.setup));
  g.gateOn = requested;
}

void destroyGate(GpuDevice &g) {
  cudaFree(g.lastEdge);
  cudaFreeHost(g.timerHost);
  g.lastEdge = nullptr;
  g.timerHost = g.timerDevice = nullptr;
}

void createStreamGate(CudaStreamState &st) {
  PFRT_CUDA(cudaHostAlloc(&st.gateHost, sizeof(GateState), cudaHostAllocMapped));
  *st.gateHost = GateState{};
  PFRT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void **>(&st.gateDevice), st.gateHost, 0));
  PFRT_CUDA(cudaStreamCreateWithFlags(&st.allocStream, cudaStreamNonBlocking));
  PFRT_CUDA(cudaEventCreateWithFlags(&st.allocDone, cudaEventDisableTiming));
  PFRT_CUDA(cudaEventCreate(&st.spanStart));
  PFRT_CUDA(cudaEventCreate(&st.spanEnd));
  PFRT_CUDA(cudaMalloc(&st.blasWorkspace, kBlasWorkspace));
  PFRT_CUBLAS(cublasSetWorkspace(st.blas, st.blasWorkspace, kBlasWorkspace));
}

void destroyStreamGate(CudaStreamState &st) {
  if (st.gateHost)
    cudaFreeHost(st.gateHost);
  if (st.allocStream)
    cudaStreamDestroy(st.allocStream);
  if (st.allocDone)
    cudaEventDestroy(st.allocDone);
  if (st.spanStart)
    cudaEventDestroy(st.spanStart);
  if (st.spanEnd)
    cudaEventDestroy(st.spanEnd);
  for (cudaEvent_t e : st.segmentEnds)
    cudaEventDestroy(e);
  st.segmentEnds.clear();
  cudaFree(st.blasWorkspace); // after cublasDestroy (the caller's order)
  st.gateHost = st.gateDevice = nullptr;
  st.allocStream = nullptr;
  st.allocDone = nullptr;
  st.spanStart = st.spanEnd = nullptr;
  st.blasWorkspace = nullptr;
}

void calibrateGlobalTimer(GpuDevice &g) {
  double best = -1;
  for (int i = 0; i < 5; ++i) {
    const double t0 = hostNowUs();
    cuda::readGlobalTimer(g.timerDevice, g.setup);
    PFRT_CUDA_LAUNCHED();
    PFRT_CUDA(cudaStreamSynchronize(g.setup));
    const double t1 = hostNowUs();
    if (best < 0 || t1 - t0 < best) {
      best = t1 - t0;
      g.gtNs = *reinterpret_cast<volatile unsigned long long *>(g.timerHost);
      g.gtHostUs = 0.5 * (t0 + t1);
      g.gtErrUs = 0.5 * best;
    }
  }
}

void markEdgeOnDevice(GpuDevice &g, cudaStream_t s, int64_t token) {
  if (!g.gateOn.load())
    return; // nothing reads the word: gates are off (requested, or after a build failure)
  const unsigned long long v = static_cast<unsigned long long>(token) + 1;
  if (g.edgeMemOp) {
    const CUresult r = writeValue64()(s, reinterpret_cast<CUdeviceptr>(g.lastEdge), v,
                                      CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
      throw Error(PFRT_ERROR_BACKEND,
                  "cuStreamWriteValue64 of a bubble edge failed: CUresult " + std::to_string(r));
    return;
  }
  cuda::writeValue(g.lastEdge, v, s);
  PFRT_CUDA_LAUNCHED();
}

GatedLaunch::GatedLaunch(CudaStreamState &st) : st_(st) {}

GatedLaunch::~GatedLaunch() {
  abandon();
  if (!graphs_.empty() && !waited_) // an error after a launch: the GPU may still run them
    cudaStreamSynchronize(st_.s);
  for (cudaGraphExec_t e : execs_)
    cudaGraphExecDestroy(e);
  for (cudaGraph_t g : graphs_)
    cudaGraphDestroy(g);
  cudaGetLastError();
}

void GatedLaunch::beginSegment(const GateArgs &args) {
  segmentT0_ = hostNowUs();
  cudaGraph_t graph = nullptr;
  PFRT_CUDA(cudaGraphCreate(&graph, 0));
  graphs_.push_back(graph);
  cudaGraphConditionalHandle handle;
  PFRT_CUDA(cudaGraphConditionalHandleCreate(&handle, graph, 0, cudaGraphCondAssignDefault));
  cudaGraphNode_t gate = nullptr;
  PFRT_CUDA(cuda::addGateNode(graph, handle, st_.dev->lastEdge, st_.gateDevice, args, &gate));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = handle;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 1;
  cudaGraphNode_t cond = nullptr;
  PFRT_CUDA(cudaGraphAddNode(&cond, graph, &gate, nullptr, 1, &cp));
  body_ = cp.conditional.phGraph_out[0];
  PFRT_CUDA(cudaStreamBeginCaptureToGraph(st_.s, body_, nullptr, nullptr, 0,
                                          cudaStreamCaptureModeRelaxed));
  capturing_ = true;
}

void GatedLaunch::abandon() {
  if (!capturing_)
    return;
  capturing_ = false;
  cudaGraph_t g = nullptr;
  cudaStreamEndCapture(st_.s, &g); // an invalidated capture reports an error: nothing to keep
  cudaGetLastError();
}

void GatedLaunch::endSegment() {
  cudaGraph_t g = nullptr;
  capturing_ = false;
  PFRT_CUDA(cudaStreamEndCapture(st_.s, &g));
  SegmentCost cost;
  const double captured = hostNowUs();
  cost.captureUs = captured - segmentT0_;
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiateParams ip = {};
  const cudaError_t ie = cudaGraphInstantiateWithParams(&exec, graphs_.back(), &ip);
  if (ie != cudaSuccess) {
    cudaGetLastError();
    // What the GPU refused, for the warning that turns the gates off: the instantiation's result,
    // the failing node's type, and what the pass's body holds.
    std::string why = "result " + std::to_string(static_cast<int>(ip.result_out));
    cudaGraphNodeType t;
    if (ip.errNode_out && cudaGraphNodeGetType(ip.errNode_out, &t) == cudaSuccess)
      why += std::string(", at a ") + nodeTypeName(t) + " node";
    why += "; the pass's body: " + describeGraph(body_);
    throw Error(PFRT_ERROR_BACKEND, std::string("CUDA error in cudaGraphInstantiateWithParams (") +
                                        "CudaGate.cu): " + cudaGetErrorName(ie) + ": " +
                                        cudaGetErrorString(ie) + " (" + why + ")");
  }
  const double instantiated = hostNowUs();
  cost.instantiateUs = instantiated - captured;
  // The segment's allocations (made on the allocation stream while it was captured) before it.
  const char *what = "cudaEventRecord";
  cudaError_t e = cudaEventRecord(st_.allocDone, st_.allocStream);
  if (e == cudaSuccess) {
    what = "cudaStreamWaitEvent";
    e = cudaStreamWaitEvent(st_.s, st_.allocDone, 0);
  }
  if (e == cudaSuccess && execs_.empty()) {
    what = "cudaEventRecord";
    e = cudaEventRecord(st_.spanStart, st_.s);
  }
  if (e == cudaSuccess) {
    what = "cudaGraphLaunch";
    e = cudaGraphLaunch(exec, st_.s);
  }
  if (e != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    cudaFail(e, what, __FILE__, __LINE__);
  }
  execs_.push_back(exec); // launched
  // Where the segment ends on the GPU: the chunk's span ends at its last pass that ran, not at
  // the closed gates after it (their graphs may be launched long after, as the host builds them).
  if (st_.segmentEnds.size() < execs_.size()) {
    cudaEvent_t end = nullptr;
    PFRT_CUDA(cudaEventCreate(&end));
    st_.segmentEnds.push_back(end);
  }
  PFRT_CUDA(cudaEventRecord(st_.segmentEnds[execs_.size() - 1], st_.s));
  cost.launchUs = hostNowUs() - instantiated;
  costs_.push_back(cost);
}

GateState GatedLaunch::wait() {
  waited_ = true;
  // Allocations of a segment that failed to build, too: the caller frees them on the stream.
  PFRT_CUDA(cudaEventRecord(st_.allocDone, st_.allocStream));
  PFRT_CUDA(cudaStreamWaitEvent(st_.s, st_.allocDone, 0));
  if (execs_.empty())
    return GateState{}; // nothing launched: the state is an earlier chunk's
  PFRT_CUDA(cudaEventRecord(st_.spanEnd, st_.s));
  waitStream(*st_.dev, st_.s, "a gated fill chunk"); // under the peer limit with NCCL
  const volatile GateState *s = st_.gateHost;
  const size_t ran = std::min<size_t>(s->passesRun, execs_.size());
  cudaEvent_t end =
      ran > 0 && ran <= st_.segmentEnds.size() ? st_.segmentEnds[ran - 1] : st_.spanEnd;
  float startMs = 0, spanMs = 0;
  PFRT_CUDA(cudaEventElapsedTime(&startMs, st_.dev->base, st_.spanStart));
  PFRT_CUDA(cudaEventElapsedTime(&spanMs, st_.spanStart, end));
  st_.lastStartUs = st_.dev->baseHostUs + 1000.0 * static_cast<double>(startMs);
  st_.lastEndUs = st_.lastStartUs + 1000.0 * static_cast<double>(spanMs);
  GateState out;
  out.passesRun = s->passesRun;
  out.stop = s->stop;
  out.stopNs = s->stopNs;
  out.firstNs = s->firstNs;
  out.stopEdge = s->stopEdge;
  return out;
}

} // namespace cudabk
} // namespace pfrt
