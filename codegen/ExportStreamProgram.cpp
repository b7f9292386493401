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
    device.walk([&](ps::FillChunkOp chunk) {
      auto key = std::make_pair(chunk.getJob().str(), deviceIndex);
      if (chunk.getLayerBegin() == 0)
        begunPerPeriod[key] += chunk.getBatch();
      if (instance.count(key))
        return;
      instance[key] = 0;
    });
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

  for (ps::DeviceOp device : program.getBody().front().getOps<ps::DeviceOp>()) {
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
          x->set_job(instance[{chunk.getJob().str(), (uint32_t)out.devices_size() - 1}]);
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
  rt::StreamProgram program;
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
  os << "// Generated by pipefill-translate --to-cpp from the stream program '"
     << p.name() << "'.\n// Do not edit: regenerate from the JobSpec instead.\n";
  os << R"(#include "runtime/pfrt.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define PF_CHECK(call)                                                         \
  do {                                                                         \
    pfrt_status status_ = (call);                                              \
    if (status_ != PFRT_OK) {                                                  \
      std::fprintf(stderr, "error: %s: %s\n", #call, pfrt_last_error());       \
      return nullptr;                                                          \
    }                                                                          \
  } while (0)

static pfrt_program *buildProgram() {
  pfrt_program *p = nullptr;
  if (pfrt_program_create()" << cstr(p.name()) << R"(, &p) != PFRT_OK) {
    std::fprintf(stderr, "error: %s\n", pfrt_last_error());
    return nullptr;
  }
  uint32_t id = 0;
  (void)id;
)";
  os << "  PF_CHECK(pfrt_program_set_iterations(p, " << p.iterations() << "));\n";
  os << "  PF_CHECK(pfrt_program_set_seed(p, " << p.seed() << "ull));\n";
  os << "  PF_CHECK(pfrt_program_set_planned_iteration_us(p, "
     << num(p.planned_iteration_us()) << "));\n";
  for (const rt::FillWorkload &job : p.fill_jobs()) {
    os << "  {\n    pfrt_fill_job_desc j{};\n    j.name = " << cstr(job.name())
       << ";\n    j.kind = "
       << (job.kind() == rt::FillWorkload::TRAINING ? "PFRT_FILL_TRAINING"
                                                : "PFRT_FILL_INFERENCE")
       << ";\n    j.samples = " << job.samples() << "ull;\n    j.samples_per_iteration = "
       << job.samples_per_iteration() << "ull;\n    j.seed = " << job.seed()
       << "ull;\n    PF_CHECK(pfrt_add_fill_job(p, &j, &id));\n";
    for (const rt::FillWorkloadLayer &l : job.layers()) {
      os << "    {\n      pfrt_fill_layer_desc l{};\n      l.name = " << cstr(l.name())
         << ";\n";
      if (l.has_encoder())
        os << llvm::formatv("      l.kind = PFRT_LAYER_ENCODER; l.hidden = {0}; "
                            "l.heads = {1}; l.seq = {2}; l.ffn = {3};\n",
                            l.encoder().hidden(), l.encoder().heads(),
                            l.encoder().seq(), l.encoder().ffn());
      else if (l.has_mlp())
        os << llvm::formatv("      l.kind = PFRT_LAYER_MLP; l.in = {0}; l.hidden = "
                            "{1}; l.out = {2};\n",
                            l.mlp().in(), l.mlp().hidden(), l.mlp().out());
      else
        os << llvm::formatv("      l.kind = PFRT_LAYER_GEMM_CHAIN; l.dim = {0}; "
                            "l.width = {1};\n",
                            l.gemm_chain().dim(), l.gemm_chain().width());
      os << "      l.planned_us_per_sample = " << num(l.planned_us_per_sample())
         << ";\n      l.planned_backward_us_per_sample = "
         << num(l.planned_backward_us_per_sample()) << ";\n      l.weight_bytes = "
         << l.weight_bytes() << "ull;\n      l.activation_bytes_per_sample = "
         << l.activation_bytes_per_sample()
         << "ull;\n      PF_CHECK(pfrt_fill_job_add_layer(p, id, &l));\n    }\n";
    }
    os << "  }\n";
  }
  for (int d = 0; d < p.devices_size(); ++d) {
    const rt::DeviceProgram &dev = p.devices(d);
    const rt::StageCalibration &c = dev.calibration();
    os << "  // device " << d << "\n  {\n    pfrt_device_desc d{};\n";
    os << "    d.stage = " << dev.stage() << ";\n    d.memory_bytes = "
       << dev.memory_bytes() << "ull;\n    d.static_bytes = " << dev.static_bytes()
       << "ull;\n    d.planned_iteration_us = " << num(dev.planned_iteration_us())
       << ";\n    d.p2p_latency_us = " << num(dev.p2p_latency_us())
       << ";\n    d.p2p_bandwidth_gbps = " << num(dev.p2p_bandwidth_gbps())
       << ";\n    d.pcie_bandwidth_gbps = " << num(dev.pcie_bandwidth_gbps())
       << ";\n    d.forward_us = " << num(c.forward_us()) << ";\n    d.backward_us = "
       << num(c.backward_us()) << ";\n    d.backward_input_us = "
       << num(c.backward_input_us()) << ";\n    d.backward_weight_us = "
       << num(c.backward_weight_us()) << ";\n    d.allreduce_us = "
       << num(c.allreduce_us()) << ";\n    d.optimizer_us = " << num(c.optimizer_us())
       << ";\n    PF_CHECK(pfrt_add_device(p, &d, &id));\n  }\n";
    for (const rt::ProgramEvent &e : dev.events())
      os << "  PF_CHECK(pfrt_create_event(p, " << d << ", " << cstr(e.name())
         << ", &id));\n";
    for (int s = 0; s < dev.streams_size(); ++s) {
      const rt::ProgramStream &st = dev.streams(s);
      const char *role = st.role() == rt::ProgramStream::MAIN   ? "PFRT_STREAM_MAIN"
                         : st.role() == rt::ProgramStream::FILL ? "PFRT_STREAM_FILL"
                                                            : "PFRT_STREAM_COPY";
      const char *prio = st.priority() == rt::ProgramStream::HIGH     ? "PFRT_PRIORITY_HIGH"
                         : st.priority() == rt::ProgramStream::NORMAL ? "PFRT_PRIORITY_NORMAL"
                         : st.priority() == rt::ProgramStream::LOW    ? "PFRT_PRIORITY_LOW"
                                                                  : "PFRT_PRIORITY_DEFAULT";
      os << "  PF_CHECK(pfrt_create_stream(p, " << d << ", " << role << ", " << prio
         << ", " << cstr(st.name()) << ", &id));\n";
    }
    for (int s = 0; s < dev.streams_size(); ++s) {
      for (const rt::StreamOp &o : dev.streams(s).ops()) {
        std::string at = llvm::formatv("p, {0}, {1}", d, s).str();
        switch (o.op_case()) {
        case rt::StreamOp::kCompute:
          os << "  PF_CHECK(pfrt_enqueue_compute(" << at << ", (pfrt_compute_kind)"
             << o.compute().kind() << ", " << o.compute().microbatch() << ", "
             << o.compute().chunk() << ", " << num(o.compute().planned_us()) << ", "
             << num(o.compute().planned_start_us()) << "));\n";
          break;
        case rt::StreamOp::kSend:
          os << "  PF_CHECK(pfrt_enqueue_send(" << at << ", " << o.send().peer() << ", "
             << o.send().bytes() << "ull, " << o.send().tag() << ", "
             << num(o.send().planned_us()) << ", " << num(o.send().planned_start_us())
             << "));\n";
          break;
        case rt::StreamOp::kRecv:
          os << "  PF_CHECK(pfrt_enqueue_recv(" << at << ", " << o.recv().peer() << ", "
             << o.recv().bytes() << "ull, " << o.recv().tag() << ", "
             << num(o.recv().planned_us()) << ", " << num(o.recv().planned_start_us())
             << "));\n";
          break;
        case rt::StreamOp::kRecord:
          os << "  PF_CHECK(pfrt_enqueue_record(" << at << ", " << o.record().event()
             << "));\n";
          break;
        case rt::StreamOp::kWait:
          os << "  PF_CHECK(pfrt_enqueue_wait(" << at << ", " << o.wait().event()
             << "));\n";
          break;
        case rt::StreamOp::kBubble: {
          const rt::BubbleOp &b = o.bubble();
          os << "  {\n    pfrt_bubble_desc b{};\n    b.bubble_id = " << b.bubble_id()
             << ";\n    b.kind = (pfrt_bubble_kind)" << b.kind()
             << ";\n    b.planned_start_us = " << num(b.planned_start_us())
             << ";\n    b.planned_duration_us = " << num(b.planned_duration_us())
             << ";\n    b.free_bytes = " << b.free_bytes()
             << "ull;\n    PF_CHECK(pfrt_enqueue_bubble(" << at << ", &b));\n  }\n";
          break;
        }
        case rt::StreamOp::kFill: {
          const rt::FillChunkOp &f = o.fill();
          os << "  {\n    pfrt_fill_chunk_desc f{};\n    f.job = " << f.job()
             << ";\n    f.bubble_id = " << f.bubble_id() << ";\n    f.layer_begin = "
             << f.layer_begin() << ";\n    f.layer_end = " << f.layer_end()
             << ";\n    f.period = " << f.period() << ";\n    f.phase = " << f.phase()
             << ";\n    f.batch = " << f.batch() << ";\n    f.sample_begin = "
             << f.sample_begin() << "ull;\n    f.iteration_offset = "
             << f.iteration_offset() << ";\n    f.weights_streamed = "
             << (f.weights() == rt::FillChunkOp::WEIGHTS_STREAMED)
             << ";\n    f.activations_on_host = "
             << (f.activations() == rt::FillChunkOp::ACTIVATIONS_HOST)
             << ";\n    f.planned_us = " << num(f.planned_us()) << ";\n    f.peak_bytes = "
             << f.peak_bytes() << "ull;\n    PF_CHECK(pfrt_enqueue_fill(" << at
             << ", &f));\n  }\n";
          break;
        }
        case rt::StreamOp::kCopy:
          os << "  PF_CHECK(pfrt_enqueue_copy(" << at << ", (pfrt_copy_direction)"
             << o.copy().direction() << ", " << o.copy().bytes() << "ull, "
             << num(o.copy().planned_us()) << "));\n";
          break;
        default:
          return module.emitError() << "stream op kind " << (int)o.op_case()
                                    << " has no C++ form";
        }
      }
    }
  }
  os << R"(  return p;
}

static void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--backend host|cuda|auto] [--iterations N] [--report FILE]\n"
               "          [--no-fill] [--time-scale X] [--checkpoint FILE]\n",
               argv0);
}

int main(int argc, char **argv) {
  pfrt_options options;
  pfrt_options_init(&options);
  const char *reportPath = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(arg, "--backend") && value) {
      ++i;
      if (!std::strcmp(value, "host")) options.backend = PFRT_BACKEND_HOST;
      else if (!std::strcmp(value, "cuda")) options.backend = PFRT_BACKEND_CUDA;
      else if (!std::strcmp(value, "auto")) options.backend = PFRT_BACKEND_AUTO;
      else { std::fprintf(stderr, "error: unknown backend '%s'\n", value); return 2; }
    } else if (!std::strcmp(arg, "--iterations") && value) {
      options.iterations = (uint32_t)std::strtoul(argv[++i], nullptr, 10);
    } else if (!std::strcmp(arg, "--report") && value) {
      reportPath = argv[++i];
    } else if (!std::strcmp(arg, "--time-scale") && value) {
      options.time_scale = std::strtod(argv[++i], nullptr);
    } else if (!std::strcmp(arg, "--checkpoint") && value) {
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
