#include "runtime/RankResult.h"

#include "runtime/ProgramIO.h"
#include "proto/rank_result.pb.h"
#include "proto/stream_program.pb.h"
#include "support/Limits.h"
#include "support/Utf8.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace pfrt {
namespace {

constexpr const char *kFormat = "pipefill.rank_result.v1";

double relative(double t, double origin) { return t >= 0 ? t - origin : -1; }

[[noreturn]] void mismatch(const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_ARGUMENT, "rank reports do not belong together: " + message);
}

} // namespace

std::string rankResultJson(const Program &program, RunResult &&run, int rank, int world,
                           const std::string &transport) {
  pipefill::rt::RankResult r;
  r.set_format(kFormat);
  r.set_program(program.name);
  r.set_program_fingerprint(programFingerprint(program));
  r.set_rank(static_cast<uint32_t>(rank));
  r.set_world(static_cast<uint32_t>(world));
  r.set_transport(transport);
  r.set_backend(run.backend);
  r.set_rank_transfer(run.rankTransfer);
  r.set_run_id(run.runId);
  r.set_checkpoint_path(run.checkpointPath);
  r.set_resumed(run.resumed);
  r.set_measured_time(run.measuredTime);
  r.set_time_scale(run.timeScale);
  r.set_fill_enabled(run.fillEnabled);
  r.set_profile(run.profile);
  r.set_max_dim(run.maxDim);
  r.set_first_iteration(run.firstIteration);
  r.set_iterations(run.iterations);
  r.set_stopped(run.stopped);
  r.set_iterations_requested(run.stopped ? run.iterationsRequested : run.iterations);
  r.set_fill_bounded(run.fillBounded);
  r.set_fill_split(run.fillSplit);
  r.set_bounded_on_host(run.boundedOnHost);
  r.set_bounded_on_device(run.boundedOnDevice);
  r.set_host_lag_us(run.hostLagUs);
  {
    pipefill::rt::StreamProgram proto;
    toProto(program, &proto);
    proto.SerializeToString(r.mutable_program_proto());
  }
  for (uint32_t d = 0; d < run.slots.size(); ++d) {
    if (d < run.local.size() && !run.local[d])
      continue;
    pipefill::rt::RankDevice *dev = r.add_devices();
    dev->set_device(d);
    dev->set_backend(run.deviceBackend[d]);
    dev->set_fill(run.deviceFill[d]);
    for (uint32_t s = 0; s < run.slots[d].size(); ++s) {
      pipefill::rt::RankStream *st = dev->add_streams();
      std::vector<TimeSlot> &slots = run.slots[d][s];
      st->mutable_start()->Reserve(static_cast<int>(slots.size()));
      st->mutable_end()->Reserve(static_cast<int>(slots.size()));
      for (const TimeSlot &t : slots) {
        st->add_start(relative(t.start, run.runStartUs));
        st->add_end(relative(t.end, run.runStartUs));
      }
      std::vector<TimeSlot>().swap(slots); // one copy of the timeline at a time
      int32_t prio = d < run.streamPriority.size() && s < run.streamPriority[d].size()
                         ? run.streamPriority[d][s]
                         : INT32_MIN;
      st->set_has_priority(prio != INT32_MIN);
      st->set_priority(prio != INT32_MIN ? prio : 0);
    }
    dev->set_min_free_bytes(run.minFreeBytes[d]);
    dev->set_min_free_known(run.minFreeKnown[d]);
    dev->set_min_free_measured(run.minFreeMeasured[d]);
  }
  for (const RunResult::Job &j : run.jobs) {
    pipefill::rt::RankJob *out = r.add_jobs();
    out->set_name(j.name);
    out->set_samples_this_run(j.samplesThisRun);
    out->set_samples_completed(j.samplesCompleted);
    out->set_samples_planned(j.samplesPlanned);
    out->set_samples_in_flight_planned(j.samplesInFlightPlanned);
    out->set_steps(j.steps);
    out->set_checksum(j.checksum);
    out->set_loss_sum(j.lossSum);
    out->set_weights_checksum(j.weightsChecksum);
    out->set_chunks_run(j.chunksRun);
    out->set_chunks_skipped(j.chunksSkipped);
    out->set_chunks_deferred(j.chunksDeferred);
    out->set_chunks_split(j.chunksSplit);
    out->set_chunks_stopped_on_device(j.chunksStoppedOnDevice);
    out->set_chunks_pending(j.chunksPending);
    out->set_samples_pending(j.samplesPending);
    out->set_iterations_held(j.iterationsHeld);
    out->set_samples_held(j.samplesHeld);
  }
  for (const RunResult::ChunkRun &c : run.chunkRuns) {
    pipefill::rt::RankChunkRun *out = r.add_chunk_runs();
    out->set_device(c.device);
    out->set_job(c.job);
    out->set_stream(c.stream);
    out->set_op(c.op);
    out->set_bubble_id(c.bubbleId);
    out->set_iteration(c.iteration);
    out->set_pass_begin(c.passBegin);
    out->set_pass_end(c.passEnd);
    out->set_batch(c.batch);
    out->set_planned_us(c.plannedUs);
    out->set_predicted_us(c.predictedUs);
    out->set_start(relative(c.start, run.runStartUs));
    out->set_end(relative(c.end, run.runStartUs));
    out->set_deferred(c.deferred);
    if (c.cpuUs >= 0)
      out->set_cpu_us(c.cpuUs);
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  // Compact: a part is mostly op times, and rank 0 holds every rank's (one number per line
  // made their op times 2.1 times larger; tools read parts with any JSON parser). Fields at
  // their default are left out, as proto3 JSON does: printing them made protobuf 3.21 (Debian
  // 12) build the whole message as a tree first, 37 times the part's size (a 14 MB part of a
  // 5000-iteration run peaked at 650 MB per rank, 299 MB without; 20,000 iterations ran out of
  // a 2 GB address space after the run, with no report).
  options.add_whitespace = false;
  options.always_print_primitive_fields = false;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(r, &json, options);
  if (!status.ok())
    throw Error(PFRT_ERROR_INTERNAL, "cannot write the rank result: " + status.ToString());
  return json;
}

namespace {

/// Parses one rank part (JSON) into `r`; a parse error names the part.
void parseRankPart(const std::string &part, const std::string &name,
                   pipefill::rt::RankResult &r) {
  // Not JSON text at all (a binary file given as a part): protobuf's message would quote its
  // bytes, control characters and invalid UTF-8 included.
  const size_t invalid = pipefill::firstInvalidUtf8(part);
  const size_t first = part.find_first_not_of(" \t\r\n");
  if (invalid != std::string::npos || first == std::string::npos || part[first] != '{') {
    char byte[8] = "";
    if (invalid != std::string::npos)
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(part[invalid]));
    throw Error(PFRT_ERROR_PARSE,
                name + ": not a rank report (not a JSON object" +
                    (invalid != std::string::npos
                         ? ": byte " + std::to_string(invalid) + " is " + byte + ", not UTF-8"
                         : "") +
                    ")");
  }
  google::protobuf::util::JsonParseOptions options;
  auto status = google::protobuf::util::JsonStringToMessage(part, &r, options);
  if (!status.ok()) {
    // Say what it is when it is JSON of another kind (a merged run report given as a part):
    // protobuf's message alone names the first unknown field ("checkpoint: Cannot find field.").
    google::protobuf::Struct any;
    if (google::protobuf::util::JsonStringToMessage(part, &any).ok()) {
      auto format = any.fields().find("format");
      const bool report = any.fields().count("program") && any.fields().count("fill_bound");
      if (format == any.fields().end())
        throw Error(PFRT_ERROR_PARSE,
                    name + ": not a rank report: a JSON object without \"format\": \"" +
                        kFormat + "\"" +
                        (report ? " (it is a merged run report: give the rank parts, "
                                  "RUN.rank0.json ...)"
                                : ""));
    }
    throw Error(PFRT_ERROR_PARSE,
                name + ": not a rank report (" + std::string(status.message()) + ")");
  }
  if (r.format() != kFormat)
    throw Error(PFRT_ERROR_PARSE, name + ": not a rank report (format '" + r.format() +
                                      "', expected '" + kFormat + "')");
}

/// The parts belong together: one program, the same run settings, each rank
/// once. Returns the part index of each rank.
std::vector<int> checkRankParts(const Program &program,
                                const std::vector<pipefill::rt::RankResult> &ranks,
                                const std::vector<std::string> &names, bool programGiven) {
  const uint64_t fingerprint = programFingerprint(program);
  const pipefill::rt::RankResult &first = ranks[0];
  // The values that size or scale the merge, checked before anything is sized by them.
  for (size_t i = 0; i < ranks.size(); ++i) {
    const pipefill::rt::RankResult &r = ranks[i];
    if (r.program_fingerprint() != fingerprint || r.program() != program.name)
      mismatch(names[i] + " is of program '" + r.program() + "' (fingerprint " +
               std::to_string(r.program_fingerprint()) + "), not of " +
               (programGiven ? "the given program" : "the program " + names[0] + " carries") +
               " '" + program.name + "' (fingerprint " + std::to_string(fingerprint) + ")");
    if (r.world() != program.devices.size())
      mismatch(names[i] + " is from a world of " + std::to_string(r.world()) +
               " ranks; the program has " + std::to_string(program.devices.size()) +
               " devices (one rank per device)");
    // A run starts at any iteration a checkpoint holds (a 32-bit count: a resume past 10^6) and
    // runs at most 10^6.
    if (r.first_iteration() < 0 || r.first_iteration() > int64_t(UINT32_MAX) ||
        r.iterations() > pipefill::kMaxIterations)
      mismatch(names[i] + " has iterations " + std::to_string(r.first_iteration()) + " + " +
               std::to_string(r.iterations()) +
               "; a run has at most 10^6, from an iteration 0 to 4294967295");
    if (!(r.time_scale() >= 1e-4 && r.time_scale() <= 1000))
      mismatch(names[i] + " has time scale " + pipefill::formatBound(r.time_scale()) +
               "; runs use 0.0001 to 1000");
  }
  std::vector<int> byRank(first.world(), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const pipefill::rt::RankResult &r = ranks[i];
    auto same = [&](bool equal, const char *what) {
      if (!equal)
        mismatch(names[i] + " and " + names[0] + " differ in " + what);
    };
    same(r.world() == first.world(), "world (the number of ranks)");
    same(r.backend() == first.backend(), "backend");
    same(r.measured_time() == first.measured_time(), "time model");
    same(r.time_scale() == first.time_scale(), "time scale");
    same(r.fill_enabled() == first.fill_enabled(), "fill (--no-fill)");
    same(r.profile() == first.profile(), "profile mode");
    same(r.max_dim() == first.max_dim(), "workload max dim");
    same(r.first_iteration() == first.first_iteration(), "first iteration");
    same(r.iterations() == first.iterations(), "iterations");
    same(r.stopped() == first.stopped() &&
             r.iterations_requested() == first.iterations_requested(),
         "where the run stopped (iterations requested, stopped on request)");
    same(r.fill_bounded() == first.fill_bounded(), "fill policy");
    // Parts of two runs with the same settings would merge into numbers of neither.
    same(r.run_id() == first.run_id(),
         ("run: they are parts of two runs (run_id " + std::to_string(r.run_id()) + " and " +
          std::to_string(first.run_id()) + ")")
             .c_str());
    if (r.rank() >= first.world())
      mismatch(names[i] + " is rank " + std::to_string(r.rank()) + " of a world of " +
               std::to_string(first.world()));
    if (byRank[r.rank()] >= 0)
      mismatch(names[i] + " and " + names[byRank[r.rank()]] + " are both rank " +
               std::to_string(r.rank()));
    byRank[r.rank()] = static_cast<int>(i);
    if (r.jobs_size() != static_cast<int>(program.jobs.size()))
      mismatch(names[i] + " has " + std::to_string(r.jobs_size()) + " fill jobs, the program " +
               std::to_string(program.jobs.size()));
  }
  for (uint32_t k = 0; k < byRank.size(); ++k)
    if (byRank[k] < 0)
      mismatch("rank " + std::to_string(k) + " of " + std::to_string(first.world()) +
               " is missing (" + std::to_string(ranks.size()) + " report(s) given)");
  return byRank;
}

/// The run settings all parts share (checkRankParts), with per-device
/// vectors sized for the program.
RunResult mergedRunSettings(const pipefill::rt::RankResult &first, uint32_t numDevices) {
  RunResult run;
  run.backend = first.backend();
  run.rankTransfer = first.rank_transfer();
  run.measuredTime = first.measured_time();
  run.timeScale = first.time_scale();
  run.replayDevice = -1;
  run.fillEnabled = first.fill_enabled();
  run.profile = first.profile();
  run.maxDim = first.max_dim();
  run.firstIteration = first.first_iteration();
  run.iterations = first.iterations();
  run.stopped = first.stopped();
  run.iterationsRequested = first.stopped() ? first.iterations_requested() : first.iterations();
  // Every rank has its own checkpoint, CHECKPOINT.rankR: the merged report names them so.
  run.checkpointPath = first.checkpoint_path();
  const std::string rank0 = ".rank" + std::to_string(first.rank());
  if (run.checkpointPath.size() > rank0.size() &&
      run.checkpointPath.compare(run.checkpointPath.size() - rank0.size(), rank0.size(), rank0) == 0)
    run.checkpointPath.replace(run.checkpointPath.size() - rank0.size(), rank0.size(), ".rankR");
  run.resumed = first.resumed(); // every rank resumes at one iteration (Executor)
  run.runStartUs = 0;
  run.fillBounded = first.fill_bounded();
  run.fillSplit = first.fill_split();
  run.boundedOnHost = true;
  run.boundedOnDevice = first.bounded_on_device();
  run.deviceBackend.assign(numDevices, "");
  run.deviceFill.assign(numDevices, false);
  run.streamPriority.assign(numDevices, {});
  run.slots.assign(numDevices, {});
  run.minFreeBytes.assign(numDevices, 0);
  run.minFreeKnown.assign(numDevices, false);
  run.minFreeMeasured.assign(numDevices, false);
  run.local.assign(numDevices, true);
  return run;
}

// An instant of a part: microseconds from the run's start, or -1 (did not happen).
bool validInstant(double t) { return t == -1 || (t >= 0 && t <= pipefill::kMaxClockUs); }

/// One device of part `name`: its backend, memory and every stream's op
/// times, checked against the program's streams.
void mergeDevice(const Program &program, const pipefill::rt::RankDevice &dev,
                 const std::string &name, RunResult &run) {
  const uint32_t d = dev.device();
  const auto &streams = program.devices[d].streams;
  if (dev.streams_size() != static_cast<int>(streams.size()))
    mismatch(name + ": device " + std::to_string(d) + " has " +
             std::to_string(dev.streams_size()) + " streams, the program " +
             std::to_string(streams.size()));
  run.deviceBackend[d] = dev.backend();
  run.deviceFill[d] = dev.fill();
  run.minFreeBytes[d] = dev.min_free_bytes();
  run.minFreeKnown[d] = dev.min_free_known();
  run.minFreeMeasured[d] = dev.min_free_measured();
  for (int s = 0; s < dev.streams_size(); ++s) {
    const pipefill::rt::RankStream &st = dev.streams(s);
    const size_t slots = streams[static_cast<size_t>(s)].ops.size() * run.iterations;
    if (static_cast<size_t>(st.start_size()) != slots ||
        static_cast<size_t>(st.end_size()) != slots)
      mismatch(name + ": device " + std::to_string(d) + " stream " + std::to_string(s) +
               " has " + std::to_string(st.start_size()) + " op times, expected " +
               std::to_string(slots));
    std::vector<TimeSlot> times(slots);
    for (size_t n = 0; n < slots; ++n) {
      times[n].start = st.start(static_cast<int>(n));
      times[n].end = st.end(static_cast<int>(n));
      if (!validInstant(times[n].start) || !validInstant(times[n].end))
        mismatch(name + ": device " + std::to_string(d) + " stream " + std::to_string(s) +
                 " has op time " + pipefill::formatBound(validInstant(times[n].start)
                                                             ? times[n].end
                                                             : times[n].start) +
                 " (times are microseconds >= 0 from the run's start, or -1: not run)");
    }
    run.slots[d].push_back(std::move(times));
    run.streamPriority[d].push_back(st.has_priority() ? st.priority() : INT32_MIN);
  }
}

RunResult::ChunkRun chunkRunFromProto(const pipefill::rt::RankChunkRun &c) {
  RunResult::ChunkRun out;
  out.device = c.device();
  out.job = c.job();
  out.stream = c.stream();
  out.op = c.op();
  out.bubbleId = c.bubble_id();
  out.iteration = c.iteration();
  out.passBegin = c.pass_begin();
  out.passEnd = c.pass_end();
  out.batch = c.batch();
  out.plannedUs = c.planned_us();
  out.predictedUs = c.predicted_us();
  out.start = c.start();
  out.end = c.end();
  out.deferred = c.deferred();
  out.cpuUs = c.has_cpu_us() ? c.cpu_us() : -1;
  return out;
}

/// A chunk run of part `name` that names a device the part does not own, or a job, fill stream
/// or passes the program does not have, is refused (the report would index past them).
void checkChunkRun(const Program &program, const RunResult::ChunkRun &c, bool ownsDevice,
                   int64_t firstIteration, uint32_t iterations, const std::string &name) {
  const std::string what = name + ": a fill chunk run ";
  if (c.device >= program.devices.size() || !ownsDevice)
    mismatch(what + "is on device " + std::to_string(c.device) + ", which this part did not run");
  if (c.job >= program.jobs.size())
    mismatch(what + "names fill job " + std::to_string(c.job) + "; the program has " +
             std::to_string(program.jobs.size()));
  const Device &dev = program.devices[c.device];
  const bool fillStream =
      c.stream < dev.streams.size() &&
      std::any_of(dev.streams[c.stream].ops.begin(), dev.streams[c.stream].ops.end(),
                  [](const Op &op) { return op.kind == OpKind::Fill; });
  if (!fillStream)
    mismatch(what + "names stream " + std::to_string(c.stream) + " of device " +
             std::to_string(c.device) + ", which runs no fill in the program");
  bool bubble = false;
  for (const Stream &st : dev.streams)
    for (const Op &op : st.ops)
      bubble |= op.kind == OpKind::Bubble && op.bubble.bubble_id == c.bubbleId;
  if (!bubble)
    mismatch(what + "names bubble " + std::to_string(c.bubbleId) + ", which device " +
             std::to_string(c.device) + " does not have");
  const uint32_t passes = program.jobs[c.job].passes();
  if (c.passBegin >= c.passEnd || c.passEnd > passes)
    mismatch(what + "runs passes [" + std::to_string(c.passBegin) + ", " +
             std::to_string(c.passEnd) + ") of job '" + program.jobs[c.job].name + "', which has " +
             std::to_string(passes));
  if (!validInstant(c.start) || !validInstant(c.end) || !std::isfinite(c.plannedUs) ||
      c.plannedUs < 0 || !std::isfinite(c.predictedUs))
    mismatch(what + "has start " + pipefill::formatBound(c.start) + ", end " +
             pipefill::formatBound(c.end) + ", planned " + pipefill::formatBound(c.plannedUs) +
             " us, predicted " + pipefill::formatBound(c.predictedUs) +
             " us: not times of a run");
  // firstIteration <= 10^6 (checkRankParts): no overflow.
  if (c.iteration < firstIteration || c.iteration >= firstIteration + int64_t(iterations))
    mismatch(what + "is in iteration " + std::to_string(c.iteration) + ", outside the run's " +
             std::to_string(firstIteration) + " to " +
             std::to_string(firstIteration + int64_t(iterations) - 1));
}

/// Fill job `j` summed over the ranks (each rank ran its own devices' share).
void mergeJob(const Program &program, uint32_t j,
              const std::vector<pipefill::rt::RankResult> &ranks,
              const std::vector<int> &byRank, const std::vector<std::string> &names,
              RunResult &run) {
  RunResult::Job &out = run.jobs[j];
  out.name = program.jobs[j].name;
  out.kind = program.jobs[j].kind;
  out.shape = makeJobShape(program, j, run.maxDim);
  for (uint32_t k = 0; k < byRank.size(); ++k) {
    const size_t i = static_cast<size_t>(byRank[k]);
    const pipefill::rt::RankJob &rj = ranks[i].jobs(static_cast<int>(j));
    if (rj.name() != out.name)
      mismatch(names[i] + ": fill job " + std::to_string(j) + " is '" + rj.name() +
               "', the program's '" + out.name + "'");
    if (k == 0) {
      out.samplesPlanned = rj.samples_planned();
      out.samplesInFlightPlanned = rj.samples_in_flight_planned();
    } else if (rj.samples_planned() != out.samplesPlanned ||
               rj.samples_in_flight_planned() != out.samplesInFlightPlanned) {
      mismatch(names[i] + ": fill job '" + out.name + "' plans " +
               std::to_string(rj.samples_planned()) + " samples (" +
               std::to_string(rj.samples_in_flight_planned()) + " in flight at the end), rank 0's "
               "report " + std::to_string(out.samplesPlanned) + " (" +
               std::to_string(out.samplesInFlightPlanned) + ")");
    }
    out.samplesThisRun += rj.samples_this_run();
    out.samplesCompleted += rj.samples_completed();
    out.steps += rj.steps();
    if (!std::isfinite(rj.checksum()) || !std::isfinite(rj.loss_sum()) ||
        !std::isfinite(rj.weights_checksum()))
      mismatch(names[i] + ": fill job '" + out.name + "' has checksum " +
               pipefill::formatBound(rj.checksum()) + ", loss sum " +
               pipefill::formatBound(rj.loss_sum()) + ", weights checksum " +
               pipefill::formatBound(rj.weights_checksum()) + " (not finite)");
    out.checksum += rj.checksum();
    out.lossSum += rj.loss_sum();
    out.weightsChecksum += rj.weights_checksum();
    out.chunksRun += rj.chunks_run();
    out.chunksSkipped += rj.chunks_skipped();
    out.chunksDeferred += rj.chunks_deferred();
    out.chunksSplit += rj.chunks_split();
    out.chunksStoppedOnDevice += rj.chunks_stopped_on_device();
    out.chunksPending += rj.chunks_pending();
    out.samplesPending += rj.samples_pending();
    out.iterationsHeld += rj.iterations_held();
    out.samplesHeld += rj.samples_held();
  }
}

} // namespace

