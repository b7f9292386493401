// The C API's run half: runs, comparisons, reports and the stop flag (the builder, loader and
// validation are in ProgramApi.cpp). Nothing here throws across the boundary.
#include "runtime/pfrt.h"

#include "runtime/ApiGuard.h"
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
using pfrt::guard;
using pfrt::invalid;
using pfrt::prog;

namespace {

// pfrt_stop_request's flag: a lock-free atomic, so a signal handler may set it.
std::atomic<int> gStopRequest{0};
static_assert(std::atomic<int>::is_always_lock_free, "pfrt_stop_request must be signal-safe");

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

