#include "runtime/ProgramIO.h"

#include "proto/stream_program.pb.h"
#include "support/Files.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <cerrno>
#include <sys/stat.h>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pfrt {

namespace {

// Text format through the project's one protobuf front end (support/ProtoText.h): the first
// diagnostic as "LINE:COL: message" (the caller prefixes the source).
bool parseText(const std::string &data, pipefill::rt::StreamProgram *proto, std::string *error,
               google::protobuf::TextFormat::ParseInfoTree *tree = nullptr) {
  pipefill::Diagnostics diags;
  if (pipefill::parseTextProto("", data, *proto, tree, diags))
    return true;
  const pipefill::Diagnostic &d = diags.all().front();
  *error = d.line > 0 ? std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.message
                      : " " + d.message;
  return false;
}

// The op, stream, device or fill job a limit message's field path ("devices[0].streams[1].ops[2]
// .fill.batch", "fill_jobs[3].layers[0].weight_bytes") begins with.
ProgramSite siteOfPath(const std::string &path) {
  ProgramSite site;
  size_t pos = 0;
  auto index = [&](const char *field, int64_t *out) {
    const std::string open = std::string(field) + "[";
    if (path.compare(pos, open.size(), open) != 0)
      return false;
    size_t end = path.find(']', pos + open.size());
    if (end == std::string::npos)
      return false;
    *out = std::strtoll(path.c_str() + pos + open.size(), nullptr, 10);
    pos = end + 1 < path.size() && path[end + 1] == '.' ? end + 2 : end + 1;
    return true;
  };
  if (index("fill_jobs", &site.job)) {
    index("layers", &site.layer);
    return site;
  }
  if (index("devices", &site.device) && index("streams", &site.stream))
    index("ops", &site.op);
  return site;
}

// Refuses a message whose limits (support/Limits.cpp) it breaks.
void checkMessageLimits(const google::protobuf::Message &msg, const std::string &source,
                        const google::protobuf::TextFormat::ParseInfoTree *tree,
                        const std::string &pathPrefix) {
  pipefill::Diagnostics diags;
  if (pipefill::checkLimits(msg, tree, source, diags, pathPrefix))
    return;
  const pipefill::Diagnostic &d = diags.all().front();
  std::string where = source;
  if (d.line > 0)
    where += ":" + std::to_string(d.line) + ":" + std::to_string(d.column);
  throw Error(PFRT_ERROR_INVALID_PROGRAM, where + ": " + d.message, siteOfPath(d.message));
}

// Calls a builder function and rethrows its failure with the source and proto path prefixed.
void check(pfrt_status status, const std::string &source, const std::string &where,
           const ProgramSite &site = {}) {
  if (status == PFRT_OK)
    return;
  // A builder argument that came from a file is a defect of the program, not of a call.
  if (status == PFRT_ERROR_INVALID_ARGUMENT)
    status = PFRT_ERROR_INVALID_PROGRAM;
  throw Error(status, source + ": " + where + ": " + pfrt_last_error(), site);
}

std::string at(const char *field, int index) {
  return std::string(field) + "[" + std::to_string(index) + "]";
}

} // namespace

void checkProgramLimits(const pipefill::rt::StreamProgram &proto, const std::string &source,
                        const google::protobuf::TextFormat::ParseInfoTree *tree) {
  checkMessageLimits(proto, source, tree, "");
}

void checkDeviceLimits(const pipefill::rt::DeviceProgram &device, uint32_t index,
                       const std::string &source) {
  if (index >= kMaxDevices)
    throw Error(PFRT_ERROR_INVALID_PROGRAM,
                source + ": devices has more than " + std::to_string(kMaxDevices) +
                    " elements (at most " + std::to_string(kMaxDevices) + ")");
  checkMessageLimits(device, source, nullptr, "devices[" + std::to_string(index) + "]");
}

