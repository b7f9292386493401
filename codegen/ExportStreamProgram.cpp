//===- ExportStreamProgram.cpp - pfstream -> StreamProgram ----------------===//
//
// A lowered module becomes a StreamProgram protobuf (binary or text), the
// format the runtime interprets. ExportCpp.cpp writes the same message as
// tables that the runtime replays (runtime/pfrt_tables.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/StreamProgramBuilder.h"
#include "codegen/StreamProgramWire.h"
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/ScheduleIR.h"
#include "passes/StageLowering.h"
#include "proto/stream_program.pb.h"
#include "runtime/ProgramCheck.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

using namespace mlir;

namespace pipefill {
namespace ps = pfstream;

namespace {

/// Per device, by the job symbol's uniqued name (a pointer, looked up per
/// chunk): the samples its chunks begin per period, and the job's instance.
using JobCounts = llvm::DenseMap<StringAttr, int64_t>;
using JobInstances = llvm::DenseMap<StringAttr, uint32_t>;

double f64(llvm::APFloat v) { return v.convertToDouble(); }

void setWorkload(rt::FillWorkloadLayer &out, LayerOp layer) {
  StringRef kind = layer.getWorkload() ? *layer.getWorkload() : "";
  int64_t hidden = layer.getHidden() ? *layer.getHidden() : 0;
  if (kind == "ENCODER_LAYER" && hidden > 0) {
    rt::EncoderLayerWorkload *w = out.mutable_encoder();
    w->set_hidden(hidden);
    w->set_heads(layer.getHeads() ? *layer.getHeads() : 1);
    w->set_seq(layer.getSeq() ? *layer.getSeq() : 128);
    w->set_ffn(layer.getFfn() ? *layer.getFfn() : 4 * hidden);
  } else if (kind == "MLP" && hidden > 0) {
    rt::MlpLayerWorkload *w = out.mutable_mlp();
    w->set_in(hidden);
    w->set_hidden(layer.getFfn() ? *layer.getFfn() : 4 * hidden);
    w->set_out(hidden);
  } else {
    rt::GemmChainWorkload *w = out.mutable_gemm_chain();
    w->set_width(hidden);
  }
}

ps::ProgramOp findProgram(ModuleOp module) {
  ps::ProgramOp found;
  for (ps::ProgramOp p : module.getOps<ps::ProgramOp>()) {
    if (found) {
      p.emitError() << "expected one pfstream.program per module";
      return nullptr;
    }
    found = p;
  }
  if (!found)
    module.emitError() << "contains no pfstream.program; run pipefill-opt "
                          "--pipefill-lower-to-stream first";
  return found;
}

/// Each device runs its own instance of a fill job ("name@device"): its own
/// sample stream and, for training, its own weights. The job's samples are
/// shared out in proportion to the devices' planned rates (every instance
/// of a job runs the same number of periods' worth of work otherwise).
/// `begun[device]` has an entry for every job with chunks on the device:
/// the samples of the batches its chunks begin per period. Adds the
/// instances to `out`; instanceOf[device][job] is the index of each.
LogicalResult addFillJobs(ModuleOp module, Operation *anchor, const std::vector<JobCounts> &begun,
                          rt::StreamProgram &out, std::vector<JobInstances> &instanceOf) {
  llvm::StringMap<FillJobOp> jobs;
  for (FillJobOp job : module.getOps<FillJobOp>())
    jobs[job.getSymName()] = job;
  std::map<std::pair<std::string, uint32_t>, uint32_t> instance;
  std::map<std::pair<std::string, uint32_t>, int64_t> begunPerPeriod;
  llvm::StringMap<StringAttr> nameAttr;
  for (uint32_t deviceIndex = 0; deviceIndex < begun.size(); ++deviceIndex) {
    for (auto &[name, count] : begun[deviceIndex]) {
      auto key = std::make_pair(name.getValue().str(), deviceIndex);
      begunPerPeriod[key] += count;
      instance[key] = 0;
      nameAttr[name.getValue()] = name;
    }
  }
  std::map<std::string, double> totalRate;
  for (auto &[key, b] : begunPerPeriod)
    totalRate[key.first] += double(b);
  uint32_t next = 0;
  for (auto &[key, index] : instance) {
    index = next++;
    FillJobOp job = jobs.lookup(key.first);
    if (!job)
      return anchor->emitError() << "refers to unknown fill job @" << key.first;
    rt::FillWorkload *w = out.add_fill_jobs();
    w->set_name(key.first + "@" + std::to_string(key.second));
    w->set_kind(job.getKind() == JobKind::Training ? rt::FillWorkload::TRAINING
                                                   : rt::FillWorkload::INFERENCE);
    double share = totalRate[key.first] > 0
                       ? begunPerPeriod[key] / totalRate[key.first]
                       : 0.0;
    w->set_samples(static_cast<uint64_t>(std::ceil(job.getSamples() * share)));
    w->set_seed(index + 1);
    for (LayerOp layer : job.getLayers()) {
      rt::FillWorkloadLayer *l = w->add_layers();
      l->set_name(layer.getName().str());
      setWorkload(*l, layer);
      l->set_planned_us_per_sample(f64(layer.getForwardUsPerSample()));
      l->set_planned_backward_us_per_sample(f64(layer.getBackwardUsPerSample()));
      l->set_weight_bytes(layer.getWeightBytes());
      l->set_activation_bytes_per_sample(layer.getActivationBytesPerSample());
    }
  }
  // Instance index of each job on each device, for the chunks.
  instanceOf.assign(begun.size(), JobInstances());
  for (auto &[key, index] : instance)
    instanceOf[key.second][nameAttr.lookup(key.first)] = index;
  return success();
}

/// What `begun` of addFillJobs counts, of one runtime chunk.
void countBegun(const ps::FillChunkRow &chunk, JobCounts &begun) {
  int64_t &b = begun[chunk.job.getAttr()];
  if (chunk.layerBegin == 0)
    b += chunk.batch;
}

/// A device's header: stage, memory, links and calibration.
void setDeviceHeader(ps::DeviceOp device, rt::DeviceProgram *d) {
  d->set_stage(device.getStage());
  d->set_memory_bytes(device.getMemoryBytes());
  d->set_static_bytes(device.getStaticBytes());
  d->set_planned_iteration_us(f64(device.getPlannedIterationUs()));
  d->set_p2p_latency_us(f64(device.getP2pLatencyUs()));
  d->set_p2p_bandwidth_gbps(f64(device.getP2pBandwidthGbps()));
  d->set_pcie_bandwidth_gbps(f64(device.getPcieBandwidthGbps()));
  rt::StageCalibration *c = d->mutable_calibration();
  c->set_forward_us(f64(device.getForwardUs()));
  c->set_backward_us(f64(device.getBackwardUs()));
  c->set_backward_input_us(f64(device.getBackwardInputUs()));
  c->set_backward_weight_us(f64(device.getBackwardWeightUs()));
  c->set_allreduce_us(f64(device.getAllreduceUs()));
  c->set_optimizer_us(f64(device.getOptimizerUs()));
}

void setFillChunk(const ps::FillChunkRow &chunk, int64_t bubbleId,
                  const JobInstances &jobInstance, rt::FillChunkOp *x) {
  x->set_job(jobInstance.lookup(chunk.job.getAttr()));
  x->set_bubble_id(bubbleId);
  x->set_layer_begin(chunk.layerBegin);
  x->set_layer_end(chunk.layerEnd);
  x->set_batch(chunk.batch);
  x->set_sample_begin(chunk.sampleBegin);
  x->set_iteration_offset(chunk.iterationOffset);
  x->set_weights(chunk.weightsStreamed ? rt::FillChunkOp::WEIGHTS_STREAMED
                                       : rt::FillChunkOp::WEIGHTS_RESIDENT);
  x->set_activations(chunk.activationsOnHost ? rt::FillChunkOp::ACTIVATIONS_HOST
                                             : rt::FillChunkOp::ACTIVATIONS_DEVICE);
  x->set_planned_us(chunk.plannedUs);
  x->set_peak_bytes(chunk.peakBytes);
  x->set_period(chunk.period);
  x->set_phase(chunk.phase);
}

/// One stream op in its StreamProgram form; failure (no diagnostic) for an
/// op that has none.
LogicalResult exportStreamOp(Operation &op,
                             const JobInstances &jobInstance,
                             rt::StreamOp *o) {
  if (auto compute = dyn_cast<ps::ComputeOp>(op)) {
    rt::ComputeOp *x = o->mutable_compute();
    x->set_kind(static_cast<rt::ComputeOp::Kind>(compute.getKind()));
    x->set_microbatch(compute.getMicrobatch());
    x->set_chunk(compute.getChunk());
    x->set_planned_us(f64(compute.getPlannedUs()));
    x->set_planned_start_us(compute.getProperties().planned_start_us);
  } else if (auto send = dyn_cast<ps::SendOp>(op)) {
    rt::SendOp *x = o->mutable_send();
    x->set_peer(send.getPeer());
    x->set_bytes(send.getBytes());
    x->set_tag(send.getTag());
    x->set_planned_us(f64(send.getPlannedUs()));
    x->set_planned_start_us(send.getProperties().planned_start_us);
  } else if (auto recv = dyn_cast<ps::RecvOp>(op)) {
    rt::RecvOp *x = o->mutable_recv();
    x->set_peer(recv.getPeer());
    x->set_bytes(recv.getBytes());
    x->set_tag(recv.getTag());
    x->set_planned_start_us(recv.getProperties().planned_start_us);
  } else if (auto record = dyn_cast<ps::RecordOp>(op)) {
    o->mutable_record()->set_event(record.getEvent());
  } else if (auto wait = dyn_cast<ps::WaitOp>(op)) {
    o->mutable_wait()->set_event(wait.getEvent());
  } else if (auto bubble = dyn_cast<ps::BubbleOp>(op)) {
    rt::BubbleOp *x = o->mutable_bubble();
    x->set_bubble_id(bubble.getBubbleId());
    x->set_kind(static_cast<rt::BubbleOp::Kind>(bubble.getKind()));
    x->set_planned_start_us(f64(bubble.getPlannedStartUs()));
    x->set_planned_duration_us(f64(bubble.getPlannedDurationUs()));
    x->set_free_bytes(bubble.getFreeBytes());
  } else if (auto copy = dyn_cast<ps::CopyOp>(op)) {
    rt::CopyOp *x = o->mutable_copy();
    x->set_direction(static_cast<rt::CopyOp::Direction>(copy.getDirection()));
    x->set_bytes(copy.getBytes());
    x->set_planned_us(f64(copy.getPlannedUs()));
  } else {
    return failure();
  }
  return success();
}

/// A device's header, events and streams. Returns the op without a
/// StreamProgram form that stopped it, or null.
Operation *exportDevice(ps::DeviceOp device, const JobInstances &jobInstance,
                        rt::DeviceProgram *d) {
  setDeviceHeader(device, d);
  for (ps::EventOp event : device.getBody().front().getOps<ps::EventOp>())
    d->add_events()->set_name(event.getName().str());
  for (ps::StreamOp stream : device.getBody().front().getOps<ps::StreamOp>()) {
    rt::ProgramStream *s = d->add_streams();
    s->set_name(stringifyStreamRole(stream.getRole()).str() + std::to_string(stream.getIndex()));
    s->set_role(static_cast<rt::ProgramStream::Role>(stream.getRole()));
    s->set_priority(static_cast<rt::ProgramStream::Priority>(stream.getPriority()));
    for (Operation &op : stream.getBody().front()) {
      // A bubble's chunks: one StreamProgram op each.
      if (auto chunks = dyn_cast<ps::FillChunksOp>(op)) {
        for (const ps::FillChunkRow &chunk : chunks.getChunks())
          setFillChunk(chunk, chunks.getBubbleId(), jobInstance, s->add_ops()->mutable_fill());
        continue;
      }
      if (failed(exportStreamOp(op, jobInstance, s->add_ops())))
        return &op;
    }
  }
  return nullptr;
}

/// Where the op at `site` of a program exported by exportDevice came from:
/// the device's, stream's or op's IR (the order mirrors exportDevice: events
/// and streams in IR order, a fill_chunks op one instruction per row). A
/// chunk's row has its own location, returned through `loc`.
Operation *streamSiteOp(ArrayRef<ps::DeviceOp> devices, const pfrt::ProgramSite &site,
                        std::optional<Location> &loc) {
  if (site.device < 0 || size_t(site.device) >= devices.size())
    return nullptr;
  ps::DeviceOp device = devices[site.device];
  if (site.stream < 0)
    return device;
  auto streams = device.getBody().front().getOps<ps::StreamOp>();
  auto stream = streams.begin();
  for (int64_t s = 0; s < site.stream && stream != streams.end(); ++s)
    ++stream;
  if (stream == streams.end())
    return device;
  if (site.op < 0)
    return *stream;
  int64_t index = 0;
  for (Operation &op : (*stream).getBody().front()) {
    auto chunks = dyn_cast<ps::FillChunksOp>(op);
    int64_t n = chunks ? int64_t(chunks.getChunks().size()) : 1;
    if (site.op < index + n) {
      if (chunks && chunks.getChunks()[site.op - index].loc)
        loc = Location(chunks.getChunks()[site.op - index].loc);
      return &op;
    }
    index += n;
  }
  return *stream;
}

} // namespace

namespace {
/// A program to export: its own fields, and each device's message built on
/// demand (on MLIR's threads: each device reads only its own part of the IR
/// and writes only its own message). Made from a lowered module's
/// pfstream.program, or from a compiled pipeline lowered on the fly.
struct ProgramSource {
  Operation *anchor = nullptr; // errors about the program as a whole
  std::string name;
  uint64_t iterations = 1, seed = 0;
  double plannedIterationUs = 0;
  /// Per device, for addFillJobs.
  std::vector<JobCounts> begun;
  /// Builds device `i`'s message; the op without a StreamProgram form that
  /// stopped it, or null.
  std::function<Operation *(size_t, const JobInstances &, rt::DeviceProgram *)>
      exportDevice;
  /// Where set, writes the bytes of device `i`'s message (what
  /// exportDevice's message serializes to) without building the message.
  std::function<Operation *(size_t, const JobInstances &, std::string &)> encodeDevice;
  /// The IR a refusal of the runtime's points at (pfrt::ProgramSite without
  /// a fill job; null: the anchor), and a more precise location if any.
  std::function<Operation *(const pfrt::ProgramSite &, std::optional<Location> &)> siteOp;
  /// Whether the program is loaded through the runtime's loader before it
  /// is written (runtime/ProgramCheck.h).
  bool checkWithRuntime = true;
  /// Keeps what exportDevice reads alive.
  std::shared_ptr<void> state;
};

/// The source of a lowered module's pfstream.program.
std::optional<ProgramSource> streamSource(ModuleOp module) {
  ps::ProgramOp program = findProgram(module);
  if (!program)
    return std::nullopt;
  ProgramSource src;
  src.anchor = program;
  src.name = program.getSymName().str();
  src.iterations = program.getIterations();
  src.plannedIterationUs = f64(program.getPlannedIterationUs());
  src.seed = program.getSeed();
  auto devices = std::make_shared<SmallVector<ps::DeviceOp>>(
      program.getBody().front().getOps<ps::DeviceOp>());
  for (ps::DeviceOp device : *devices) {
    // Per device first (string keys only once per job, not per chunk).
    JobCounts &begun = src.begun.emplace_back();
    device.walk([&](ps::FillChunksOp chunks) {
      for (const ps::FillChunkRow &chunk : chunks.getChunks())
        countBegun(chunk, begun);
    });
  }
  src.exportDevice = [devices](size_t i, const JobInstances &jobs,
                               rt::DeviceProgram *d) {
    return exportDevice((*devices)[i], jobs, d);
  };
  src.siteOp = [devices](const pfrt::ProgramSite &site, std::optional<Location> &loc) {
    return streamSiteOp(*devices, site, loc);
  };
  src.state = devices;
  return src;
}

/// Writes a stage's lowering (passes/StageLowering.h) as its device's
/// message: the fields exportDevice writes for the pfstream ops the pass
/// would have built.
class ProtoSink final : public StreamSink {
public:
  ProtoSink(rt::DeviceProgram *d, const JobInstances &jobInstance)
      : d(d), jobInstance(jobInstance) {}

