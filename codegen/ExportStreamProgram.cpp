//===- ExportStreamProgram.cpp - pfstream -> StreamProgram / C++ ----------===//
//
// A lowered module becomes a StreamProgram protobuf (binary or text), the
// format the runtime interprets. The C++ exporter prints the same message as
// straight-line calls of the runtime's builder API, so the interpreter and a
// generated binary build identical programs by construction.
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "proto/stream_program.pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

#include <google/protobuf/arena.h>
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

} // namespace

LogicalResult buildStreamProgram(ModuleOp module, rt::StreamProgram &out) {
  ps::ProgramOp program = findProgram(module);
  if (!program)
    return failure();
  out.set_version(1);
  out.set_name(program.getSymName().str());
  out.set_iterations(program.getIterations());
  out.set_planned_iteration_us(f64(program.getPlannedIterationUs()));
  out.set_seed(program.getSeed());

  // Each device runs its own instance of a fill job ("name@device"): its own
  // sample stream and, for training, its own weights. The job's samples are
  // shared out in proportion to the devices' planned rates (every instance
  // of a job runs the same number of periods' worth of work otherwise).
  llvm::StringMap<FillJobOp> jobs;
  for (FillJobOp job : module.getOps<FillJobOp>())
    jobs[job.getSymName()] = job;
  std::map<std::pair<std::string, uint32_t>, uint32_t> instance;
  std::map<std::pair<std::string, uint32_t>, int64_t> begunPerPeriod;
  uint32_t deviceIndex = 0;
  for (ps::DeviceOp device : program.getBody().front().getOps<ps::DeviceOp>()) {
    // Per device first (string keys only once per job, not per chunk).
    llvm::StringMap<int64_t> begun;
    device.walk([&](ps::FillChunkOp chunk) {
      int64_t &b = begun[chunk.getJob()];
      if (chunk.getLayerBegin() == 0)
        b += chunk.getBatch();
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
  std::vector<llvm::StringMap<uint32_t>> instanceOf(deviceIndex);
  for (auto &[key, index] : instance)
    instanceOf[key.second][key.first] = index;

  for (ps::DeviceOp device : program.getBody().front().getOps<ps::DeviceOp>()) {
    const llvm::StringMap<uint32_t> &jobInstance = instanceOf[out.devices_size()];
    rt::DeviceProgram *d = out.add_devices();
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
    for (ps::EventOp event : device.getBody().front().getOps<ps::EventOp>())
      d->add_events()->set_name(event.getName().str());
    for (ps::StreamOp stream : device.getBody().front().getOps<ps::StreamOp>()) {
      rt::ProgramStream *s = d->add_streams();
      s->set_name(stringifyStreamRole(stream.getRole()).str() +
                  std::to_string(stream.getIndex()));
      s->set_role(static_cast<rt::ProgramStream::Role>(stream.getRole()));
      s->set_priority(static_cast<rt::ProgramStream::Priority>(stream.getPriority()));
      for (Operation &op : stream.getBody().front()) {
        rt::StreamOp *o = s->add_ops();
        if (auto compute = dyn_cast<ps::ComputeOp>(op)) {
          rt::ComputeOp *x = o->mutable_compute();
          x->set_kind(static_cast<rt::ComputeOp::Kind>(compute.getKind()));
          x->set_microbatch(compute.getMicrobatch());
          x->set_chunk(compute.getChunk());
          x->set_planned_us(f64(compute.getPlannedUs()));
          x->set_planned_start_us(f64(compute.getPlannedStartUs()));
        } else if (auto send = dyn_cast<ps::SendOp>(op)) {
          rt::SendOp *x = o->mutable_send();
          x->set_peer(send.getPeer());
          x->set_bytes(send.getBytes());
          x->set_tag(send.getTag());
          x->set_planned_us(f64(send.getPlannedUs()));
          x->set_planned_start_us(f64(send.getPlannedStartUs()));
        } else if (auto recv = dyn_cast<ps::RecvOp>(op)) {
          rt::RecvOp *x = o->mutable_recv();
          x->set_peer(recv.getPeer());
          x->set_bytes(recv.getBytes());
          x->set_tag(recv.getTag());
          x->set_planned_start_us(f64(recv.getPlannedStartUs()));
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
        } else if (auto chunk = dyn_cast<ps::FillChunkOp>(op)) {
          rt::FillChunkOp *x = o->mutable_fill();
          x->set_job(jobInstance.lookup(chunk.getJob()));
          x->set_bubble_id(chunk.getBubbleId());
          x->set_layer_begin(chunk.getLayerBegin());
          x->set_layer_end(chunk.getLayerEnd());
          x->set_batch(chunk.getBatch());
          x->set_sample_begin(chunk.getSampleBegin());
          x->set_iteration_offset(chunk.getIterationOffsetAttr().getInt());
          x->set_weights(chunk.getWeightsStreamed() ? rt::FillChunkOp::WEIGHTS_STREAMED
                                                    : rt::FillChunkOp::WEIGHTS_RESIDENT);
          x->set_activations(chunk.getActivationsOnHost()
                                 ? rt::FillChunkOp::ACTIVATIONS_HOST
                                 : rt::FillChunkOp::ACTIVATIONS_DEVICE);
          x->set_planned_us(f64(chunk.getPlannedUs()));
          x->set_peak_bytes(chunk.getPeakBytes());
          x->set_period(chunk.getPeriod());
          x->set_phase(chunk.getPhase());
        } else if (auto copy = dyn_cast<ps::CopyOp>(op)) {
          rt::CopyOp *x = o->mutable_copy();
          x->set_direction(static_cast<rt::CopyOp::Direction>(copy.getDirection()));
          x->set_bytes(copy.getBytes());
          x->set_planned_us(f64(copy.getPlannedUs()));
        } else {
          return op.emitOpError() << "has no StreamProgram form";
        }
      }
    }
  }
  return success();
}

LogicalResult exportStreamProgram(ModuleOp module, llvm::raw_ostream &os,
                                  bool text) {
  // One arena for the ~10^5 submessages of a large program: allocation is a
  // pointer bump and freeing is one call.
  google::protobuf::Arena arena;
  rt::StreamProgram &program =
      *google::protobuf::Arena::CreateMessage<rt::StreamProgram>(&arena);
  if (failed(buildStreamProgram(module, program)))
    return failure();
  std::string bytes;
  if (text) {
    if (!google::protobuf::TextFormat::PrintToString(program, &bytes))
      return module.emitError() << "could not print the StreamProgram";
  } else if (!program.SerializeToString(&bytes)) {
    return module.emitError() << "could not serialize the StreamProgram";
  }
  os << bytes;
  return success();
}

//===----------------------------------------------------------------------===//
// C++ emission
//===----------------------------------------------------------------------===//

namespace {
std::string cstr(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}
std::string num(double v) { return llvm::formatv("{0:e}", v).str(); }
} // namespace

LogicalResult exportCpp(ModuleOp module, llvm::raw_ostream &os) {
  rt::StreamProgram p;
  if (failed(buildStreamProgram(module, p)))
    return failure();
  // The program becomes tables (one row per device, stream, event, op, fill
  // job, layer) and a short loop that replays them through the builder API:
  // the generated file compiles in seconds even for thousands of ops.
  os << "// Generated by pipefill-translate --to-cpp from the stream program '"
     << p.name() << "'.\n// Do not edit: regenerate it from the JobSpec.\n";
  os << R"(#include "runtime/pfrt.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
struct OpRow {
  unsigned device, stream, kind;  // kind: 1 compute 2 send 3 recv 4 record 5 wait 6 bubble 7 fill 8 copy
  unsigned long long a, b, c;     // operands, see replay()
  double x, y;                    // planned time, planned start
};
struct StreamRow { unsigned device; pfrt_stream_role role; pfrt_priority priority; const char *name; };
struct EventRow { unsigned device; const char *name; };
struct JobRow { const char *name; pfrt_fill_kind kind; unsigned long long samples, seed; unsigned firstLayer, numLayers; };
struct LayerRow {
  const char *name; pfrt_layer_kind kind; unsigned hidden, heads, seq, ffn, in, out, dim, width;
  double usPerSample, backwardUsPerSample; unsigned long long weightBytes, activationBytesPerSample;
};
)";
  // Devices.
  os << "const pfrt_device_desc kDevices[] = {\n";
  for (const rt::DeviceProgram &d : p.devices()) {
    const rt::StageCalibration &c = d.calibration();
    os << llvm::formatv("  {{{0}u, {1}ull, {2}ull, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
                        "{11}, {12}, {13}u},\n",
                        d.stage(), d.memory_bytes(), d.static_bytes(),
                        num(d.planned_iteration_us()), num(d.p2p_latency_us()),
                        num(d.p2p_bandwidth_gbps()), num(d.pcie_bandwidth_gbps()),
                        num(c.forward_us()), num(c.backward_us()),
                        num(c.backward_input_us()), num(c.backward_weight_us()),
                        num(c.allreduce_us()), num(c.optimizer_us()), c.gemm_dim());
  }
  os << "};\n";
  // Streams and events.
  os << "const StreamRow kStreams[] = {\n";
  for (int d = 0; d < p.devices_size(); ++d)
    for (const rt::ProgramStream &st : p.devices(d).streams())
      os << llvm::formatv("  {{{0}u, (pfrt_stream_role){1}, (pfrt_priority){2}, {3}},\n", d,
                          (int)st.role(), (int)st.priority(), cstr(st.name()));
  os << "};\nconst EventRow kEvents[] = {\n";
  bool anyEvent = false;
  for (int d = 0; d < p.devices_size(); ++d)
    for (const rt::ProgramEvent &e : p.devices(d).events()) {
      os << llvm::formatv("  {{{0}u, {1}},\n", d, cstr(e.name()));
      anyEvent = true;
    }
  if (!anyEvent)
    os << "  {0u, nullptr},\n";
  os << "};\nconst unsigned kNumEvents = " << (anyEvent ? "sizeof(kEvents) / sizeof(kEvents[0])" : "0")
     << ";\n";
  // Fill jobs and layers.
  os << "const LayerRow kLayers[] = {\n";
  unsigned layerCount = 0;
  std::vector<std::pair<unsigned, unsigned>> jobLayers;
  for (const rt::FillWorkload &job : p.fill_jobs()) {
    jobLayers.push_back({layerCount, (unsigned)job.layers_size()});
    for (const rt::FillWorkloadLayer &l : job.layers()) {
      unsigned kind = l.has_encoder() ? 1 : l.has_mlp() ? 2 : 3;
      os << llvm::formatv(
          "  {{{0}, (pfrt_layer_kind){1}, {2}u, {3}u, {4}u, {5}u, {6}u, {7}u, {8}u, {9}u, "
          "{10}, {11}, {12}ull, {13}ull},\n",
          cstr(l.name()), kind, l.has_encoder() ? l.encoder().hidden() : l.mlp().hidden(),
          l.encoder().heads(), l.encoder().seq(), l.encoder().ffn(), l.mlp().in(),
          l.mlp().out(), l.gemm_chain().dim(), l.gemm_chain().width(),
          num(l.planned_us_per_sample()), num(l.planned_backward_us_per_sample()),
          l.weight_bytes(), l.activation_bytes_per_sample());
      ++layerCount;
    }
  }
  if (!layerCount)
    os << "  {nullptr, PFRT_LAYER_GEMM_CHAIN, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0.0, 0.0, 0ull, 0ull},\n";
  os << "};\nconst JobRow kJobs[] = {\n";
  for (int j = 0; j < p.fill_jobs_size(); ++j) {
    const rt::FillWorkload &job = p.fill_jobs(j);
    os << llvm::formatv("  {{{0}, {1}, {2}ull, {3}ull, {4}u, {5}u},\n", cstr(job.name()),
                        job.kind() == rt::FillWorkload::TRAINING ? "PFRT_FILL_TRAINING"
                                                                 : "PFRT_FILL_INFERENCE",
                        job.samples(), job.seed(), jobLayers[j].first, jobLayers[j].second);
  }
  if (p.fill_jobs_size() == 0)
    os << "  {nullptr, PFRT_FILL_INFERENCE, 0ull, 0ull, 0u, 0u},\n";
  os << "};\nconst unsigned kNumJobs = " << p.fill_jobs_size() << ";\n";
  // Fill chunks, then every op in stream order.
  os << "const pfrt_fill_chunk_desc kChunks[] = {\n";
  unsigned chunkCount = 0;
  for (const rt::DeviceProgram &d : p.devices())
    for (const rt::ProgramStream &st : d.streams())
      for (const rt::StreamOp &o : st.ops())
        if (o.has_fill()) {
          const rt::FillChunkOp &f = o.fill();
          os << llvm::formatv("  {{{0}u, {1}u, {2}u, {3}u, {4}u, {5}ull, {6}, {7}, {8}, {9}, "
                              "{10}ull, {11}u, {12}u},\n",
                              f.job(), f.bubble_id(), f.layer_begin(), f.layer_end(), f.batch(),
                              f.sample_begin(), f.iteration_offset(),
                              (int)(f.weights() == rt::FillChunkOp::WEIGHTS_STREAMED),
                              (int)(f.activations() == rt::FillChunkOp::ACTIVATIONS_HOST),
                              num(f.planned_us()), f.peak_bytes(), f.period(), f.phase());
          ++chunkCount;
        }
  if (!chunkCount)
    os << "  {},\n";
  os << "};\nconst OpRow kOps[] = {\n";
  unsigned chunkIndex = 0;
  for (int d = 0; d < p.devices_size(); ++d) {
    const rt::DeviceProgram &dev = p.devices(d);
    for (int s = 0; s < dev.streams_size(); ++s)
      for (const rt::StreamOp &o : dev.streams(s).ops()) {
        auto row = [&](int kind, uint64_t a, uint64_t b, uint64_t c, double x, double y) {
          os << llvm::formatv("  {{{0}u, {1}u, {2}u, {3}ull, {4}ull, {5}ull, {6}, {7}},\n", d, s,
                              kind, a, b, c, num(x), num(y));
        };
        switch (o.op_case()) {
        case rt::StreamOp::kCompute:
          row(1, o.compute().kind(), o.compute().microbatch(), o.compute().chunk(),
              o.compute().planned_us(), o.compute().planned_start_us());
          break;
        case rt::StreamOp::kSend:
          row(2, o.send().peer(), o.send().bytes(), o.send().tag(), o.send().planned_us(),
              o.send().planned_start_us());
          break;
        case rt::StreamOp::kRecv:
          row(3, o.recv().peer(), o.recv().bytes(), o.recv().tag(), o.recv().planned_us(),
              o.recv().planned_start_us());
          break;
        case rt::StreamOp::kRecord:
          row(4, o.record().event(), 0, 0, 0, 0);
          break;
        case rt::StreamOp::kWait:
          row(5, o.wait().event(), 0, 0, 0, 0);
          break;
        case rt::StreamOp::kBubble:
          row(6, o.bubble().bubble_id(), o.bubble().kind(), o.bubble().free_bytes(),
              o.bubble().planned_duration_us(), o.bubble().planned_start_us());
          break;
        case rt::StreamOp::kFill:
          row(7, chunkIndex++, 0, 0, 0, 0);
          break;
        case rt::StreamOp::kCopy:
          row(8, o.copy().direction(), o.copy().bytes(), 0, o.copy().planned_us(), 0);
          break;
        default:
          return module.emitError() << "stream op kind " << (int)o.op_case()
                                    << " has no C++ form";
        }
      }
  }
  os << "};\n} // namespace\n\n";
  os << "static const char kName[] = " << cstr(p.name()) << ";\n";
  os << "static const unsigned kIterations = " << p.iterations() << "u;\n";
  os << "static const unsigned long long kSeed = " << p.seed() << "ull;\n";
  os << "static const double kPlannedIterationUs = " << num(p.planned_iteration_us()) << ";\n";
  os << R"(
#define PF_CHECK(call)                                                         \
  do {                                                                         \
    if ((call) != PFRT_OK) {                                                   \
      std::fprintf(stderr, "error: %s: %s\n", #call, pfrt_last_error());       \
      pfrt_program_destroy(p);                                                 \
      return nullptr;                                                          \
    }                                                                          \
  } while (0)

// Replays the tables through the builder API (the interpreter does the same
// from a StreamProgram file).
static pfrt_program *buildProgram() {
  pfrt_program *p = nullptr;
  if (pfrt_program_create(kName, &p) != PFRT_OK) {
    std::fprintf(stderr, "error: %s\n", pfrt_last_error());
    return nullptr;
  }
  unsigned id = 0;
  PF_CHECK(pfrt_program_set_iterations(p, kIterations));
  PF_CHECK(pfrt_program_set_seed(p, kSeed));
  PF_CHECK(pfrt_program_set_planned_iteration_us(p, kPlannedIterationUs));
  for (unsigned j = 0; j < kNumJobs; ++j) {
    pfrt_fill_job_desc job{};
    job.name = kJobs[j].name;
    job.kind = kJobs[j].kind;
    job.samples = kJobs[j].samples;
    job.seed = kJobs[j].seed;
    PF_CHECK(pfrt_add_fill_job(p, &job, &id));
    for (unsigned l = 0; l < kJobs[j].numLayers; ++l) {
      const LayerRow &r = kLayers[kJobs[j].firstLayer + l];
      pfrt_fill_layer_desc layer{};
      layer.name = r.name;
      layer.kind = r.kind;
      layer.hidden = r.hidden; layer.heads = r.heads; layer.seq = r.seq; layer.ffn = r.ffn;
      layer.in = r.in; layer.out = r.out; layer.dim = r.dim; layer.width = r.width;
      layer.planned_us_per_sample = r.usPerSample;
      layer.planned_backward_us_per_sample = r.backwardUsPerSample;
      layer.weight_bytes = r.weightBytes;
      layer.activation_bytes_per_sample = r.activationBytesPerSample;
      PF_CHECK(pfrt_fill_job_add_layer(p, j, &layer));
    }
  }
  for (const pfrt_device_desc &d : kDevices)
    PF_CHECK(pfrt_add_device(p, &d, &id));
  for (const StreamRow &s : kStreams)
    PF_CHECK(pfrt_create_stream(p, s.device, s.role, s.priority, s.name, &id));
  for (unsigned e = 0; e < kNumEvents; ++e)
    PF_CHECK(pfrt_create_event(p, kEvents[e].device, kEvents[e].name, &id));
  for (const OpRow &o : kOps) {
    switch (o.kind) {
    case 1:
      PF_CHECK(pfrt_enqueue_compute(p, o.device, o.stream, (pfrt_compute_kind)o.a,
                                    (uint32_t)o.b, (uint32_t)o.c, o.x, o.y));
      break;
    case 2:
      PF_CHECK(pfrt_enqueue_send(p, o.device, o.stream, (uint32_t)o.a, o.b, (uint32_t)o.c, o.x, o.y));
      break;
    case 3:
      PF_CHECK(pfrt_enqueue_recv(p, o.device, o.stream, (uint32_t)o.a, o.b, (uint32_t)o.c, o.x, o.y));
      break;
    case 4:
      PF_CHECK(pfrt_enqueue_record(p, o.device, o.stream, (uint32_t)o.a));
      break;
    case 5:
      PF_CHECK(pfrt_enqueue_wait(p, o.device, o.stream, (uint32_t)o.a));
      break;
    case 6: {
      pfrt_bubble_desc b{};
      b.bubble_id = (uint32_t)o.a;
      b.kind = (pfrt_bubble_kind)o.b;
      b.free_bytes = o.c;
      b.planned_duration_us = o.x;
      b.planned_start_us = o.y;
      PF_CHECK(pfrt_enqueue_bubble(p, o.device, o.stream, &b));
      break;
    }
    case 7:
      PF_CHECK(pfrt_enqueue_fill(p, o.device, o.stream, &kChunks[o.a]));
      break;
    case 8:
      PF_CHECK(pfrt_enqueue_copy(p, o.device, o.stream, (pfrt_copy_direction)o.a, o.b, o.x));
      break;
    }
  }
  return p;
}

static void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--backend host|cuda|auto] [--iterations N] [--report FILE]\n"
               "          [--no-fill] [--time-scale X] [--max-dim N] [--checkpoint FILE]\n",
               argv0);
}

int main(int argc, char **argv) {
  pfrt_options options;
  pfrt_options_init(&options);
  const char *reportPath = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (!std::strcmp(arg, "--backend") && hasValue) {
      const char *value = argv[++i];
      if (!std::strcmp(value, "host")) options.backend = PFRT_BACKEND_HOST;
      else if (!std::strcmp(value, "cuda")) options.backend = PFRT_BACKEND_CUDA;
      else if (!std::strcmp(value, "auto")) options.backend = PFRT_BACKEND_AUTO;
      else { std::fprintf(stderr, "error: unknown backend '%s'\n", value); return 2; }
    } else if (!std::strcmp(arg, "--iterations") && hasValue) {
      options.iterations = (uint32_t)std::strtoul(argv[++i], nullptr, 10);
    } else if (!std::strcmp(arg, "--report") && hasValue) {
      reportPath = argv[++i];
    } else if (!std::strcmp(arg, "--time-scale") && hasValue) {
      options.time_scale = std::strtod(argv[++i], nullptr);
    } else if (!std::strcmp(arg, "--max-dim") && hasValue) {
      options.max_dim = (uint32_t)std::strtoul(argv[++i], nullptr, 10);
    } else if (!std::strcmp(arg, "--checkpoint") && hasValue) {
      options.checkpoint_path = argv[++i];
    } else if (!std::strcmp(arg, "--no-fill")) {
      options.enable_fill = 0;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  pfrt_program *program = buildProgram();
  if (!program)
    return 1;
  pfrt_report *report = nullptr;
  if (pfrt_run(program, &options, &report) != PFRT_OK) {
    std::fprintf(stderr, "error: %s\n", pfrt_last_error());
    pfrt_program_destroy(program);
    return 1;
  }
  std::fputs(pfrt_report_summary(report), stdout);
  int rc = 0;
  if (reportPath && pfrt_report_write_json(report, reportPath) != PFRT_OK) {
    std::fprintf(stderr, "error: %s\n", pfrt_last_error());
    rc = 1;
  }
  pfrt_report_destroy(report);
  pfrt_program_destroy(program);
  return rc;
}
)";
  return success();
}

} // namespace pipefill
