// The C API: argument checks, exception-to-status conversion, and the builder / run / report
// entry points. Nothing here throws across the boundary.
#include "runtime/pfrt.h"

#include "runtime/Backend.h"
#include "runtime/Compare.h"
#include "runtime/CheckpointFile.h"
#include "runtime/Executor.h"
#include "runtime/Program.h"
#include "runtime/ProgramIO.h"
#include "runtime/RankResult.h"
#include "runtime/Transport.h"
#include "runtime/Report.h"
#include "runtime/Session.h"
#include "runtime/Trace.h"
#include "support/ProtoText.h"
#include "proto/stream_program.pb.h"

#include <google/protobuf/text_format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unistd.h>

using pfrt::Error;

namespace {

thread_local std::string tlsError;

// pfrt_stop_request's flag: a lock-free atomic, so a signal handler may set it.
std::atomic<int> gStopRequest{0};
static_assert(std::atomic<int>::is_always_lock_free, "pfrt_stop_request must be signal-safe");

template <class F> pfrt_status guard(F &&f) {
  try {
    f();
    return PFRT_OK;
  } catch (const Error &e) {
    tlsError = e.what();
    return e.status();
  } catch (const std::bad_alloc &) {
    tlsError = "out of memory";
    return PFRT_ERROR_INTERNAL;
  } catch (const std::exception &e) {
    tlsError = std::string("internal error: ") + e.what();
    return PFRT_ERROR_INTERNAL;
  } catch (...) {
    tlsError = "internal error: unknown exception";
    return PFRT_ERROR_INTERNAL;
  }
}

[[noreturn]] void invalid(const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_ARGUMENT, message);
}

pfrt::Program &prog(pfrt_program *p) {
  if (!p)
    invalid("program is NULL");
  return p->program;
}

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

// One process per rank: checks rank/world against the program and MPI, runs this rank's device,
// and gathers every rank's part on rank 0, which merges them into the run report.
pfrt_report *runRank(pfrt::Program &pr, const pfrt::ProgramInfo &info, pfrt::RunConfig cfg,
                     const pfrt_options &o) {
  const int32_t devices = static_cast<int32_t>(pr.devices.size());
  const std::string perDevice = " (one rank per device: start it with mpirun -n " +
                                std::to_string(devices) + ")";
  if (o.world < 0)
    invalid("world must be >= 1 (0: the launcher's)");
  if (o.world > 0 && o.world != devices)
    invalid("world " + std::to_string(o.world) + " does not match the program's " +
            std::to_string(devices) + " devices" + perDevice);
  if (o.world > 0 && o.rank >= o.world)
    invalid("rank " + std::to_string(o.rank) + " is out of range: world " +
            std::to_string(o.world) + " has ranks 0 to " + std::to_string(o.world - 1));
  if (o.rank >= devices)
    invalid("rank " + std::to_string(o.rank) + " is out of range: the program has " +
            std::to_string(devices) + " devices (ranks 0 to " + std::to_string(devices - 1) + ")");
  if (o.peer_timeout_s < 0)
    invalid("peer_timeout_s must be >= 0");

  if (!(o.peer_timeout_s <= 1e6) || o.peer_timeout_s < 0)
    invalid("peer_timeout_s must be from 0 (the default, 120 s) to 1000000 seconds");
  const double timeout = o.peer_timeout_s > 0 ? o.peer_timeout_s : 120.0;
  std::unique_ptr<pfrt::Transport> transport;
  if (devices == 1 && o.world <= 1 && o.rank <= 0 && !std::getenv("OMPI_COMM_WORLD_SIZE"))
    transport = pfrt::createInProcessTransport(); // a one-device program is its own world
  else
    try {
      transport = pfrt::createMpiTransport(o.rank, o.world > 0 ? o.world : -1, timeout);
    } catch (...) {
      // A --rank the launcher contradicts fails this rank alone: its peers would wait for it
      // until the peer timeout. At exit MPI aborts (if this process started it), so mpirun stops
      // them at once.
      pfrt::mpiMarkFailed();
      throw;
    }
  try {
    if (transport->world() != devices)
      invalid("MPI_COMM_WORLD has " + std::to_string(transport->world()) +
              " processes but the program has " + std::to_string(devices) + " devices" +
              perDevice);
    cfg.rank = transport->rank();
    // Each rank saves its own devices' fill progress: CHECKPOINT.rankR.
    if (!cfg.checkpointPath.empty()) {
      pfrt::checkCheckpointMode(cfg.checkpointPath, cfg.rank);
      cfg.checkpointPath += ".rank" + std::to_string(cfg.rank);
      pfrt::checkOutputPath(cfg.checkpointPath, "checkpoint");
      pfrt::removeStaleCheckpointTemps(cfg.checkpointPath);
    }
    cfg.transport = transport.get();
    cfg.peerTimeoutS = timeout;
    cfg.rankTransfer = o.rank_transfer;
    pfrt::Executor exec(pr, info, cfg);
    pfrt::RunResult result = exec.run();
    auto report = std::make_unique<pfrt_report>();
    report->rank = transport->rank();
    report->world = transport->world();
    // Every rank knows where the run ended (the ranks agree on a stop): the stats and
    // pfrt_report_incomplete say so on each, not only in rank 0's merged report.
    report->data.stopped = result.stopped;
    report->data.firstIteration = result.firstIteration;
    report->data.iterations = result.iterations;
    const auto serializing = std::chrono::steady_clock::now();
    report->rankJson = pfrt::rankResultJson(pr, std::move(result), report->rank, report->world,
                                            transport->name());
    // The part is saved before the gather: a gather or merge that fails must not lose it.
    if (o.rank_part)
      o.rank_part(o.rank_part_user, report->rank, report->rankJson.data(),
                  report->rankJson.size());
    // The ranks reach the gather as fast as each serializes and saves its part (seconds apart
    // after a long run; parts of one run are of similar size): the gather waits that long again
    // (four times) on top of the peer timeout, so a small --peer-timeout does not fail a healthy
    // long run at its end.
    const double ownS =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - serializing).count();
    std::vector<std::string> parts = transport->gather(report->rankJson, 4 * ownS);
    if (report->rank == 0) {
      std::vector<std::string> names;
      for (size_t k = 0; k < parts.size(); ++k)
        names.push_back("rank " + std::to_string(k));
      pfrt::RunResult merged = pfrt::mergeRankResults(pr, std::move(parts), names);
      report->data = pfrt::buildReport(pr, info, std::move(merged));
      report->program = std::make_shared<const pfrt::Program>(pr);
    } else {
      report->data.programName = pr.name;
      report->data.json = report->rankJson;
      report->data.summary = "rank " + std::to_string(report->rank) + " of " +
                             std::to_string(report->world) + ": device " +
                             std::to_string(report->rank) +
                             " ran; rank 0 holds the merged report\n";
    }
    return report.release();
  } catch (...) {
    pfrt::mpiMarkFailed(); // at exit MPI aborts, so mpirun stops the peers
    throw;
  }
}

