// The C API's program half: the builder calls, validation, loading and saving, and the thread's
// last error. Part of pfrt_program (runtime/CMakeLists.txt), the library the compiler links to
// refuse what the runtime would refuse (runtime/ProgramCheck.h); no backend, MPI or threads here.
#include "runtime/pfrt.h"

#include "runtime/ApiGuard.h"
#include "runtime/Program.h"
#include "runtime/ProgramIO.h"
#include "support/ProtoText.h"
#include "proto/stream_program.pb.h"

#include <google/protobuf/text_format.h>

#include <string>

using pfrt::Error;
using pfrt::guard;
using pfrt::invalid;
using pfrt::prog;

namespace {

thread_local std::string tlsError;

pfrt::Device &device(pfrt_program *p, uint32_t d) {
  pfrt::Program &pr = prog(p);
  if (d >= pr.devices.size())
    invalid("device " + std::to_string(d) + " does not exist (program has " +
            std::to_string(pr.devices.size()) + " devices)");
  return pr.devices[d];
}

pfrt::Stream &stream(pfrt_program *p, uint32_t d, uint32_t s) {
  pfrt::Device &dev = device(p, d);
  if (s >= dev.streams.size())
    invalid("stream " + std::to_string(s) + " does not exist on device " + std::to_string(d) +
            " (it has " + std::to_string(dev.streams.size()) + " streams)");
  return dev.streams[s];
}

void checkTime(double us, const char *what) {
  if (!(us >= 0)) // also rejects NaN
    invalid(std::string(what) + " must be >= 0");
}

void checkEvent(pfrt_program *p, uint32_t d, uint32_t e) {
  pfrt::Device &dev = device(p, d);
  if (e >= dev.events.size())
    invalid("event " + std::to_string(e) + " does not exist on device " + std::to_string(d) +
            " (create it with pfrt_program_create_event first)");
}

pfrt::Op &append(pfrt_program *p, uint32_t d, uint32_t s, pfrt::OpKind kind) {
  pfrt::Stream &st = stream(p, d, s);
  st.ops.emplace_back();
  st.ops.back().kind = kind;
  return st.ops.back();
}

} // namespace

namespace pfrt {
void setLastError(const std::string &message) { tlsError = message; }
} // namespace pfrt