std::string readFile(const std::string &path) {
  // A device would be read until memory runs out (/dev/zero) or block on a terminal; files,
  // pipes (/dev/stdin from a pipe) and sockets are read to their end.
  // A directory opens and reads as empty ("file is empty" was the message).
  struct stat st;
  const bool known = ::stat(path.c_str(), &st) == 0;
  if (known && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
    throw Error(PFRT_ERROR_IO, path + ": is a device, not a file");
  if (known && S_ISDIR(st.st_mode))
    throw Error(PFRT_ERROR_IO, path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(PFRT_ERROR_IO, path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    throw Error(PFRT_ERROR_IO, path + ": read error");
  return ss.str();
}

void writeFile(const std::string &path, const std::string &data) {
  const std::string error = pipefill::writeFileAtomically(path, data);
  if (!error.empty())
    throw Error(PFRT_ERROR_IO, error);
}

namespace {

// One fill job and its layers.
void addFillJob(pfrt_program *prog, const pipefill::rt::FillWorkload &fj, int j,
                const std::string &source) {
  std::string where = at("fill_jobs", j);
  pfrt_fill_job_desc jd{};
  jd.name = fj.name().c_str();
  jd.kind = static_cast<pfrt_fill_kind>(fj.kind());
  jd.samples = fj.samples();
  jd.samples_per_iteration = fj.samples_per_iteration();
  jd.seed = fj.seed();
  jd.learning_rate = fj.learning_rate();
  uint32_t job = 0;
  check(pfrt_program_add_fill_job(prog, &jd, &job), source, where, ProgramSite{-1, -1, -1, j, -1});
  for (int l = 0; l < fj.layers_size(); ++l) {
    const pipefill::rt::FillWorkloadLayer &fl = fj.layers(l);
    std::string lwhere = where + "." + at("layers", l);
    const ProgramSite site{-1, -1, -1, j, l};
    pfrt_fill_layer_desc ld{};
    ld.name = fl.name().c_str();
    switch (fl.workload_case()) {
    case pipefill::rt::FillWorkloadLayer::kEncoder:
      ld.kind = PFRT_LAYER_ENCODER;
      ld.hidden = fl.encoder().hidden();
      ld.heads = fl.encoder().heads();
      ld.seq = fl.encoder().seq();
      ld.ffn = fl.encoder().ffn();
      break;
    case pipefill::rt::FillWorkloadLayer::kMlp:
      ld.kind = PFRT_LAYER_MLP;
      ld.in = fl.mlp().in();
      ld.hidden = fl.mlp().hidden();
      ld.out = fl.mlp().out();
      break;
    case pipefill::rt::FillWorkloadLayer::kGemmChain:
      ld.kind = PFRT_LAYER_GEMM_CHAIN;
      ld.dim = fl.gemm_chain().dim();
      ld.width = fl.gemm_chain().width();
      break;
    case pipefill::rt::FillWorkloadLayer::WORKLOAD_NOT_SET:
      throw Error(PFRT_ERROR_INVALID_PROGRAM,
                  source + ": " + lwhere +
                      ": layer has no workload (set encoder, mlp or gemm_chain)",
                  site);
    }
    ld.planned_us_per_sample = fl.planned_us_per_sample();
    ld.planned_backward_us_per_sample = fl.planned_backward_us_per_sample();
    ld.weight_bytes = fl.weight_bytes();
    ld.activation_bytes_per_sample = fl.activation_bytes_per_sample();
    check(pfrt_fill_job_add_layer(prog, job, &ld), source, lwhere, site);
  }
}

// One device, its streams and its events; returns the device id.
uint32_t addDevice(pfrt_program *prog, const pipefill::rt::DeviceProgram &dp,
                   const std::string &where, const std::string &source) {
  pfrt_device_desc dd{};
  dd.stage = dp.stage();
  dd.memory_bytes = dp.memory_bytes();
  dd.static_bytes = dp.static_bytes();
  dd.planned_iteration_us = dp.planned_iteration_us();
  dd.p2p_latency_us = dp.p2p_latency_us();
  dd.p2p_bandwidth_gbps = dp.p2p_bandwidth_gbps();
  dd.pcie_bandwidth_gbps = dp.pcie_bandwidth_gbps();
  const pipefill::rt::StageCalibration &c = dp.calibration();
  dd.forward_us = c.forward_us();
  dd.backward_us = c.backward_us();
  dd.backward_input_us = c.backward_input_us();
  dd.backward_weight_us = c.backward_weight_us();
  dd.allreduce_us = c.allreduce_us();
  dd.optimizer_us = c.optimizer_us();
  dd.gemm_dim = c.gemm_dim();
  uint32_t dev = 0;
  const int64_t d = static_cast<int64_t>(prog->program.devices.size());
  check(pfrt_program_add_device(prog, &dd, &dev), source, where, ProgramSite{d, -1, -1, -1, -1});
  for (int s = 0; s < dp.streams_size(); ++s) {
    const pipefill::rt::ProgramStream &ps = dp.streams(s);
    uint32_t id = 0;
    check(pfrt_program_create_stream(prog, dev, static_cast<pfrt_stream_role>(ps.role()),
                                     static_cast<pfrt_priority>(ps.priority()), ps.name().c_str(),
                                     &id),
          source, where + "." + at("streams", s), ProgramSite{d, s, -1, -1, -1});
  }
  for (int e = 0; e < dp.events_size(); ++e) {
    uint32_t id = 0;
    check(pfrt_program_create_event(prog, dev, dp.events(e).name().c_str(), &id), source,
          where + "." + at("events", e), ProgramSite{d, -1, -1, -1, -1});
  }
  return dev;
}

// Op `index` of stream st of device dev.
void enqueueOp(pfrt_program *prog, uint32_t dev, uint32_t st, uint32_t index,
               const pipefill::rt::StreamOp &op, const std::string &owhere,
               const std::string &source) {
  const ProgramSite site{dev, st, index, -1, -1};
  pfrt_status status = PFRT_OK;
  switch (op.op_case()) {
  case pipefill::rt::StreamOp::kCompute: {
    const auto &o = op.compute();
    status = pfrt_program_enqueue_compute(prog, dev, st, static_cast<pfrt_compute_kind>(o.kind()),
                                          o.microbatch(), o.chunk(), o.planned_us(),
                                          o.planned_start_us());
    break;
  }
  case pipefill::rt::StreamOp::kSend: {
    const auto &o = op.send();
    status = pfrt_program_enqueue_send(prog, dev, st, o.peer(), o.bytes(), o.tag(), o.planned_us(),
                                       o.planned_start_us());
    break;
  }
  case pipefill::rt::StreamOp::kRecv: {
    const auto &o = op.recv();
    status = pfrt_program_enqueue_recv(prog, dev, st, o.peer(), o.bytes(), o.tag(), o.planned_us(),
                                       o.planned_start_us());
    break;
  }
  case pipefill::rt::StreamOp::kRecord:
    status = pfrt_program_enqueue_record(prog, dev, st, op.record().event());
    break;
  case pipefill::rt::StreamOp::kWait:
    status = pfrt_program_enqueue_wait(prog, dev, st, op.wait().event());
    break;
  case pipefill::rt::StreamOp::kBubble: {
    const auto &o = op.bubble();
    pfrt_bubble_desc b{};
    b.bubble_id = o.bubble_id();
    b.kind = static_cast<pfrt_bubble_kind>(o.kind());
    b.planned_start_us = o.planned_start_us();
    b.planned_duration_us = o.planned_duration_us();
    b.free_bytes = o.free_bytes();
    b.emulate_idle = o.emulate_idle();
    status = pfrt_program_enqueue_bubble(prog, dev, st, &b);
    break;
  }
  case pipefill::rt::StreamOp::kFill: {
    const auto &o = op.fill();
    pfrt_fill_chunk_desc f{};
    f.job = o.job();
    f.bubble_id = o.bubble_id();
    f.layer_begin = o.layer_begin();
    f.layer_end = o.layer_end();
    f.batch = o.batch();
    f.sample_begin = o.sample_begin();
    f.iteration_offset = o.iteration_offset();
    f.period = o.period();
    f.phase = o.phase();
    f.weights_streamed = o.weights() == pipefill::rt::FillChunkOp::WEIGHTS_STREAMED;
    f.activations_on_host = o.activations() == pipefill::rt::FillChunkOp::ACTIVATIONS_HOST;
    f.planned_us = o.planned_us();
    f.peak_bytes = o.peak_bytes();
    if (o.weights() != pipefill::rt::FillChunkOp::WEIGHTS_STREAMED &&
        o.weights() != pipefill::rt::FillChunkOp::WEIGHTS_RESIDENT)
      throw Error(PFRT_ERROR_INVALID_PROGRAM,
                  source + ": " + owhere + ": unknown weights placement " +
                      std::to_string(o.weights()),
                  site);
    if (o.activations() != pipefill::rt::FillChunkOp::ACTIVATIONS_HOST &&
        o.activations() != pipefill::rt::FillChunkOp::ACTIVATIONS_DEVICE)
      throw Error(PFRT_ERROR_INVALID_PROGRAM,
                  source + ": " + owhere + ": unknown activations placement " +
                      std::to_string(o.activations()),
                  site);
    status = pfrt_program_enqueue_fill(prog, dev, st, &f);
    break;
  }
  case pipefill::rt::StreamOp::kCopy:
    status = pfrt_program_enqueue_copy(prog, dev, st,
                                       static_cast<pfrt_copy_direction>(op.copy().direction()),
                                       op.copy().bytes(), op.copy().planned_us());
    break;
  case pipefill::rt::StreamOp::kAlloc:
    status = pfrt_program_enqueue_alloc(prog, dev, st, op.alloc().buffer(), op.alloc().bytes());
    break;
  case pipefill::rt::StreamOp::kFree:
    status = pfrt_program_enqueue_free(prog, dev, st, op.free().buffer());
    break;
  case pipefill::rt::StreamOp::OP_NOT_SET:
    throw Error(PFRT_ERROR_INVALID_PROGRAM, source + ": " + owhere + ": op has no instruction set",
                site);
  }
  check(status, source, owhere, site);
}

} // namespace

ProgramPtr beginProgram(const pipefill::rt::StreamProgram &p, const std::string &source) {
  if (p.version() > 1)
    throw Error(PFRT_ERROR_PARSE, source + ": StreamProgram version " +
                                      std::to_string(p.version()) +
                                      " is newer than this runtime understands (1)");
  pfrt_program *created = nullptr;
  check(pfrt_program_create(p.name().c_str(), &created), source, "name");
  ProgramPtr prog(created);
  check(pfrt_program_set_iterations(prog.get(), p.iterations()), source, "iterations");
  check(pfrt_program_set_seed(prog.get(), p.seed()), source, "seed");
  check(pfrt_program_set_planned_iteration_us(prog.get(), p.planned_iteration_us()), source,
        "planned_iteration_us");
  for (int j = 0; j < p.fill_jobs_size(); ++j)
    addFillJob(prog.get(), p.fill_jobs(j), j, source);
  return prog;
}

void addDeviceProgram(pfrt_program *prog, const pipefill::rt::DeviceProgram &dp,
                      const std::string &source) {
  const std::string where = at("devices", static_cast<int>(prog->program.devices.size()));
  const uint32_t dev = addDevice(prog, dp, where, source);
  for (int s = 0; s < dp.streams_size(); ++s) {
    const pipefill::rt::ProgramStream &ps = dp.streams(s);
    for (int i = 0; i < ps.ops_size(); ++i)
      enqueueOp(prog, dev, static_cast<uint32_t>(s), static_cast<uint32_t>(i), ps.ops(i),
                where + "." + at("streams", s) + "." + at("ops", i), source);
  }
}

void finishProgram(const pfrt_program &prog, const std::string &source) {
  try {
    validate(prog.program);
  } catch (const Error &e) {
    throw Error(PFRT_ERROR_INVALID_PROGRAM, source + ": " + e.what(), e.site());
  }
}

pfrt_program *buildFromProto(const pipefill::rt::StreamProgram &p, const std::string &source) {
  ProgramPtr prog = beginProgram(p, source);
  for (const pipefill::rt::DeviceProgram &dp : p.devices())
    addDeviceProgram(prog.get(), dp, source);
  finishProgram(*prog, source);
  return prog.release();
}

pfrt_program *loadProgram(const std::string &data, const std::string &source) {
  if (data.empty())
    throw Error(PFRT_ERROR_PARSE, source + ": file is empty (expected a StreamProgram)");
  pipefill::rt::StreamProgram proto;
  std::string error;
  bool text = pipefill::readsAsTextProto(source, data);
  if (data.size() > pipefill::kMaxInputBytes)
    throw Error(PFRT_ERROR_PARSE, source + ": file is " + std::to_string(data.size()) +
                                      " bytes; the limit is " +
                                      std::to_string(pipefill::kMaxInputBytes));
  google::protobuf::TextFormat::ParseInfoTree tree;
  bool haveTree = false;
  if (text) {
    if (!parseText(data, &proto, &error, &tree)) {
      const size_t first = data.find_first_not_of(" \t\r\n");
      throw Error(PFRT_ERROR_PARSE,
                  source + ":" + error +
                      (first != std::string::npos && data[first] == '{'
                           ? " (this is JSON: a program is a binary (.pb) or text-format "
                             "(.pbtxt) StreamProgram; rank parts and reports are not programs)"
                           : ""));
    }
    haveTree = true;
  } else {
    google::protobuf::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetRecursionLimit(64);
    if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      std::string textError;
      proto.Clear();
      haveTree = pipefill::looksLikeTextProto(data) && parseText(data, &proto, &textError, &tree);
      if (!haveTree)
        throw Error(PFRT_ERROR_PARSE,
                    source + ": not a valid binary StreamProgram (protobuf parse failed" +
                        (pipefill::isBinaryProtoPath(source) ? "; a text-format program needs a .pbtxt extension)"
                                              : ")"));
    }
  }
  checkProgramLimits(proto, source, haveTree ? &tree : nullptr);
  return buildFromProto(proto, source);
}

// SendOp and RecvOp carry the same fields.
template <typename Message>
static void setTransfer(Message *x, const Op &op) {
  x->set_peer(op.peer);
  x->set_bytes(op.bytes);
  x->set_tag(op.tag);
  x->set_planned_us(op.plannedUs);
  x->set_planned_start_us(op.plannedStartUs);
}

// One fill job and its layers.
static void jobToProto(const FillJob &job, pipefill::rt::FillWorkload *fj) {
  fj->set_name(job.name);
  fj->set_kind(static_cast<pipefill::rt::FillWorkload::Kind>(job.kind));
  fj->set_samples(job.samples);
  fj->set_samples_per_iteration(job.samplesPerIteration);
  fj->set_seed(job.seed);
  fj->set_learning_rate(job.learningRate);
  for (const FillLayer &layer : job.layers) {
    pipefill::rt::FillWorkloadLayer *fl = fj->add_layers();
    const pfrt_fill_layer_desc &d = layer.desc;
    fl->set_name(layer.name);
    switch (d.kind) {
    case PFRT_LAYER_ENCODER: {
      auto *e = fl->mutable_encoder();
      e->set_hidden(d.hidden);
      e->set_heads(d.heads);
      e->set_seq(d.seq);
      e->set_ffn(d.ffn);
      break;
    }
    case PFRT_LAYER_MLP: {
      auto *m = fl->mutable_mlp();
      m->set_in(d.in);
      m->set_hidden(d.hidden);
      m->set_out(d.out);
      break;
    }
    case PFRT_LAYER_GEMM_CHAIN: {
      auto *g = fl->mutable_gemm_chain();
      g->set_dim(d.dim);
      g->set_width(d.width);
      break;
    }
    }
    fl->set_planned_us_per_sample(d.planned_us_per_sample);
    fl->set_planned_backward_us_per_sample(d.planned_backward_us_per_sample);
    fl->set_weight_bytes(d.weight_bytes);
    fl->set_activation_bytes_per_sample(d.activation_bytes_per_sample);
  }
}

// One stream op, as the message of its kind.
static void opToProto(const Op &op, pipefill::rt::StreamOp *o) {
  switch (op.kind) {
  case OpKind::Compute: {
    auto *c2 = o->mutable_compute();
    c2->set_kind(static_cast<pipefill::rt::ComputeOp::Kind>(op.compute));
    c2->set_microbatch(op.microbatch);
    c2->set_chunk(op.chunk);
    c2->set_planned_us(op.plannedUs);
    c2->set_planned_start_us(op.plannedStartUs);
    break;
  }
  case OpKind::Send:
    setTransfer(o->mutable_send(), op);
    break;
  case OpKind::Recv:
    setTransfer(o->mutable_recv(), op);
    break;
  case OpKind::Record:
    o->mutable_record()->set_event(op.event);
    break;
  case OpKind::Wait:
    o->mutable_wait()->set_event(op.event);
    break;
  case OpKind::Bubble: {
    auto *b = o->mutable_bubble();
    b->set_bubble_id(op.bubble.bubble_id);
    b->set_kind(static_cast<pipefill::rt::BubbleOp::Kind>(op.bubble.kind));
    b->set_planned_start_us(op.bubble.planned_start_us);
    b->set_planned_duration_us(op.bubble.planned_duration_us);
    b->set_free_bytes(op.bubble.free_bytes);
    b->set_emulate_idle(op.bubble.emulate_idle != 0);
    break;
  }
  case OpKind::Fill: {
    auto *f = o->mutable_fill();
    f->set_job(op.fill.job);
    f->set_bubble_id(op.fill.bubble_id);
    f->set_layer_begin(op.fill.layer_begin);
    f->set_layer_end(op.fill.layer_end);
    f->set_batch(op.fill.batch);
    f->set_sample_begin(op.fill.sample_begin);
    f->set_iteration_offset(op.fill.iteration_offset);
    f->set_period(op.fill.period);
    f->set_phase(op.fill.phase);
    f->set_weights(op.fill.weights_streamed ? pipefill::rt::FillChunkOp::WEIGHTS_STREAMED
                                            : pipefill::rt::FillChunkOp::WEIGHTS_RESIDENT);
    f->set_activations(op.fill.activations_on_host
                           ? pipefill::rt::FillChunkOp::ACTIVATIONS_HOST
                           : pipefill::rt::FillChunkOp::ACTIVATIONS_DEVICE);
    f->set_planned_us(op.fill.planned_us);
    f->set_peak_bytes(op.fill.peak_bytes);
    break;
  }
  case OpKind::Copy: {
    auto *c3 = o->mutable_copy();
    c3->set_direction(static_cast<pipefill::rt::CopyOp::Direction>(op.direction));
    c3->set_bytes(op.bytes);
    c3->set_planned_us(op.plannedUs);
    break;
  }
  case OpKind::Alloc: {
    auto *a = o->mutable_alloc();
    a->set_buffer(op.buffer);
    a->set_bytes(op.bytes);
    break;
  }
  case OpKind::Free:
    o->mutable_free()->set_buffer(op.buffer);
    break;
  }
}

void toProto(const Program &prog, pipefill::rt::StreamProgram *p) {
  p->Clear();
  p->set_version(1);
  p->set_name(prog.name);
  p->set_iterations(prog.iterations);
  p->set_seed(prog.seed);
  p->set_planned_iteration_us(prog.plannedIterationUs);
  for (const FillJob &job : prog.jobs)
    jobToProto(job, p->add_fill_jobs());
  for (const Device &dev : prog.devices) {
    pipefill::rt::DeviceProgram *dp = p->add_devices();
    const pfrt_device_desc &d = dev.desc;
    dp->set_stage(d.stage);
    dp->set_memory_bytes(d.memory_bytes);
    dp->set_static_bytes(d.static_bytes);
    dp->set_planned_iteration_us(d.planned_iteration_us);
    dp->set_p2p_latency_us(d.p2p_latency_us);
    dp->set_p2p_bandwidth_gbps(d.p2p_bandwidth_gbps);
    dp->set_pcie_bandwidth_gbps(d.pcie_bandwidth_gbps);
    pipefill::rt::StageCalibration *c = dp->mutable_calibration();
    c->set_forward_us(d.forward_us);
    c->set_backward_us(d.backward_us);
    c->set_backward_input_us(d.backward_input_us);
    c->set_backward_weight_us(d.backward_weight_us);
    c->set_allreduce_us(d.allreduce_us);
    c->set_optimizer_us(d.optimizer_us);
    c->set_gemm_dim(d.gemm_dim);
    if (c->ByteSizeLong() == 0)
      dp->clear_calibration();
    for (const Event &e : dev.events)
      dp->add_events()->set_name(e.name);
    for (const Stream &s : dev.streams) {
      pipefill::rt::ProgramStream *ps = dp->add_streams();
      ps->set_name(s.name);
      ps->set_role(static_cast<pipefill::rt::ProgramStream::Role>(s.role));
      ps->set_priority(static_cast<pipefill::rt::ProgramStream::Priority>(s.priority));
      for (const Op &op : s.ops)
        opToProto(op, ps->add_ops());
    }
  }
}

uint64_t programFingerprint(const Program &program) {
  pipefill::rt::StreamProgram proto;
  toProto(program, &proto);
  proto.set_iterations(0);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    proto.SerializeToCodedStream(&coded);
  }
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

} // namespace pfrt