std::string embeddedProgram(const std::string &part, const std::string &name) {
  pipefill::rt::RankResult r;
  parseRankPart(part, name, r);
  if (r.program_proto().empty())
    throw Error(PFRT_ERROR_PARSE, name + ": the rank report holds no program");
  return r.program_proto();
}

RunResult mergeRankResults(const Program &program, std::vector<std::string> &&parts,
                           const std::vector<std::string> &names, bool programGiven) {
  const uint32_t numDevices = static_cast<uint32_t>(program.devices.size());
  if (parts.empty())
    throw Error(PFRT_ERROR_INVALID_ARGUMENT, "no rank reports to merge");
  std::vector<pipefill::rt::RankResult> ranks(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    parseRankPart(parts[i], names[i], ranks[i]);
    std::string().swap(parts[i]); // parsed: the text is no longer needed
  }
  const std::vector<int> byRank = checkRankParts(program, ranks, names, programGiven);

  RunResult run = mergedRunSettings(ranks[0], numDevices);
  std::vector<int> owner(numDevices, -1);
  for (uint32_t k = 0; k < byRank.size(); ++k) {
    const size_t i = static_cast<size_t>(byRank[k]);
    const pipefill::rt::RankResult &r = ranks[i];
    run.boundedOnHost = run.boundedOnHost && r.bounded_on_host();
    run.boundedOnDevice = run.boundedOnDevice && r.bounded_on_device();
    run.hostLagUs = std::max(run.hostLagUs, r.host_lag_us());
    for (pipefill::rt::RankDevice &dev : *ranks[i].mutable_devices()) {
      const uint32_t d = dev.device();
      if (d >= numDevices)
        mismatch(names[i] + " has device " + std::to_string(d) + "; the program has " +
                 std::to_string(numDevices));
      if (owner[d] == static_cast<int>(i))
        mismatch(names[i] + " lists device " + std::to_string(d) + " twice");
      if (owner[d] >= 0)
        mismatch("device " + std::to_string(d) + " is in " + names[i] + " and in " +
                 names[static_cast<size_t>(owner[d])]);
      owner[d] = static_cast<int>(i);
      mergeDevice(program, dev, names[i], run);
      // Its op times are in `run` now: free them (clear_streams would keep the storage).
      google::protobuf::RepeatedPtrField<pipefill::rt::RankStream>().Swap(dev.mutable_streams());
    }
  }
  for (uint32_t k = 0; k < byRank.size(); ++k) {
    const size_t i = static_cast<size_t>(byRank[k]);
    for (const pipefill::rt::RankChunkRun &c : ranks[i].chunk_runs()) {
      RunResult::ChunkRun run1 = chunkRunFromProto(c);
      checkChunkRun(program, run1, run1.device < numDevices && owner[run1.device] == int(i),
                    run.firstIteration, run.iterations, names[i]);
      run.chunkRuns.push_back(run1);
    }
  }
  for (uint32_t d = 0; d < numDevices; ++d)
    if (owner[d] < 0)
      mismatch("no rank report has device " + std::to_string(d) + " (the program has " +
               std::to_string(numDevices) + " devices)");

  run.jobs.resize(program.jobs.size());
  for (uint32_t j = 0; j < program.jobs.size(); ++j)
    mergeJob(program, j, ranks, byRank, names, run);
  return run;
}

} // namespace pfrt
