// Internal model of a stream program (what the builder API builds), its validation and the facts
// derived from it that the executor and the report need.
#ifndef PFRT_PROGRAM_H
#define PFRT_PROGRAM_H

#include "runtime/ProgramCheck.h"
#include "runtime/pfrt.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfrt {

// Error carrying a status; thrown inside the runtime, converted at the C API boundary. A refusal
// of a program also says where in it (the compiler maps that back to its IR; ProgramCheck.h).
class Error : public std::runtime_error {
public:
  Error(pfrt_status status, const std::string &message, const ProgramSite &site = {})
      : std::runtime_error(message), status_(status), site_(site) {}
  pfrt_status status() const { return status_; }
  const ProgramSite &site() const { return site_; }

private:
  pfrt_status status_;
  ProgramSite site_;
};

enum class OpKind : uint8_t { Compute, Send, Recv, Record, Wait, Bubble, Fill, Copy, Alloc, Free };

const char *opKindName(OpKind kind);
const char *computeKindName(pfrt_compute_kind kind);
const char *bubbleKindName(pfrt_bubble_kind kind);
const char *fillKindName(pfrt_fill_kind kind); // "training" or "inference"

struct Op {
  OpKind kind = OpKind::Compute;
  // Compute
  pfrt_compute_kind compute = PFRT_COMPUTE_FORWARD;
  uint32_t microbatch = 0, chunk = 0;
  // Compute, Send, Recv, Copy
  double plannedUs = 0, plannedStartUs = 0;
  // Send, Recv
  uint32_t peer = 0, tag = 0;
  // Send, Recv, Copy, Alloc
  uint64_t bytes = 0;
  // Record, Wait
  uint32_t event = 0;
  // Bubble
  pfrt_bubble_desc bubble{};
  // Fill
  pfrt_fill_chunk_desc fill{};
  // Copy
  pfrt_copy_direction direction = PFRT_COPY_HOST_TO_DEVICE;
  // Alloc, Free
  uint32_t buffer = 0;
};

struct Stream {
  std::string name;
  pfrt_stream_role role = PFRT_STREAM_MAIN;
  pfrt_priority priority = PFRT_PRIORITY_DEFAULT;
  std::vector<Op> ops;
  // The priority after applying the role default.
  pfrt_priority effectivePriority() const;
};

struct Event {
  std::string name;
};

struct Device {
  pfrt_device_desc desc{};
  std::vector<Stream> streams;
  std::vector<Event> events;
};

struct FillLayer {
  std::string name;
  pfrt_fill_layer_desc desc{}; // desc.name is not used (points nowhere); see `name`
};

struct FillJob {
  std::string name;
  pfrt_fill_kind kind = PFRT_FILL_INFERENCE;
  uint64_t samples = 0, samplesPerIteration = 0, seed = 0;
  float learningRate = 0;
  std::vector<FillLayer> layers;
  uint32_t passes() const {
    return static_cast<uint32_t>(layers.size()) * (kind == PFRT_FILL_TRAINING ? 2u : 1u);
  }
};

struct Program {
  std::string name;
  uint32_t iterations = 0;
  uint64_t seed = 0;
  double plannedIterationUs = 0;
  std::vector<Device> devices;
  std::vector<FillJob> jobs;
};

// Facts derived by validate().
struct ProgramInfo {
  struct DeviceInfo {
    uint32_t mainStream = 0;
    // bubble id -> op index in the main stream
    std::map<uint32_t, uint32_t> bubbleOp;
    // per event: number of wait ops
    std::vector<uint32_t> eventWaiters;
    // per stream: does it contain fill chunks
    std::vector<bool> streamHasFill;
  };
  struct JobInfo {
    uint32_t passes = 0;
    uint64_t stride = 0; // samples per iteration
    // device -> stream holding the job's chunks there
    std::map<uint32_t, uint32_t> streamOnDevice;
    int32_t minIterationOffset = 0; // <= 0
  };
  std::vector<DeviceInfo> devices;
  std::vector<JobInfo> jobs;
};

// Limits of the stream model (docs/reliability.md): what validate() accepts.
constexpr uint32_t kMaxIterations = 1000000;  // per run; longer runs resume from checkpoints
constexpr size_t kMaxDevices = 4096;
constexpr size_t kMaxStreamsPerDevice = 16;
constexpr size_t kMaxStreams = 4096;          // host backend: one thread per stream
constexpr size_t kMaxOpsPerStream = size_t(1) << 22;
constexpr size_t kMaxFillJobs = 4096;
constexpr size_t kMaxFillLayers = 4096;
constexpr int32_t kMaxIterationSpan = 1024;   // -iteration_offset, period, phase
constexpr uint32_t kMaxFillBatch = 65536;
constexpr uint32_t kMaxLayerDim = 65536;
// Real us per planned us (pfrt_options / pfrt_session_options time_scale): beyond these a plan's
// ops last hours per microsecond or vanish below the clock's resolution.
constexpr double kMinTimeScale = PFRT_MIN_TIME_SCALE, kMaxTimeScale = PFRT_MAX_TIME_SCALE;

// Checks every rule of the stream model; throws Error(PFRT_ERROR_INVALID_PROGRAM) naming the
// device/stream/op at fault.
ProgramInfo validate(const Program &program);

// Refuses a run of `iterations` whose memory (the timeline) or threads exceed what the machine
// has, saying so (Error PFRT_ERROR_INVALID_ARGUMENT). The host fill's memory is checked once the
// backend and its dimension cap are known (checkHostFillFits, runtime/Workload.h).
void checkRunFits(const Program &program, uint64_t iterations);

// The machine's memory in bytes (16 GiB when the system does not say).
uint64_t physicalMemoryBytes();

// Planned duration of an op: the op's own planned time, or the stage calibration / interconnect
// figures when it is 0.
double effectivePlannedUs(const Device &device, const Op &op);

// Planned iteration time of the program (see StreamProgram.planned_iteration_us).
double plannedIterationUs(const Program &program);

// Human-readable location "device D stream S ('name') op I (kind)".
std::string opLocation(const Program &program, uint32_t device, uint32_t stream, uint32_t op);

/// Whether fill chunk `f` runs in loop iteration `it` of a periodic plan; if so
/// `*logical` is its period index plus iteration_offset (negative: skipped).
inline bool chunkRunsIn(const pfrt_fill_chunk_desc &f, int64_t it, int64_t *logical) {
  const int64_t period = f.period ? f.period : 1;
  const int64_t phase = f.phase;
  if (it < phase || (it - phase) % period != 0)
    return false;
  *logical = (it - phase) / period + f.iteration_offset;
  return true;
}

} // namespace pfrt

// The opaque handle of the C API.
struct pfrt_program {
  pfrt::Program program;
};

#endif // PFRT_PROGRAM_H