extern "C" {

const char *pfrt_last_error(void) { return tlsError.c_str(); }

const char *pfrt_status_name(pfrt_status status) {
  switch (status) {
  case PFRT_OK: return "PFRT_OK";
  case PFRT_ERROR_INVALID_ARGUMENT: return "PFRT_ERROR_INVALID_ARGUMENT";
  case PFRT_ERROR_IO: return "PFRT_ERROR_IO";
  case PFRT_ERROR_PARSE: return "PFRT_ERROR_PARSE";
  case PFRT_ERROR_INVALID_PROGRAM: return "PFRT_ERROR_INVALID_PROGRAM";
  case PFRT_ERROR_UNAVAILABLE: return "PFRT_ERROR_UNAVAILABLE";
  case PFRT_ERROR_BACKEND: return "PFRT_ERROR_BACKEND";
  case PFRT_ERROR_INTERNAL: return "PFRT_ERROR_INTERNAL";
  }
  return "PFRT_ERROR_UNKNOWN";
}

pfrt_status pfrt_program_create(const char *name, pfrt_program **out) {
  return guard([&] {
    if (!out)
      invalid("out_program is NULL");
    *out = nullptr;
    auto *p = new pfrt_program();
    p->program.name = name ? name : "";
    *out = p;
  });
}

void pfrt_program_destroy(pfrt_program *program) { delete program; }

pfrt_status pfrt_program_set_iterations(pfrt_program *p, uint32_t iterations) {
  return guard([&] { prog(p).iterations = iterations; });
}

pfrt_status pfrt_program_set_seed(pfrt_program *p, uint64_t seed) {
  return guard([&] { prog(p).seed = seed; });
}

pfrt_status pfrt_program_set_planned_iteration_us(pfrt_program *p, double us) {
  return guard([&] {
    checkTime(us, "planned_iteration_us");
    prog(p).plannedIterationUs = us;
  });
}

pfrt_status pfrt_program_add_device(pfrt_program *p, const pfrt_device_desc *desc, uint32_t *out) {
  return guard([&] {
    pfrt::Program &pr = prog(p);
    pfrt::Device dev;
    if (desc)
      dev.desc = *desc;
    const pfrt_device_desc &d = dev.desc;
    for (double v : {d.planned_iteration_us, d.p2p_latency_us, d.p2p_bandwidth_gbps,
                     d.pcie_bandwidth_gbps, d.forward_us, d.backward_us, d.backward_input_us,
                     d.backward_weight_us, d.allreduce_us, d.optimizer_us})
      checkTime(v, "device times and bandwidths");
    if (d.static_bytes > d.memory_bytes && d.memory_bytes)
      invalid("static_bytes (" + std::to_string(d.static_bytes) + ") exceed memory_bytes (" +
              std::to_string(d.memory_bytes) + ")");
    pr.devices.push_back(dev);
    if (out)
      *out = static_cast<uint32_t>(pr.devices.size() - 1);
  });
}

pfrt_status pfrt_program_create_stream(pfrt_program *p, uint32_t d, pfrt_stream_role role,
                                       pfrt_priority priority, const char *name, uint32_t *out) {
  return guard([&] {
    pfrt::Device &dev = device(p, d);
    if (role != PFRT_STREAM_MAIN && role != PFRT_STREAM_FILL && role != PFRT_STREAM_COPY)
      invalid("stream role " + std::to_string(static_cast<int>(role)) +
              " is not MAIN, FILL or COPY");
    if (priority < PFRT_PRIORITY_DEFAULT || priority > PFRT_PRIORITY_LOW)
      invalid("stream priority " + std::to_string(static_cast<int>(priority)) + " is unknown");
    pfrt::Stream s;
    s.name = name ? name : "";
    s.role = role;
    s.priority = priority;
    dev.streams.push_back(std::move(s));
    if (out)
      *out = static_cast<uint32_t>(dev.streams.size() - 1);
  });
}

pfrt_status pfrt_program_create_event(pfrt_program *p, uint32_t d, const char *name,
                                      uint32_t *out) {
  return guard([&] {
    pfrt::Device &dev = device(p, d);
    dev.events.push_back({name ? name : ""});
    if (out)
      *out = static_cast<uint32_t>(dev.events.size() - 1);
  });
}

pfrt_status pfrt_program_enqueue_compute(pfrt_program *p, uint32_t d, uint32_t s,
                                         pfrt_compute_kind kind, uint32_t microbatch,
                                         uint32_t chunk, double planned_us,
                                         double planned_start_us) {
  return guard([&] {
    if (kind < PFRT_COMPUTE_FORWARD || kind > PFRT_COMPUTE_OPTIMIZER)
      invalid("compute kind " + std::to_string(static_cast<int>(kind)) + " is unknown");
    checkTime(planned_us, "planned_us");
    checkTime(planned_start_us, "planned_start_us");
    pfrt::Op &op = append(p, d, s, pfrt::OpKind::Compute);
    op.compute = kind;
    op.microbatch = microbatch;
    op.chunk = chunk;
    op.plannedUs = planned_us;
    op.plannedStartUs = planned_start_us;
  });
}

static pfrt_status enqueueP2P(pfrt_program *p, uint32_t d, uint32_t s, pfrt::OpKind kind,
                              uint32_t peer, uint64_t bytes, uint32_t tag, double planned_us,
                              double planned_start_us) {
  return guard([&] {
    checkTime(planned_us, "planned_us");
    checkTime(planned_start_us, "planned_start_us");
    device(p, d);
    if (peer == d)
      invalid("peer device " + std::to_string(peer) + " is the device itself");
    pfrt::Op &op = append(p, d, s, kind);
    op.peer = peer;
    op.bytes = bytes;
    op.tag = tag;
    op.plannedUs = planned_us;
    op.plannedStartUs = planned_start_us;
  });
}

pfrt_status pfrt_program_enqueue_send(pfrt_program *p, uint32_t d, uint32_t s, uint32_t peer,
                                      uint64_t bytes, uint32_t tag, double planned_us,
                                      double planned_start_us) {
  return enqueueP2P(p, d, s, pfrt::OpKind::Send, peer, bytes, tag, planned_us, planned_start_us);
}

pfrt_status pfrt_program_enqueue_recv(pfrt_program *p, uint32_t d, uint32_t s, uint32_t peer,
                                      uint64_t bytes, uint32_t tag, double planned_us,
                                      double planned_start_us) {
  return enqueueP2P(p, d, s, pfrt::OpKind::Recv, peer, bytes, tag, planned_us, planned_start_us);
}

pfrt_status pfrt_program_enqueue_record(pfrt_program *p, uint32_t d, uint32_t s, uint32_t event) {
  return guard([&] {
    checkEvent(p, d, event);
    append(p, d, s, pfrt::OpKind::Record).event = event;
  });
}

pfrt_status pfrt_program_enqueue_wait(pfrt_program *p, uint32_t d, uint32_t s, uint32_t event) {
  return guard([&] {
    checkEvent(p, d, event);
    append(p, d, s, pfrt::OpKind::Wait).event = event;
  });
}

pfrt_status pfrt_program_enqueue_bubble(pfrt_program *p, uint32_t d, uint32_t s,
                                        const pfrt_bubble_desc *bubble) {
  return guard([&] {
    if (!bubble)
      invalid("bubble is NULL");
    checkTime(bubble->planned_start_us, "planned_start_us");
    checkTime(bubble->planned_duration_us, "planned_duration_us");
    if (bubble->kind < PFRT_BUBBLE_UNSPECIFIED || bubble->kind > PFRT_BUBBLE_TAIL)
      invalid("bubble kind " + std::to_string(static_cast<int>(bubble->kind)) + " is unknown");
    if (stream(p, d, s).role != PFRT_STREAM_MAIN)
      invalid("bubble markers belong on the MAIN stream (stream " + std::to_string(s) +
              " of device " + std::to_string(d) + " is not)");
    append(p, d, s, pfrt::OpKind::Bubble).bubble = *bubble;
  });
}

pfrt_status pfrt_program_enqueue_fill(pfrt_program *p, uint32_t d, uint32_t s,
                                      const pfrt_fill_chunk_desc *chunk) {
  return guard([&] {
    if (!chunk)
      invalid("fill chunk is NULL");
    checkTime(chunk->planned_us, "planned_us");
    if (chunk->batch == 0)
      invalid("fill chunk batch must be > 0");
    if (chunk->layer_begin >= chunk->layer_end)
      invalid("fill chunk layer range [" + std::to_string(chunk->layer_begin) + ", " +
              std::to_string(chunk->layer_end) + ") is empty");
    if (chunk->iteration_offset > 0)
      invalid("fill chunk iteration_offset must be <= 0");
    if (chunk->phase >= (chunk->period ? chunk->period : 1))
      invalid("fill chunk phase must be smaller than its period");
    if (stream(p, d, s).role == PFRT_STREAM_MAIN)
      invalid("fill chunks must not run on the MAIN stream");
    append(p, d, s, pfrt::OpKind::Fill).fill = *chunk;
  });
}

pfrt_status pfrt_program_enqueue_copy(pfrt_program *p, uint32_t d, uint32_t s,
                                      pfrt_copy_direction direction, uint64_t bytes,
                                      double planned_us) {
  return guard([&] {
    if (direction != PFRT_COPY_HOST_TO_DEVICE && direction != PFRT_COPY_DEVICE_TO_HOST)
      invalid("copy direction " + std::to_string(static_cast<int>(direction)) + " is unknown");
    checkTime(planned_us, "planned_us");
    pfrt::Op &op = append(p, d, s, pfrt::OpKind::Copy);
    op.direction = direction;
    op.bytes = bytes;
    op.plannedUs = planned_us;
  });
}

pfrt_status pfrt_program_enqueue_alloc(pfrt_program *p, uint32_t d, uint32_t s, uint32_t buffer,
                                       uint64_t bytes) {
  return guard([&] {
    pfrt::Op &op = append(p, d, s, pfrt::OpKind::Alloc);
    op.buffer = buffer;
    op.bytes = bytes;
  });
}

pfrt_status pfrt_program_enqueue_free(pfrt_program *p, uint32_t d, uint32_t s, uint32_t buffer) {
  return guard([&] { append(p, d, s, pfrt::OpKind::Free).buffer = buffer; });
}

pfrt_status pfrt_program_add_fill_job(pfrt_program *p, const pfrt_fill_job_desc *job,
                                      uint32_t *out) {
  return guard([&] {
    pfrt::Program &pr = prog(p);
    if (!job)
      invalid("fill job is NULL");
    if (job->kind != PFRT_FILL_INFERENCE && job->kind != PFRT_FILL_TRAINING)
      invalid("fill job kind " + std::to_string(static_cast<int>(job->kind)) +
              " is not INFERENCE or TRAINING");
    if (!(job->learning_rate >= 0))
      invalid("learning_rate must be >= 0");
    pfrt::FillJob j;
    j.name = job->name ? job->name : "";
    j.kind = job->kind;
    j.samples = job->samples;
    j.samplesPerIteration = job->samples_per_iteration;
    j.seed = job->seed;
    j.learningRate = job->learning_rate;
    pr.jobs.push_back(std::move(j));
    if (out)
      *out = static_cast<uint32_t>(pr.jobs.size() - 1);
  });
}

pfrt_status pfrt_fill_job_add_layer(pfrt_program *p, uint32_t job,
                                    const pfrt_fill_layer_desc *layer) {
  return guard([&] {
    pfrt::Program &pr = prog(p);
    if (job >= pr.jobs.size())
      invalid("fill job " + std::to_string(job) + " does not exist (program has " +
              std::to_string(pr.jobs.size()) + " fill jobs)");
    if (!layer)
      invalid("layer is NULL");
    if (layer->kind != PFRT_LAYER_ENCODER && layer->kind != PFRT_LAYER_MLP &&
        layer->kind != PFRT_LAYER_GEMM_CHAIN)
      invalid("layer kind " + std::to_string(static_cast<int>(layer->kind)) + " is unknown");
    checkTime(layer->planned_us_per_sample, "planned_us_per_sample");
    checkTime(layer->planned_backward_us_per_sample, "planned_backward_us_per_sample");
    pfrt::FillLayer l;
    l.name = layer->name ? layer->name : "";
    l.desc = *layer;
    l.desc.name = nullptr;
    pr.jobs[job].layers.push_back(std::move(l));
  });
}

pfrt_status pfrt_program_validate(const pfrt_program *p) {
  return guard([&] {
    if (!p)
      invalid("program is NULL");
    pfrt::validate(p->program);
  });
}

pfrt_status pfrt_program_load(const char *path, pfrt_program **out) {
  return guard([&] {
    if (!out)
      invalid("out_program is NULL");
    *out = nullptr;
    if (!path || !*path)
      invalid("program path is empty");
    *out = pfrt::loadProgram(pfrt::readFile(path), path);
  });
}

pfrt_status pfrt_program_load_memory(const void *bytes, size_t size, const char *source,
                                     pfrt_program **out) {
  return guard([&] {
    if (!out)
      invalid("out_program is NULL");
    *out = nullptr;
    if (!bytes && size)
      invalid("data is NULL");
    std::string dataStr(static_cast<const char *>(bytes), size);
    *out = pfrt::loadProgram(dataStr, source ? source : "<memory>");
  });
}

pfrt_status pfrt_program_save(const pfrt_program *p, const char *path) {
  return guard([&] {
    if (!p)
      invalid("program is NULL");
    if (!path || !*path)
      invalid("path is empty");
    pipefill::rt::StreamProgram proto;
    pfrt::toProto(p->program, &proto);
    std::string out;
    if (pipefill::isTextProtoPath(path))
      google::protobuf::TextFormat::PrintToString(proto, &out);
    else
      proto.SerializeToString(&out);
    pfrt::writeFile(path, out);
  });
}

} // extern "C"