  void header(const DeviceHeader &h) override {
    d->set_stage(h.stage);
    d->set_memory_bytes(h.memoryBytes);
    d->set_static_bytes(h.staticBytes);
    d->set_planned_iteration_us(h.plannedIterationUs);
    d->set_p2p_latency_us(h.p2pLatencyUs);
    d->set_p2p_bandwidth_gbps(h.p2pBandwidthGbps);
    d->set_pcie_bandwidth_gbps(h.pcieBandwidthGbps);
    rt::StageCalibration *c = d->mutable_calibration();
    c->set_forward_us(h.forwardUs);
    c->set_backward_us(h.backwardUs);
    c->set_backward_input_us(h.backwardInputUs);
    c->set_backward_weight_us(h.backwardWeightUs);
    c->set_allreduce_us(h.allreduceUs.value_or(0.0));
    c->set_optimizer_us(h.optimizerUs.value_or(0.0));
  }
  void event(Location, uint64_t index) override {
    d->add_events()->set_name("bubble" + std::to_string(index));
  }
  void streams(Location, bool fill) override {
    main = addStream(0, ps::StreamRole::Main, ps::Priority::High);
    if (fill)
      this->fill = addStream(1, ps::StreamRole::Fill, ps::Priority::Low);
  }
  void record(Location, int64_t event) override {
    main->add_ops()->mutable_record()->set_event(event);
  }
  void bubble(BubbleOp bubble, int64_t id) override {
    rt::BubbleOp *x = main->add_ops()->mutable_bubble();
    x->set_bubble_id(id);
    x->set_kind(static_cast<rt::BubbleOp::Kind>(toStreamKind(bubble.getKind())));
    x->set_planned_start_us(bubble.getStartUs());
    x->set_planned_duration_us(bubble.getDurationUs());
    x->set_free_bytes(bubble.getFreeBytes());
  }
  void send(Location, int64_t peer, int64_t bytes, int64_t tag, double plannedUs,
            double startUs) override {
    rt::SendOp *x = main->add_ops()->mutable_send();
    x->set_peer(peer);
    x->set_bytes(bytes);
    x->set_tag(tag);
    x->set_planned_us(plannedUs);
    x->set_planned_start_us(startUs);
  }
  void recv(Location, int64_t peer, int64_t bytes, int64_t tag, double startUs) override {
    rt::RecvOp *x = main->add_ops()->mutable_recv();
    x->set_peer(peer);
    x->set_bytes(bytes);
    x->set_tag(tag);
    x->set_planned_start_us(startUs);
  }
  void compute(Location, InstrKind kind, int64_t microbatch, int64_t chunk, double plannedUs,
               double startUs) override {
    rt::ComputeOp *x = main->add_ops()->mutable_compute();
    x->set_kind(static_cast<rt::ComputeOp::Kind>(toStreamKind(kind)));
    x->set_microbatch(microbatch);
    x->set_chunk(chunk);
    x->set_planned_us(plannedUs);
    x->set_planned_start_us(startUs);
  }
  void wait(Location, int64_t event) override {
    fill->add_ops()->mutable_wait()->set_event(event);
  }
  void fillChunks(Location, int64_t bubbleId, ps::FillChunkTable &&chunks) override {
    for (const ps::FillChunkRow &chunk : chunks)
      setFillChunk(chunk, bubbleId, jobInstance, fill->add_ops()->mutable_fill());
  }

private:
  rt::ProgramStream *addStream(uint64_t index, ps::StreamRole role, ps::Priority priority) {
    rt::ProgramStream *s = d->add_streams();
    s->set_name(stringifyStreamRole(role).str() + std::to_string(index));
    s->set_role(static_cast<rt::ProgramStream::Role>(role));
    s->set_priority(static_cast<rt::ProgramStream::Priority>(priority));
    return s;
  }

