//===- ExportStreamProgram.cpp - pfstream -> StreamProgram ----------------===//
//
// A lowered module becomes a StreamProgram protobuf (binary or text), the
// format the runtime interprets. ExportCpp.cpp writes the same message as
// tables that the runtime replays (runtime/pfrt_tables.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/StreamProgramBuilder.h"
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "proto/stream_program.pb.h"

#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/text_format.h>

using namespace mlir;

namespace pipefill {
namespace ps = pfstream;

namespace {

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
/// Adds the instances to `out`; instanceOf[device][job] is the index of each.
LogicalResult addFillJobs(ModuleOp module, ps::ProgramOp program,
                          rt::StreamProgram &out,
                          std::vector<llvm::StringMap<uint32_t>> &instanceOf) {
  llvm::StringMap<FillJobOp> jobs;
  for (FillJobOp job : module.getOps<FillJobOp>())
    jobs[job.getSymName()] = job;
  std::map<std::pair<std::string, uint32_t>, uint32_t> instance;
  std::map<std::pair<std::string, uint32_t>, int64_t> begunPerPeriod;
  uint32_t deviceIndex = 0;
  for (ps::DeviceOp device : program.getBody().front().getOps<ps::DeviceOp>()) {
    // Per device first (string keys only once per job, not per chunk).
    llvm::StringMap<int64_t> begun;
    device.walk([&](ps::FillChunksOp chunks) {
      for (const ps::FillChunkRow &chunk : chunks.getChunks()) {
        int64_t &b = begun[chunk.getJob()];
        if (chunk.layerBegin == 0)
          b += chunk.batch;
      }
    });
    for (auto &entry : begun) {
      auto key = std::make_pair(entry.getKey().str(), deviceIndex);
      begunPerPeriod[key] += entry.getValue();
      instance[key] = 0;
    }
    ++deviceIndex;
  }
  std::map<std::string, double> totalRate;
  for (auto &[key, begun] : begunPerPeriod)
    totalRate[key.first] += double(begun);
  uint32_t next = 0;
  for (auto &[key, index] : instance) {
    index = next++;
    FillJobOp job = jobs.lookup(key.first);
    if (!job)
      return program.emitError() << "refers to unknown fill job @" << key.first;
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
  instanceOf.assign(deviceIndex, {});
  for (auto &[key, index] : instance)
    instanceOf[key.second][key.first] = index;
  return success();
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
                  const llvm::StringMap<uint32_t> &jobInstance, rt::FillChunkOp *x) {
  x->set_job(jobInstance.lookup(chunk.getJob()));
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
                             const llvm::StringMap<uint32_t> &jobInstance,
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
Operation *exportDevice(ps::DeviceOp device, const llvm::StringMap<uint32_t> &jobInstance,
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

} // namespace

namespace {
/// Every field of the program but its devices; the program op, or null
/// (reported) when there is none or a fill job is unknown.
ps::ProgramOp startProgram(ModuleOp module, rt::StreamProgram &out,
                           std::vector<llvm::StringMap<uint32_t>> &instanceOf) {
  ps::ProgramOp program = findProgram(module);
  if (!program)
    return {};
  out.set_version(1);
  out.set_name(program.getSymName().str());
  out.set_iterations(program.getIterations());
  out.set_planned_iteration_us(f64(program.getPlannedIterationUs()));
  out.set_seed(program.getSeed());
  if (failed(addFillJobs(module, program, out, instanceOf)))
    return {};
  return program;
}
} // namespace

LogicalResult buildStreamProgram(ModuleOp module, rt::StreamProgram &out) {
  std::vector<llvm::StringMap<uint32_t>> instanceOf;
  ps::ProgramOp program = startProgram(module, out, instanceOf);
  if (!program)
    return failure();

  // The device messages are added in order, then filled on MLIR's threads:
  // each device reads only its own ops and writes only its own message
  // (protobuf arenas are thread-safe), so the program is the same either way.
  SmallVector<ps::DeviceOp> devices(program.getBody().front().getOps<ps::DeviceOp>());
  std::vector<rt::DeviceProgram *> messages;
  for (size_t i = 0; i < devices.size(); ++i)
    messages.push_back(out.add_devices());
  std::vector<Operation *> unexported(devices.size(), nullptr);
  mlir::parallelFor(module.getContext(), 0, devices.size(), [&](size_t i) {
    unexported[i] = exportDevice(devices[i], instanceOf[i], messages[i]);
  });
  for (Operation *op : unexported)
    if (op)
      return op->emitOpError() << "has no StreamProgram form";
  return success();
}

namespace {
/// The binary StreamProgram, written while it is built: the fields before
/// `devices` (1-3), each device's message as soon as it is built (a batch of
/// devices at a time, on MLIR's threads), then the fields after it (5-7).
/// Protobuf writes a message's fields in field-number order, so these are
/// the bytes SerializeToString gives for the whole message, but only a batch
/// of device messages is in memory at once instead of the whole program and
/// its serialized copy (1F1B 128 x 4096 x 100: 180 MB serialized, the
/// driver's peak).
LogicalResult writeBinaryStreamProgram(ModuleOp module, llvm::raw_ostream &os) {
  rt::StreamProgram head, tail;
  std::vector<llvm::StringMap<uint32_t>> instanceOf;
  ps::ProgramOp program = startProgram(module, tail, instanceOf);
  if (!program)
    return failure();
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
  os << bytes;

  MLIRContext *ctx = module.getContext();
  SmallVector<ps::DeviceOp> devices(program.getBody().front().getOps<ps::DeviceOp>());
  const size_t batch = 2 * std::max<size_t>(1, ctx->getNumThreads());
  // The tag of a `devices` entry: its field number, length-delimited.
  constexpr uint32_t kDevicesTag = (rt::StreamProgram::kDevicesFieldNumber << 3) | 2;
  for (size_t begin = 0; begin < devices.size(); begin += batch) {
    size_t end = std::min(devices.size(), begin + batch);
    std::vector<std::string> messages(end - begin);
    std::vector<Operation *> unexported(end - begin, nullptr);
    mlir::parallelFor(ctx, begin, end, [&](size_t i) {
      // One arena per device: its ~10^4 submessages freed in one call.
      google::protobuf::Arena arena;
      auto *d = google::protobuf::Arena::CreateMessage<rt::DeviceProgram>(&arena);
      unexported[i - begin] = exportDevice(devices[i], instanceOf[i], d);
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
      os.write(reinterpret_cast<const char *>(prefix), end - prefix);
      os << messages[k];
    }
  }
  bytes.clear();
  if (!tail.SerializeToString(&bytes))
    return module.emitError() << "could not serialize the StreamProgram";
  os << bytes;
  return success();
}
} // namespace

LogicalResult exportStreamProgram(ModuleOp module, llvm::raw_ostream &os,
                                  bool text) {
  if (!text)
    return writeBinaryStreamProgram(module, os);
  // One arena for the ~10^5 submessages of a large program: allocation is a
  // pointer bump and freeing is one call.
  google::protobuf::Arena arena;
  rt::StreamProgram &program =
      *google::protobuf::Arena::CreateMessage<rt::StreamProgram>(&arena);
  if (failed(buildStreamProgram(module, program)))
    return failure();
  std::string bytes;
  if (!google::protobuf::TextFormat::PrintToString(program, &bytes))
    return module.emitError() << "could not print the StreamProgram";
  os << bytes;
  return success();
}

} // namespace pipefill