const pfrt::ReportData &data(const pfrt_report *r) {
  if (!r)
    invalid("report is NULL");
  return r->data;
}

} // namespace

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

pfrt_status pfrt_program_from_tables(const pfrt_program_tables *tables, pfrt_program **out) {
  return guard([&] {
    if (!out)
      invalid("out_program is NULL");
    *out = nullptr;
    if (!tables)
      invalid("tables is NULL");
    *out = pfrt::buildFromTables(*tables);
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

void pfrt_options_init(pfrt_options *o) {
  if (!o)
    return;
  *o = pfrt_options{};
  o->backend = PFRT_BACKEND_AUTO;
  o->enable_fill = 1;
  o->time_scale = 1.0;
  o->stage = -1;
  o->time_model = PFRT_TIME_MEASURED;
  o->fill_policy = PFRT_FILL_BOUNDED;
  o->fill_idle_priority = 1;
  o->cpu = -1;
  o->fill_cpu = -1;
  o->gpu = -1;
  o->rank = -1;
  o->world = 0;
  o->peer_timeout_s = 0;
  o->rank_transfer = PFRT_RANK_TRANSFER_AUTO;
  // Defaults a process can be started with (generated binaries, scripts); explicit option
  // values set after this call win. Unknown values are ignored here and rejected nowhere else.
  if (const char *tm = std::getenv("PFRT_TIME_MODEL")) {
    if (!std::strcmp(tm, "modelled"))
      o->time_model = PFRT_TIME_MODELLED;
  }
  if (const char *fp = std::getenv("PFRT_FILL_POLICY")) {
    if (!std::strcmp(fp, "unbounded"))
      o->fill_policy = PFRT_FILL_UNBOUNDED;
    else if (!std::strcmp(fp, "whole"))
      o->fill_policy = PFRT_FILL_BOUNDED_WHOLE;
  }
  if (const char *rt = std::getenv("PFRT_RANK_TRANSFER")) {
    if (!std::strcmp(rt, "nccl"))
      o->rank_transfer = PFRT_RANK_TRANSFER_NCCL;
    else if (!std::strcmp(rt, "modelled"))
      o->rank_transfer = PFRT_RANK_TRANSFER_MODELLED;
  }
}

pfrt_status pfrt_run(pfrt_program *p, const pfrt_options *options, pfrt_report **out) {
  return guard([&] {
    if (!out)
      invalid("out_report is NULL");
    *out = nullptr;
    pfrt::Program &pr = prog(p);
    pfrt_options o;
    pfrt_options_init(&o);
    if (options)
      o = *options;
    if (o.gpu < 0) {
      // The local rank of a launcher (mpirun, torchrun) picks this process's GPU.
      for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"})
        if (const char *v = std::getenv(var)) {
          char *end = nullptr;
          long rank = std::strtol(v, &end, 10);
          if (end != v && *end == 0 && rank >= 0) {
            o.gpu = static_cast<int32_t>(rank);
            break;
          }
        }
    }
    if (!(o.time_scale >= pfrt::kMinTimeScale && o.time_scale <= pfrt::kMaxTimeScale))
      invalid("time_scale must be in [" + std::to_string(pfrt::kMinTimeScale) + ", " +
              std::to_string(pfrt::kMaxTimeScale) + "], got " + std::to_string(o.time_scale));
    if (o.stage < -1)
      invalid("stage must be -1 (all devices) or a device index");
    // Fields that were ignored when out of range (world -3 ran one process; cpu 999 in
    // modelled time pinned nothing and said nothing).
    if (o.rank < -1)
      invalid("rank must be -1 (every device in this process) or a rank, got " +
              std::to_string(o.rank));
    if (o.world < 0)
      invalid("world must be >= 1 (0: the launcher's), got " + std::to_string(o.world));
    const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    for (auto [name, cpu] : {std::pair<const char *, int32_t>{"cpu", o.cpu}, {"fill_cpu", o.fill_cpu}})
      if (cpu < -1 || (cpus > 0 && cpu >= cpus))
        invalid(std::string(name) + " must be -1 (not pinned) or a CPU of this machine (0 to " +
                std::to_string(cpus - 1) + "), got " + std::to_string(cpu));
    if (o.time_model != PFRT_TIME_MEASURED && o.time_model != PFRT_TIME_MODELLED)
      invalid("unknown time_model " + std::to_string(static_cast<int>(o.time_model)));
    if (o.compute_fn && o.time_model == PFRT_TIME_MODELLED)
      invalid("compute_fn runs the main job's compute for real, timed on the clock; "
              "time_model PFRT_TIME_MODELLED would label it modelled at its planned times: use "
              "PFRT_TIME_MEASURED with compute_fn");
    if (o.fill_policy != PFRT_FILL_BOUNDED && o.fill_policy != PFRT_FILL_UNBOUNDED &&
        o.fill_policy != PFRT_FILL_BOUNDED_WHOLE)
      invalid("unknown fill_policy " + std::to_string(static_cast<int>(o.fill_policy)));
    if (o.rank_transfer != PFRT_RANK_TRANSFER_AUTO && o.rank_transfer != PFRT_RANK_TRANSFER_MODELLED &&
        o.rank_transfer != PFRT_RANK_TRANSFER_NCCL)
      invalid("unknown rank_transfer " + std::to_string(static_cast<int>(o.rank_transfer)));
    pfrt::ProgramInfo info = pfrt::validate(pr);
    pfrt::RunConfig cfg;
    cfg.backend = o.backend;
    cfg.iterations = o.iterations ? o.iterations : (pr.iterations ? pr.iterations : 1);
    pfrt::checkRunFits(pr, cfg.iterations);
    cfg.fill = o.enable_fill != 0;
    cfg.profile = o.profile != 0;
    cfg.timeScale = o.time_scale;
    cfg.checkpointPath = o.checkpoint_path ? o.checkpoint_path : "";
    if (o.checkpoint_recovery < PFRT_CHECKPOINT_FAIL ||
        o.checkpoint_recovery > PFRT_CHECKPOINT_RESTART)
      invalid("checkpoint_recovery must be FAIL, PREVIOUS or RESTART");
    cfg.checkpointRecovery = o.checkpoint_recovery;
    if (cfg.checkpointRecovery != PFRT_CHECKPOINT_FAIL && cfg.checkpointPath.empty())
      invalid("checkpoint_recovery PREVIOUS or RESTART says what to do with a bad checkpoint; "
              "checkpoint_path is not set");
    pfrt::checkOutputPath(cfg.checkpointPath, "checkpoint");
    if (!cfg.checkpointPath.empty())
      pfrt::removeStaleCheckpointTemps(cfg.checkpointPath);
    cfg.stage = o.stage;
    cfg.maxDim = o.max_dim;
    cfg.computeFn = o.compute_fn;
    cfg.computeUser = o.compute_user;
    cfg.verbose = o.verbose != 0;
    cfg.modelledTime = o.time_model == PFRT_TIME_MODELLED;
    cfg.fillBounded = o.fill_policy != PFRT_FILL_UNBOUNDED;
    cfg.fillSplit = o.fill_policy == PFRT_FILL_BOUNDED;
    cfg.fillIdlePriority = o.fill_idle_priority != 0;
    cfg.cpu = o.cpu;
    cfg.fillCpu = o.fill_cpu;
    cfg.gpu = o.gpu < 0 ? -1 : o.gpu; // kGpuCurrent (-2) is the sessions' own
    cfg.stopRequest = &gStopRequest;
    // Rank mode: called on the rank that runs the last device (the pipeline's last stage).
    cfg.progressFn = o.progress;
    cfg.progressUser = o.progress_user;
    cfg.compareRun = pfrt::currentCompareRun();
    if (o.rank >= 0 || o.world > 0) {
      *out = runRank(pr, info, cfg, o);
      return;
    }
    pfrt::checkCheckpointMode(cfg.checkpointPath, -1);
    pfrt::Executor exec(pr, info, cfg);
    pfrt::RunResult result = exec.run();
    auto *report = new pfrt_report();
    report->data = pfrt::buildReport(pr, info, std::move(result));
    report->program = std::make_shared<const pfrt::Program>(pr);
    *out = report;
  });
}

void pfrt_stop_request(void) { gStopRequest.store(1); }
void pfrt_stop_clear(void) { gStopRequest.store(0); }
int pfrt_stop_requested(void) { return gStopRequest.load(); }

int pfrt_cuda_device_count(void) {
  try {
    return pfrt::cudaDeviceCount();
  } catch (...) {
    return 0;
  }
}

int pfrt_backend_compiled(pfrt_backend backend) {
  switch (backend) {
  case PFRT_BACKEND_AUTO:
  case PFRT_BACKEND_HOST:
    return 1;
  case PFRT_BACKEND_CUDA:
    try {
      return pfrt::createCudaBackend() != nullptr;
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

pfrt_status pfrt_report_get_stats(const pfrt_report *r, pfrt_report_stats *s) {
  return guard([&] {
    const pfrt::ReportData &d = data(r);
    if (!s)
      invalid("out_stats is NULL");
    *s = pfrt_report_stats{};
    s->backend = d.backend.c_str();
    s->first_iteration = static_cast<uint32_t>(d.firstIteration);
    s->iterations = d.iterations;
    s->iteration_us_mean = d.iterationUsMean;
    s->planned_iteration_us = d.plannedIterationUs;
    s->bubble_us_per_iteration = d.bubbleUsPerIteration;
    s->fill_us_per_iteration = d.fillUsPerIteration;
    s->overrun_count = d.overrunCount;
    s->overrun_us = d.overrunUs;
    s->switch_latency_us_mean = d.switchLatencyMeanUs;
    s->jobs = static_cast<uint32_t>(d.jobs.size());
    s->time_measured = d.measuredTime ? 1 : 0;
    s->real_iteration_us_mean = d.realIterationUsMean;
    s->switch_latency_us_p50 = d.switchIdleP50Us;
    s->switch_latency_us_p99 = d.switchIdleP99Us;
    s->switch_latency_count = d.switchIdleCount;
    s->fill_us_run = d.fillUsRun;
    const pfrt::JobTotals t = pfrt::jobTotals(d.jobs);
    s->chunks_run = t.chunks.run;
    s->chunks_deferred = t.chunks.deferred;
    s->chunks_split = t.chunks.split;
    s->chunks_stopped_on_device = t.chunks.stoppedOnDevice;
    s->chunks_skipped = t.chunks.skipped;
    s->chunks_pending = t.chunks.pending;
    s->fill_samples_completed = t.samplesThisRun;
    s->fill_samples_planned = t.samplesPlanned;
  });
}

pfrt_status pfrt_report_get_job(const pfrt_report *r, uint32_t job, pfrt_report_job *out) {
  return guard([&] {
    const pfrt::ReportData &d = data(r);
    if (!out)
      invalid("out_job is NULL");
    if (job >= d.jobs.size())
      invalid("job " + std::to_string(job) + " does not exist (report has " +
              std::to_string(d.jobs.size()) + " jobs)");
    const pfrt::RunResult::Job &j = d.jobs[job];
    *out = pfrt_report_job{};
    out->name = j.name.c_str();
    out->kind = j.kind;
    out->samples_completed = j.samplesCompleted;
    out->samples_this_run = j.samplesThisRun;
    out->samples_planned = j.samplesPlanned;
    out->checksum = j.checksum;
    out->steps = j.steps;
    out->weights_checksum = j.weightsChecksum;
    out->iterations_held = j.iterationsHeld;
    out->samples_held = j.samplesHeld;
    out->samples_in_flight_planned = j.samplesInFlightPlanned;
  });
}

const char *pfrt_report_json(const pfrt_report *r) { return r ? r->data.json.c_str() : ""; }

const char *pfrt_report_summary(const pfrt_report *r) {
  return r ? r->data.summary.c_str() : "";
}

pfrt_status pfrt_report_write_json(const pfrt_report *r, const char *path) {
  return guard([&] {
    const pfrt::ReportData &d = data(r);
    if (!path || !*path)
      invalid("path is empty");
    pfrt::writeFile(path, d.json);
  });
}

pfrt_status pfrt_report_write_profile(const pfrt_report *r, const char *path) {
  return guard([&] {
    const pfrt::ReportData &d = data(r);
    if (!path || !*path)
      invalid("path is empty");
    std::string out;
    if (pipefill::isTextProtoPath(path))
      google::protobuf::TextFormat::PrintToString(d.profile, &out);
    else
      d.profile.SerializeToString(&out);
    pfrt::writeFile(path, out);
  });
}

pfrt_status pfrt_report_write_trace(const pfrt_report *r, const char *path) {
  return guard([&] {
    const pfrt::ReportData &d = data(r);
    if (!path || !*path)
      invalid("path is empty");
    if (!r->program)
      invalid("this report has no timeline: it is rank " + std::to_string(r->rank) +
              "'s part of a rank-mode run (rank 0's report has every rank's)");
    pfrt::writeFile(path, pfrt::runTraceJson(d, *r->program));
  });
}

void pfrt_report_destroy(pfrt_report *r) { delete r; }

const char *pfrt_report_rank_json(const pfrt_report *r) { return r ? r->rankJson.c_str() : ""; }

pfrt_status pfrt_report_get_rank(const pfrt_report *r, int32_t *rank, int32_t *world) {
  return guard([&] {
    data(r);
    if (rank)
      *rank = r->rank;
    if (world)
      *world = r->world;
  });
}

pfrt_status pfrt_report_merge(pfrt_program *p, const char *const *paths, uint32_t count,
                              pfrt_report **out) {
  return guard([&] {
    if (!out)
      invalid("out_report is NULL");
    *out = nullptr;
    if (!paths || count == 0)
      invalid("no rank reports given");
    std::vector<std::string> parts, names;
    for (uint32_t i = 0; i < count; ++i) {
      if (!paths[i])
        invalid("path " + std::to_string(i) + " is NULL");
      names.push_back(paths[i]);
      parts.push_back(pfrt::readFile(paths[i]));
    }
    std::unique_ptr<pfrt_program, void (*)(pfrt_program *)> embedded(nullptr,
                                                                     pfrt_program_destroy);
    if (!p) {
      embedded.reset(pfrt::loadProgram(pfrt::embeddedProgram(parts[0], names[0]),
                                       names[0] + " (the program it carries)"));
      p = embedded.get();
    }
    pfrt::Program &pr = prog(p);
    pfrt::ProgramInfo info = pfrt::validate(pr);
    pfrt::RunResult merged =
        pfrt::mergeRankResults(pr, std::move(parts), names, /*programGiven=*/!embedded);
    auto *report = new pfrt_report();
    report->data = pfrt::buildReport(pr, info, std::move(merged));
    report->program = std::make_shared<const pfrt::Program>(pr);
    *out = report;
  });
}

int pfrt_report_incomplete(const pfrt_report *r) { return r && r->data.stopped ? 1 : 0; }

pfrt_status pfrt_compare(pfrt_program *p, const pfrt_options *options, uint32_t repetitions,
                         pfrt_compare_result *out) {
  return guard([&] {
    prog(p);
    if (!out)
      invalid("out is NULL");
    pfrt_options o;
    pfrt_options_init(&o);
    if (options)
      o = *options;
    *out = pfrt::runCompare(p, o, repetitions);
  });
}

const char *pfrt_compare_format(const pfrt_compare_result *result, int json) {
  thread_local std::string text;
  text = result ? pfrt::formatCompare(*result, json != 0) : std::string();
  return text.c_str();
}

} // extern "C"

namespace pfrt {
// Lets the session entry points (Session.cpp) report through pfrt_last_error().
void setLastError(const std::string &message) { tlsError = message; }
} // namespace pfrt