  rt::DeviceProgram *d;
  const JobInstances &jobInstance;
  rt::ProgramStream *main = nullptr, *fill = nullptr;
};

/// The source of a compiled module's pipeline, lowered as
/// pipefill-lower-to-stream lowers it (with `iterations`) but straight into
/// the messages.
std::optional<ProgramSource> pipelineSource(ModuleOp module, int64_t iterations,
                                            bool checkOrder) {
  PipelineOp pipeline;
  for (PipelineOp p : module.getOps<PipelineOp>()) {
    if (pipeline) {
      p.emitError() << "expected one pipefill.pipeline per module";
      return std::nullopt;
    }
    pipeline = p;
  }
  if (!pipeline) {
    module.emitError() << "contains no pipefill.pipeline";
    return std::nullopt;
  }
  if (iterations < 1 || iterations > kMaxIterations) {
    pipeline.emitError() << "cannot be lowered with iterations = " << iterations
                         << ": the runtime runs 1 to " << kMaxIterations << " iterations per run";
    return std::nullopt;
  }
  if (!pipeline.getIterationUs()) {
    pipeline.emitError() << "has no simulated timeline to lower; run pipefill-simulate "
                            "(or --pipefill-compile) first";
    return std::nullopt;
  }
  struct State {
    explicit State(PipelineOp pipeline)
        : facts(pipeline), stages(pipeline.getStages()), bubbles(stages.size()) {}
    PipelineFacts facts;
    SmallVector<StageOp> stages;
    /// Each stage's bubbles, read once for the counts and the lowering.
    SmallVector<SmallVector<BubbleOp>> bubbles;
  };
  auto state = std::make_shared<State>(pipeline);
  // The same deadlock check as the lowering's. Its lists are let go: each
  // stage's are read again while it is lowered, so the whole pipeline's
  // (1F1B 128 x 4096: 3.1 million instructions, ~300 MB) are never held
  // beside the messages.
  if (checkOrder && failed(verifyDeadlockFree(pipeline)))
    return std::nullopt;
  ProgramSource src;
  src.anchor = pipeline;
  src.name = (pipeline.getSymName() + "_stream").str();
  src.iterations = static_cast<uint64_t>(iterations);
  src.plannedIterationUs = f64(*pipeline.getIterationUs());
  src.seed = 0;
  src.begun.resize(state->stages.size());
  mlir::parallelFor(module.getContext(), 0, state->stages.size(), [&](size_t i) {
    // What countBegun would count of the rows, without building them.
    state->bubbles[i] = stageBubbles(state->stages[i]);
    countLoweredChunks(state->stages[i], state->bubbles[i],
                       [&](FlatSymbolRefAttr job, int64_t begunSamples) {
                         src.begun[i][job.getAttr()] += begunSamples;
                       });
  });
  // Stage i's instructions, read while it is lowered, into `sink`.
  auto lower = [s = state.get()](size_t i, StreamSink &sink) {
    std::vector<sched::Instr> instrs;
    SmallVector<Operation *> instrOps;
    stageFromIR(s->stages[i], s->facts.v, instrs, instrOps);
    lowerStage(s->facts, s->stages[i], instrs, instrOps, s->bubbles[i], sink);
  };
  src.exportDevice = [lower](size_t i, const JobInstances &jobs,
                             rt::DeviceProgram *d) -> Operation * {
    ProtoSink sink(d, jobs);
    lower(i, sink);
    return nullptr;
  };
  src.encodeDevice = [lower](size_t i, const JobInstances &jobs,
                             std::string &out) -> Operation * {
    WireSink sink(jobs);
    lower(i, sink);
    sink.finish(out);
    return nullptr;
  };
  // A device is a stage; its instructions are not mapped back one by one.
  src.siteOp = [s = state.get()](const pfrt::ProgramSite &site,
                                 std::optional<Location> &) -> Operation * {
    return site.device >= 0 && size_t(site.device) < s->stages.size()
               ? s->stages[site.device].getOperation()
               : nullptr;
  };
  src.state = state;
  return src;
}

/// Every field of the program but its devices; false (reported) when a
/// fill job is unknown.
bool startProgram(ModuleOp module, const ProgramSource &src, rt::StreamProgram &out,
                  std::vector<JobInstances> &instanceOf) {
  if (failed(checkIterationFitsRuntime(src.anchor ? src.anchor : module.getOperation(),
                                       src.plannedIterationUs)))
    return false;
  out.set_version(1);
  out.set_name(src.name);
  out.set_iterations(src.iterations);
  out.set_planned_iteration_us(src.plannedIterationUs);
  out.set_seed(src.seed);
  return succeeded(addFillJobs(module, src.anchor, src.begun, out, instanceOf));
}

/// Reports the runtime's refusal of the program at the IR it points at: the
/// op (a fill chunk's row) that made the offending instruction, its stream or
/// device, the fill job (`jobNames`: the program's fill_jobs, "job@device"),
/// else the program.
LogicalResult reportRefusal(ModuleOp module, const ProgramSource &src,
                            const std::vector<std::string> &jobNames,
                            const pfrt::ProgramRefusal &refusal) {
  Operation *at = nullptr;
  std::optional<Location> loc;
  if (refusal.site.job >= 0 && size_t(refusal.site.job) < jobNames.size()) {
    StringRef name = StringRef(jobNames[refusal.site.job]).rsplit('@').first;
    if (auto job = dyn_cast_or_null<FillJobOp>(SymbolTable::lookupSymbolIn(module, name))) {
      at = job;
      int64_t layer = 0;
      for (LayerOp op : job.getLayers())
        if (layer++ == refusal.site.layer)
          at = op;
    }
  } else if (src.siteOp) {
    at = src.siteOp(refusal.site, loc);
  }
  if (!at)
    at = src.anchor ? src.anchor : module.getOperation();
  return mlir::emitError(loc ? *loc : at->getLoc())
         << "pipefill-run would refuse this StreamProgram: " << refusal.message;
}

std::vector<std::string> fillJobNames(const rt::StreamProgram &program) {
  std::vector<std::string> names;
  for (const rt::FillWorkload &job : program.fill_jobs())
    names.push_back(job.name());
  return names;
}

LogicalResult buildProgram(ModuleOp module, const ProgramSource &src, rt::StreamProgram &out) {
  std::vector<JobInstances> instanceOf;
  if (!startProgram(module, src, out, instanceOf))
    return failure();
  // The device messages are added in order, then filled on MLIR's threads:
  // each device reads only its own ops and writes only its own message
  // (protobuf arenas are thread-safe), so the program is the same either way.
  std::vector<rt::DeviceProgram *> messages;
  for (size_t i = 0; i < src.begun.size(); ++i)
    messages.push_back(out.add_devices());
  std::vector<Operation *> unexported(messages.size(), nullptr);
  mlir::parallelFor(module.getContext(), 0, messages.size(), [&](size_t i) {
    unexported[i] = src.exportDevice(i, instanceOf[i], messages[i]);
  });
  for (Operation *op : unexported)
    if (op)
      return op->emitOpError() << "has no StreamProgram form";
  return success();
}

/// What pipefill-run would refuse to load is refused here, by the runtime's
/// own loader (runtime/ProgramCheck.h).
LogicalResult checkWithRuntime(ModuleOp module, const ProgramSource &src,
                               const rt::StreamProgram &program) {
  if (!src.checkWithRuntime)
    return success();
  if (std::optional<pfrt::ProgramRefusal> refusal = pfrt::checkProgram(program))
    return reportRefusal(module, src, fillJobNames(program), *refusal);
  return success();
}

/// What pipefill-run and pfrt_program_load refuse to read, refused while the
/// program is written, where the plan can still change: a program file over
/// kMaxInputBytes (support/ProtoText.h), a stream over its op count
/// (pipefill.rt.ProgramStream.ops, support/Limits.cpp). Fill plans reach
/// both when bubbles are far longer than the chunks cut into them (a
/// 6000 s bubble of 6 ms chunks: 10^7 ops, 340 MB).
class ProgramFit {
public:
  ProgramFit(Operation *anchor, bool text) : anchor(anchor), text(text) {}

  /// Counts `n` more bytes of the program.
  LogicalResult addBytes(size_t n) {
    bytes += n;
    if (bytes <= kMaxInputBytes)
      return success();
    return anchor->emitError()
           << "the StreamProgram would be " << (text ? "over " : "") << bytes << " bytes"
           << (text ? " in text format" : "") << " by the end of device " << devices
           << "; pipefill-run reads at most " << kMaxInputBytes
           << (fillOps >= kManyChunks ? " (device " + std::to_string(fillDevice) + " runs " +
                                            std::to_string(fillOps) +
                                            " fill chunks per iteration on one stream)" +
                                            kFewerChunks
                                      : std::string());
  }
  /// Checks device `i`'s streams, from its serialized message: an op takes at
  /// least 2 bytes, so only a message of 2 x the op limit can hold a stream
  /// over it, and only such a message is parsed back.
  LogicalResult addDevice(size_t i, const std::string &encoded) {
    devices = i;
    if (encoded.size() < 2 * maxOps() && (size_t)bytes + encoded.size() <= kMaxInputBytes)
      return addBytes(encoded.size());
    google::protobuf::Arena arena;
    auto *d = google::protobuf::Arena::CreateMessage<rt::DeviceProgram>(&arena);
    if (!d->ParseFromString(encoded))
      return anchor->emitError() << "could not re-read device " << i << "'s StreamProgram";
    return failure(failed(addDevice(i, *d)) || failed(addBytes(encoded.size())));
  }
  /// Checks device `i`'s streams; notes its fill ops for the messages.
  LogicalResult addDevice(size_t i, const rt::DeviceProgram &d) {
    devices = i;
    for (const rt::ProgramStream &stream : d.streams()) {
      size_t fill = 0;
      for (const rt::StreamOp &op : stream.ops())
        fill += op.has_fill();
      if (fill > fillOps)
        fillOps = fill, fillDevice = i;
      if ((size_t)stream.ops_size() > maxOps())
        return anchor->emitError()
               << "device " << i << "'s stream '" << stream.name() << "' would hold "
               << stream.ops_size() << " ops per iteration (" << fill
               << " of them fill chunks); pipefill-run runs at most " << maxOps()
               << " per stream" << (fill >= kManyChunks ? kFewerChunks : "");
    }
    return success();
  }

private:
  static size_t maxOps() {
    static const size_t max = size_t(findCountLimit("pipefill.rt.ProgramStream.ops")->max);
    return max;
  }
  /// Past this many fill chunks on one stream, the messages blame the plan.
  static constexpr size_t kManyChunks = 65536;
  static constexpr const char *kFewerChunks =
      ": the bubbles are cut into far more chunks than a runtime can hold; larger fill "
      "batches (planner.batch_sizes) make fewer, longer chunks";

  Operation *anchor;
  bool text;
  size_t bytes = 0, devices = 0, fillOps = 0, fillDevice = 0;
};

/// A string output stream that refuses to grow past `limit` bytes, so the
/// text printer stops there instead of printing gigabytes that are refused.
class BoundedStringStream final : public google::protobuf::io::ZeroCopyOutputStream {
public:
  BoundedStringStream(std::string *target, size_t limit) : inner(target), limit(limit) {}
  bool Next(void **data, int *size) override {
    if ((size_t)inner.ByteCount() > limit) {
      over = true;
      return false;
    }
    return inner.Next(data, size);
  }
  void BackUp(int count) override { inner.BackUp(count); }
  int64_t ByteCount() const override { return inner.ByteCount(); }
  bool overflowed() const { return over; }

private:
  google::protobuf::io::StringOutputStream inner;
  size_t limit;
  bool over = false;
};

/// The binary StreamProgram, written while it is built: the fields before
/// `devices` (1-3), each device's message as soon as it is built (a batch of
/// devices at a time, on MLIR's threads), then the fields after it (5-7).
/// Protobuf writes a message's fields in field-number order, so these are
/// the bytes SerializeToString gives for the whole message, but only a batch
/// of device messages is in memory at once instead of the whole program and
/// its serialized copy (1F1B 128 x 4096 x 100: 180 MB serialized, the
/// driver's peak).
LogicalResult writeBinaryProgram(ModuleOp module, const ProgramSource &src,
                                 llvm::raw_ostream &os) {
  rt::StreamProgram head, tail;
  std::vector<JobInstances> instanceOf;
  if (!startProgram(module, src, tail, instanceOf))
    return failure();
  // The runtime's loader takes the devices as they are written.
  pfrt::ProgramChecker checker;
  if (src.checkWithRuntime)
    checker.begin(tail);
  const std::vector<std::string> jobNames = fillJobNames(tail);
  auto refused = [&] { return reportRefusal(module, src, jobNames, *checker.finish()); };
  if (checker.refused())
    return refused();
  // The fields numbered below `devices` go before it, the rest after.
  head.set_version(tail.version());
  head.set_name(tail.name());
  head.set_iterations(tail.iterations());
  tail.clear_version();
  tail.clear_name();
  tail.clear_iterations();
  std::string bytes;
  if (!head.SerializeToString(&bytes))
    return module.emitError() << "could not serialize the StreamProgram";
  ProgramFit fit(src.anchor ? src.anchor : module.getOperation(), /*text=*/false);
  if (failed(fit.addBytes(bytes.size())))
    return failure();
  os << bytes;

  MLIRContext *ctx = module.getContext();
  const size_t numDevices = src.begun.size();
  const size_t batch = 2 * std::max<size_t>(1, ctx->getNumThreads());
  // The tag of a `devices` entry: its field number, length-delimited.
  constexpr uint32_t kDevicesTag = (rt::StreamProgram::kDevicesFieldNumber << 3) | 2;
  for (size_t begin = 0; begin < numDevices; begin += batch) {
    size_t end = std::min(numDevices, begin + batch);
    std::vector<std::string> messages(end - begin);
    std::vector<Operation *> unexported(end - begin, nullptr);
    mlir::parallelFor(ctx, begin, end, [&](size_t i) {
      if (src.encodeDevice) {
        unexported[i - begin] = src.encodeDevice(i, instanceOf[i], messages[i - begin]);
        return;
      }
      // One arena per device: its ~10^4 submessages freed in one call.
      google::protobuf::Arena arena;
      auto *d = google::protobuf::Arena::CreateMessage<rt::DeviceProgram>(&arena);
      unexported[i - begin] = src.exportDevice(i, instanceOf[i], d);
      if (!unexported[i - begin])
        d->SerializeToString(&messages[i - begin]);
    });
    for (size_t k = 0; k < messages.size(); ++k) {
      if (unexported[k])
        return unexported[k]->emitOpError() << "has no StreamProgram form";
      using google::protobuf::io::CodedOutputStream;
      uint8_t prefix[10]; // two varints of at most 5 bytes each
      uint8_t *end = CodedOutputStream::WriteVarint32ToArray(kDevicesTag, prefix);
      end = CodedOutputStream::WriteVarint32ToArray(uint32_t(messages[k].size()), end);
      if (failed(fit.addBytes(end - prefix)) || failed(fit.addDevice(begin + k, messages[k])))
        return failure();
      if (src.checkWithRuntime) {
        google::protobuf::Arena arena;
        auto *d = google::protobuf::Arena::CreateMessage<rt::DeviceProgram>(&arena);
        if (!d->ParseFromString(messages[k]))
          return module.emitError() << "could not re-read device " << begin + k
                                    << "'s StreamProgram";
        checker.addDevice(*d);
        if (checker.refused())
          return refused();
      }
      os.write(reinterpret_cast<const char *>(prefix), end - prefix);
      os << messages[k];
    }
  }
  if (src.checkWithRuntime)
    if (std::optional<pfrt::ProgramRefusal> refusal = checker.finish())
      return reportRefusal(module, src, jobNames, *refusal);
  bytes.clear();
  if (!tail.SerializeToString(&bytes))
    return module.emitError() << "could not serialize the StreamProgram";
  os << bytes;
  return success();
}

LogicalResult writeProgram(ModuleOp module, const ProgramSource &src, llvm::raw_ostream &os,
                           bool text) {
  if (!text)
    return writeBinaryProgram(module, src, os);
  // One arena for the ~10^5 submessages of a large program: allocation is a
  // pointer bump and freeing is one call.
  google::protobuf::Arena arena;
  rt::StreamProgram &program =
      *google::protobuf::Arena::CreateMessage<rt::StreamProgram>(&arena);
  if (failed(buildProgram(module, src, program)))
    return failure();
  // Text is never shorter than the binary encoding: a program whose binary
  // form is already too large is refused before it is printed, and the
  // printer stops at the limit.
  ProgramFit fit(src.anchor ? src.anchor : module.getOperation(), /*text=*/true);
  for (int i = 0; i < program.devices_size(); ++i)
    if (failed(fit.addDevice(i, program.devices(i))))
      return failure();
  if (const size_t binary = program.ByteSizeLong(); binary > kMaxInputBytes)
    return fit.addBytes(binary);
  if (failed(checkWithRuntime(module, src, program)))
    return failure();
  std::string bytes;
  BoundedStringStream out(&bytes, kMaxInputBytes);
  const bool printed = google::protobuf::TextFormat::Print(program, &out);
  if (out.overflowed())
    return fit.addBytes(out.ByteCount());
  if (!printed)
    return module.emitError() << "could not print the StreamProgram";
  bytes.resize(out.ByteCount());
  os << bytes;
  return success();
}
} // namespace

LogicalResult buildStreamProgram(ModuleOp module, rt::StreamProgram &out) {
  std::optional<ProgramSource> src = streamSource(module);
  return success(src && succeeded(buildProgram(module, *src, out)) &&
                 succeeded(checkWithRuntime(module, *src, out)));
}

LogicalResult exportStreamProgram(ModuleOp module, llvm::raw_ostream &os, bool text) {
  std::optional<ProgramSource> src = streamSource(module);
  return src ? writeProgram(module, *src, os, text) : failure();
}

LogicalResult lowerAndExportStreamProgram(ModuleOp module, int64_t iterations,
                                          llvm::raw_ostream &os, bool text, bool checkOrder,
                                          bool checkWithRuntime) {
  std::optional<ProgramSource> src = pipelineSource(module, iterations, checkOrder);
  if (!src)
    return failure();
  src->checkWithRuntime = checkWithRuntime;
  return writeProgram(module, *src, os, text);
}

} // namespace pipefill
