#include "runtime/Report.h"
#include "runtime/FillPredictor.h"

#include "support/Json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

namespace pfrt {

using pipefill::JsonWriter;

bool chunkTimeModelled(const ReportData &r, const RunResult::ChunkRun &c) {
  return !r.measuredTime && c.job < r.jobs.size() && c.passEnd > c.passBegin &&
         gemmChainOnly(r.jobs[c.job].shape, c.passBegin, c.passEnd);
}

const char *fillChunksLabel(const ReportData &r) {
  if (!r.fillEnabled)
    return "not run";
  size_t modelled = 0, timed = 0;
  for (const RunResult::ChunkRun &c : r.chunkRuns) {
    if (c.start < 0)
      continue;
    ++timed;
    modelled += chunkTimeModelled(r, c);
  }
  if (!modelled)
    return "measured";
  return modelled == timed ? "modelled" : "measured, GEMM_CHAIN-only chunks modelled";
}

namespace {

// Mean of the known (>= 0) per-iteration values, excluding the first iteration when later ones
// are known (warm-up); falls back to the first iteration alone.
double steadyMean(const std::vector<double> &v) {
  for (size_t from : {size_t(1), size_t(0)}) {
    double sum = 0;
    size_t n = 0;
    for (size_t i = from; i < v.size(); ++i)
      if (v[i] >= 0) {
        sum += v[i];
        ++n;
      }
    if (n)
      return sum / n;
  }
  return 0;
}

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The bubble bound's policy and totals over the jobs.
void writeFillBoundJson(JsonWriter &w, const ReportData &r) {
  w.beginObject("fill_bound");
  w.value("policy", !r.fillBounded ? "unbounded" : r.fillSplit ? "bounded" : "bounded-whole");
  w.value("enforced", !r.fillBounded                        ? "no"
                      : r.boundedOnHost && r.boundedOnDevice ? "host and device"
                      : r.boundedOnHost                      ? "host"
                                                             : "device");
  writeFillBoundCounts(w, jobTotals(r.jobs).chunks, r.fillUsRun, r.overrunUs);
  w.endObject();
}

// One device: identity, iteration, memory, streams and bubbles.
void writeDeviceJson(JsonWriter &w, const DeviceReport &d, const Program &program) {
  w.beginObject();
  w.value("device", d.device);
  w.value("stage", d.stage);
  w.value("backend", d.backend);
  w.value("time_source", d.timeSource);
  w.value("fill", d.fill);
  w.value("planned_iteration_us", d.plannedIterationUs);
  // A device that ran no iteration measured nothing: null, not 0 (as the run's means).
  if (d.iterations() > 0) {
    w.value("iteration_us_mean", d.iterationUsMean);
    w.value("main_busy_us_mean", d.mainBusyUsMean);
  } else {
    w.null("iteration_us_mean");
    w.null("main_busy_us_mean");
  }
  w.value("memory_bytes", d.memoryBytes);
  if (d.minFreeKnown)
    w.value("min_free_bytes", d.minFreeBytes);
  else
    w.null("min_free_bytes");
  w.value("min_free_measured", d.minFreeMeasured);
  w.beginArray("streams");
  for (size_t s = 0; s < program.devices[d.device].streams.size(); ++s) {
    const Stream &st = program.devices[d.device].streams[s];
    w.beginObject();
    w.value("name", st.name);
    w.value("role", st.role == PFRT_STREAM_MAIN   ? "main"
                    : st.role == PFRT_STREAM_FILL ? "fill"
                                                  : "copy");
    w.value("priority", st.effectivePriority() == PFRT_PRIORITY_HIGH  ? "high"
                        : st.effectivePriority() == PFRT_PRIORITY_LOW ? "low"
                                                                      : "normal");
    if (s < d.streamPriority.size() && d.streamPriority[s] != INT32_MIN)
      w.value("cuda_priority", d.streamPriority[s]);
    w.endObject();
  }
  w.endArray();
  w.beginArray("bubbles");
  for (const BubbleReport &b : d.bubbles) {
    w.beginObject();
    w.value("bubble_id", b.bubbleId);
    w.value("kind", bubbleKindName(b.kind));
    w.value("op_index", b.opIndex);
    w.value("planned_start_us", b.plannedStartUs);
    w.value("planned_us", b.plannedUs);
    w.value("free_bytes", b.freeBytes);
    // The main-stream gap, in the device's time_source.
    if (b.measuredMeanUs >= 0)
      w.value("gap_us_mean", b.measuredMeanUs);
    else
      w.null("gap_us_mean"); // no iteration of the run closed it
    w.numbers("gap_us", b.measuredUs);
    w.value("start_us_mean", b.startMeanUs);
    w.value("planned_fill_us", b.plannedFillUs);
    w.value("fill_us_mean", b.fillUsMean);
    if (b.switchLatencyMeanUs >= 0)
      w.value("switch_latency_us_mean", b.switchLatencyMeanUs);
    else
      w.null("switch_latency_us_mean");
    w.value("overruns", b.overruns);
    w.value("overrun_us", b.overrunUs);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

// Fill jobs: samples, checksums and the bubble bound's counts.
void writeJobsJson(JsonWriter &w, const ReportData &r, const Program &program) {
  w.beginObject("fill");
  w.beginArray("jobs");
  for (size_t j = 0; j < r.jobs.size(); ++j) {
    const RunResult::Job &job = r.jobs[j];
    w.beginObject();
    w.value("name", job.name);
    w.value("kind", fillKindName(job.kind));
    w.value("samples_planned", job.samplesPlanned);
    w.value("samples_completed", job.samplesCompleted);
    w.value("samples_this_run", job.samplesThisRun);
    w.value("total_samples", program.jobs[j].samples);
    w.value("checksum", job.checksum);
    if (job.kind == PFRT_FILL_TRAINING) {
      w.value("steps", job.steps);
      w.value("loss_mean", job.steps ? job.lossSum / job.steps : 0.0);
      w.value("weights_checksum", job.weightsChecksum);
    }
    writeChunkCounts(w, {job.chunksRun, job.chunksDeferred, job.chunksSkipped, job.chunksPending,
                         job.chunksSplit, job.chunksStoppedOnDevice});
    w.value("samples_pending", job.samplesPending);
    w.value("iterations_held", job.iterationsHeld);
    w.value("samples_held", job.samplesHeld);
    w.value("samples_in_flight_planned", job.samplesInFlightPlanned);
    w.value("divisor", job.shape.divisor);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

void writeJson(ReportData &r, const Program &program) {
  JsonWriter w;
  w.beginObject();
  w.value("program", r.programName);
  w.value("backend", r.backend);
  w.value("time_model", r.measuredTime ? "measured" : "modelled");
  // What each kind of number is (docs/runtime.md, "Labels").
  w.beginObject("labels");
  w.value("main_compute", r.measuredTime ? "measured" : "modelled");
  // CUDA replay: a send to an emulated peer keeps the stream busy for its planned time and a
  // receive from one waits for the peer's modelled send; the rest is timed on the GPU.
  w.value("transfers_and_copies", r.backend == "host"           ? "modelled"
                                  : r.backend == "cuda-replay" ? "measured, with emulated peers planned"
                                                               : "measured");
  // CUDA ranks: sends to another rank's GPU move bytes with NCCL (timed on the GPU like any op)
  // or take their planned time.
  if (!r.rankTransfer.empty())
    w.value("transfers_between_ranks", r.rankTransfer == "nccl" ? "measured" : "modelled");
  // Host replay: planned x the real stage's measured speed (modelled); otherwise planned.
  w.value("emulated_devices", r.emulatedSpeedRatio > 0 ? "modelled" : "planned");
  w.value("fill_chunks", fillChunksLabel(r));
  // The pipeline's iteration time (iteration_us*, slowdown_vs_planned) ends at the last device:
  // in a replay that is an emulated one, so the figure mixes the real stage with modelled peers.
  w.value("pipeline_iteration", !r.measuredTime      ? "modelled"
                                : r.replayDevice >= 0 ? "mixed: emulated devices modelled"
                                                      : "measured");
  w.endObject();
  w.value("time_scale", r.timeScale);
  if (r.replayDevice >= 0)
    w.value("replay_device", r.replayDevice);
  else
    w.null("replay_device");
  if (r.emulatedSpeedRatio > 0)
    w.value("emulated_compute_vs_planned", r.emulatedSpeedRatio);
  w.value("fill_enabled", r.fillEnabled);
  // How far the host threads fell behind the times they modelled (transfers, copies, emulated
  // devices; the summary notes a large one): in every run, as docs/runtime.md §8 lists it.
  w.value("host_lag_us_max", r.hostLagUs);
  w.value("profile_mode", r.profileMode);
  w.value("workload_max_dim", r.maxDim);
  w.value("first_iteration", r.firstIteration);
  w.value("iterations", r.iterations);
  w.value("iterations_requested", r.iterationsRequested);
  w.value("incomplete", r.stopped);
  // A run of no iterations (a resume at or past its target) measured nothing: null, not 0.
  auto observed = [&](const char *key, double v) {
    if (r.iterations)
      w.value(key, v);
    else
      w.null(key);
  };
  w.value("planned_iteration_us", r.plannedIterationUs);
  observed("iteration_us_mean", r.iterationUsMean);
  w.numbers("iteration_us", r.iterationUs);
  observed("real_iteration_us_mean", r.realIterationUsMean);
  observed("slowdown_vs_planned", r.plannedIterationUs > 0 && r.iterations
                                      ? r.iterationUsMean / r.plannedIterationUs - 1
                                      : 0.0);
  w.value("planned_bubble_us_per_iteration", r.plannedBubbleUsPerIteration);
  observed("bubble_us_per_iteration", r.bubbleUsPerIteration);
  w.value("bubbles_unobserved", r.bubblesUnobserved);
  w.value("planned_fill_us_per_iteration", r.plannedFillUsPerIteration);
  if (r.fillEnabled)
    observed("fill_us_per_iteration", r.fillUsPerIteration);
  else
    w.null("fill_us_per_iteration"); // no fill ran: nothing was timed
  w.beginObject("overruns");
  w.value("count", r.overrunCount);
  w.value("total_us", r.overrunUs);
  w.value("max_us", r.overrunMaxUs);
  w.value("chunks", r.overrunChunks);
  w.value("longer_than_predicted_us", r.overrunLongerUs);
  w.value("bubble_shorter_than_predicted_us", r.overrunShorterBubbleUs);
  if (r.overrunThreadWaitingUs >= 0)
    w.value("fill_thread_waiting_us", r.overrunThreadWaitingUs);
  w.endObject();
  if (r.switchLatencyMeanUs >= 0) {
    w.value("switch_latency_us_mean", r.switchLatencyMeanUs);
    w.value("switch_latency_us_max", r.switchLatencyMaxUs);
  } else {
    w.null("switch_latency_us_mean");
    w.null("switch_latency_us_max");
  }
  w.beginObject("switch_latency_idle_fill");
  w.value("count", r.switchIdleCount);
  if (r.switchIdleCount) {
    w.value("p50_us", r.switchIdleP50Us);
    w.value("p99_us", r.switchIdleP99Us);
  } else {
    w.null("p50_us");
    w.null("p99_us");
  }
  w.endObject();
  writeFillBoundJson(w, r);
  w.beginArray("devices");
  for (const DeviceReport &d : r.devices)
    writeDeviceJson(w, d, program);
  w.endArray();
  writeJobsJson(w, r, program);
  w.beginObject("checkpoint");
  w.value("path", r.checkpointPath);
  w.value("resumed", r.resumed);
  w.endObject();
  w.endObject();
  r.json = w.str();
}

// Two iterations' worth of planned chunks still waiting, or iterations held (the backlog reached
// that, FillQueue::planIteration): the plan asks more of the bubbles than this machine does in
// them, and the summary says so and what fits the plan to the machine.
void writeFellBehindNote(std::ostream &os, const ReportData &r) {
  const JobTotals t = jobTotals(r.jobs);
  const uint64_t pending = t.chunks.pending;
  if (!r.fillEnabled || !r.fillBounded || !(r.plannedChunksPerIteration > 0) ||
      (t.iterationsHeld == 0 && static_cast<double>(pending) < 2 * r.plannedChunksPerIteration))
    return;
  os << "  note: fill fell behind its plan: " << pending << " chunks wait, "
     << fmt("%.1f", static_cast<double>(pending) / r.plannedChunksPerIteration)
     << " iterations' worth";
  if (t.iterationsHeld)
    os << "; jobs began no new work in " << t.iterationsHeld << " iteration(s) (summed over"
       << " jobs and devices) while it drained, " << t.samplesHeld
       << " planned samples not begun yet";
  os << ". The plan asks more of the bubbles than this machine does in them. A profile round "
        "fits it: --profile-out P --profile-with-fill, then --pipefill-compile=profile=P\n";
}

void writeSummary(ReportData &r) {
  std::ostringstream os;
  const char *column = r.measuredTime ? "measured" : "modelled";
  size_t emulated = 0;
  for (const DeviceReport &d : r.devices)
    emulated += d.timeSource == "emulated";
  os << "pipefill-run: program '" << r.programName << "', backend " << r.backend << ", "
     << r.devices.size() << " device(s), " << r.iterations << " iteration(s)";
  if (r.firstIteration > 0)
    os << " resumed at iteration " << r.firstIteration;
  if (r.stopped)
    os << ", INCOMPLETE: stopped on request after " << r.iterations << " of "
       << r.iterationsRequested << " iteration(s)";
  if (!r.fillEnabled)
    os << (r.profileMode ? ", profile mode (no fill)" : ", fill disabled");
  os << "\n";
  if (r.measuredTime && r.backend == "host")
    os << "  time: measured (main compute real CPU work timed on the clock; sends, receives and "
          "copies modelled at planned times";
  else if (r.measuredTime)
    os << "  time: measured (device events";
  else
    os << "  time: MODELLED (main compute, transfers and copies last their planned times; only "
          "fill kernels are real";
  if (r.timeScale != 1.0)
    os << "; time_scale " << fmt("%g", r.timeScale)
       << ": times below are plan us, real us / " << fmt("%g", r.timeScale);
  os << ")\n";
  if (emulated && r.emulatedSpeedRatio > 0)
    os << "  replay: device " << r.replayDevice << " runs for real, " << emulated
       << " device(s) emulated at its measured speed (their compute took "
       << fmt("%.3f", r.emulatedSpeedRatio) << " x planned)\n";
  else if (emulated)
    os << "  replay: device " << r.replayDevice << " runs for real, " << emulated
       << " device(s) emulated at their planned times\n";
  if (r.iterations == 0) {
    os << "  nothing to run: the checkpoint is already at iteration " << r.firstIteration
       << ", at or past the total asked for (--iterations counts the resumed ones too); nothing "
          "was measured\n";
    r.summary = os.str();
    return;
  }
  if (r.hostLagUs > 1000 && r.hostLagUs > 0.05 * r.plannedIterationUs)
    os << "  note: host threads lagged up to " << fmt("%.0f", r.hostLagUs)
       << " us behind the modelled clock (loaded machine); fill timings are affected\n";
  char line[256];
  auto row = [&](const char *name, const std::string &planned, const std::string &observed,
                 const std::string &note) {
    std::snprintf(line, sizeof line, "  %-28s %14s %14s  %s\n", name, planned.c_str(),
                  observed.c_str(), note.c_str());
    os << line;
  };
  row("", "planned", column, "");
  std::string delta;
  if (r.plannedIterationUs > 0 && r.iterations)
    delta = fmt("%+.2f%%", 100.0 * (r.iterationUsMean / r.plannedIterationUs - 1));
  row("iteration time (us)", fmt("%.1f", r.plannedIterationUs), fmt("%.1f", r.iterationUsMean),
      delta + (emulated && r.measuredTime
                   ? std::string(delta.empty() ? "" : "  ") +
                         "pipeline: ends at emulated devices, whose times are modelled"
                   : std::string()));
  if (emulated)
    row("real-stage iteration (us)", "-", fmt("%.1f", r.realIterationUsMean),
        "main stream of the device that ran for real");
  row("bubble time / iteration (us)", fmt("%.1f", r.plannedBubbleUsPerIteration),
      fmt("%.1f", r.bubbleUsPerIteration),
      (emulated ? "main-stream gaps, all devices (the " + std::to_string(emulated) +
                      " emulated ones modelled)"
                : std::string("main-stream gaps, all devices")) +
          (r.bubblesUnobserved
               ? "; " + std::to_string(r.bubblesUnobserved) +
                     " tail bubble(s) no iteration closed left out (" +
                     fmt("%.1f", r.unobservedPlannedUs) + " us planned): run 2+ iterations"
               : std::string()));
  {
    // Scaled-down fill layers (max_dim) do less work than the plan's: say so beside the times.
    bool scaled = false;
    for (const RunResult::Job &j : r.jobs)
      scaled |= j.shape.divisor > 1;
    const std::string label = fillChunksLabel(r);
    row("fill work / iteration (us)", fmt("%.1f", r.plannedFillUsPerIteration),
        r.fillEnabled ? fmt("%.1f", r.fillUsPerIteration) : std::string("-"),
        (!r.fillEnabled ? std::string("fill not run (--no-fill or a profile run)")
         : label == "measured" ? std::string("fill chunks timed on the clock")
                               : "fill chunk times: " + label) +
            (emulated ? ", on the device that ran for real" : "") +
            (scaled && r.fillEnabled ? "; layers scaled down to dim <= " + std::to_string(r.maxDim) +
                          " (max_dim), so less work than planned"
                    : ""));
  }
  row("overruns", "0", std::to_string(r.overrunCount),
      fmt("%.1f us total", r.overrunUs) +
          (r.fillUsRun > 0 ? fmt(" (%.2f%% of fill time)", 100.0 * r.overrunUs / r.fillUsRun)
                           : std::string()));
  if (r.overrunChunks)
    row("  by chunk", "-", std::to_string(r.overrunChunks),
        fmt("%.1f us ran longer than predicted, ", r.overrunLongerUs) +
            fmt("%.1f us bubble ended before the prediction", r.overrunShorterBubbleUs) +
            (r.overrunThreadWaitingUs >= 0
                 ? fmt("; %.1f us of it the fill thread was not running",
                       r.overrunThreadWaitingUs)
                 : std::string()));
  {
    auto [run, deferred, skipped, pending, split, onDevice] = jobTotals(r.jobs).chunks;
    if (r.fillEnabled)
      row("fill chunks run", "-", std::to_string(run),
          std::to_string(deferred) + " deferred, " + std::to_string(split) + " split, " +
              std::to_string(skipped) + " skipped, " +
              std::to_string(pending) + " pending" +
              (r.backend == "cuda" ? ", " + std::to_string(onDevice) + " stopped on the GPU"
                                   : std::string()) +
              " (" +
              (!r.fillBounded       ? std::string("unbounded")
               : !r.fillSplit       ? std::string("bubble-bound, whole chunks")
               : r.boundedOnHost && r.boundedOnDevice
                   ? std::string("bubble-bound on the host and the GPU")
               : r.boundedOnHost    ? std::string("bubble-bound")
                                    : std::string("bubble-bound on the device")) +
              ")");
  }
  writeFellBehindNote(os, r);
  if (r.switchIdleCount)
    row("bubble switch latency (us)", "-", fmt("p50 %.1f", r.switchIdleP50Us),
        fmt("p99 %.1f", r.switchIdleP99Us) + ", " + std::to_string(r.switchIdleCount) +
            " bubbles with an idle fill stream" +
            (r.timeScale != 1.0 ? fmt("; real us: p50 %.1f", r.switchIdleP50Us * r.timeScale) +
                                      fmt(" p99 %.1f", r.switchIdleP99Us * r.timeScale)
                                : std::string()));
  size_t notRun = 0;
  for (size_t k = 0; k < r.jobs.size(); ++k) {
    const RunResult::Job &j = r.jobs[k];
    if (k < r.jobEmulated.size() && r.jobEmulated[k]) {
      ++notRun;
      continue;
    }
    std::string name = "job " + j.name;
    if (name.size() > 28)
      name.resize(28);
    row(name.c_str(), std::to_string(j.samplesPlanned) + " smp",
        std::to_string(j.samplesThisRun) + " smp",
        std::string(fillKindName(j.kind)) + ", checksum " + fmt("%.6g", j.checksum) +
            (j.kind == PFRT_FILL_TRAINING ? ", loss " + fmt("%.4g", j.steps ? j.lossSum / j.steps
                                                                            : 0.0)
                                          : std::string()));
  }
  if (notRun)
    os << "  (" << notRun
       << " job(s) on emulated devices only, not run here: in the JSON report)\n";
  r.summary = os.str();
}

// The profile's fill_chunk_gap: from each chunk's end to the next one's start on the same fill
// stream in the same bubble instance (device, stream, iteration, bubble), both timed for real,
// divided by the time scale.
void profileChunkGaps(ReportData &r, double scale) {
  using Key = std::tuple<uint32_t, uint32_t, int64_t, uint32_t>;
  std::map<Key, std::vector<std::pair<double, double>>> spans; // (start, end) per bubble instance
  for (const RunResult::ChunkRun &c : r.chunkRuns)
    if (c.start >= 0 && c.end >= c.start && !chunkTimeModelled(r, c))
      spans[Key(c.device, c.stream, c.iteration, c.bubbleId)].emplace_back(c.start, c.end);
  std::vector<double> gaps;
  for (auto &kv : spans) {
    std::vector<std::pair<double, double>> &v = kv.second;
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].first >= v[i - 1].second) // one stream runs one chunk at a time
        gaps.push_back((v[i].first - v[i - 1].second) / scale);
  }
  pipefill::rt::MeasuredChunkGap *g = r.profile.mutable_fill_chunk_gap();
  g->set_samples(gaps.size());
  g->set_measured(!gaps.empty());
  if (gaps.empty())
    return;
  std::sort(gaps.begin(), gaps.end());
  double sum = 0;
  for (double x : gaps)
    sum += x;
  g->set_mean_us(sum / static_cast<double>(gaps.size()));
  g->set_p50_us(sortedMedian(gaps));
  g->set_p90_us(sortedPercentile(gaps, 0.9));
}

void buildProfile(ReportData &r, const Program &program, const ProgramInfo &info,
                  const RunResult &run) {
  pipefill::rt::MeasuredProfile &p = r.profile;
  p.set_program(program.name);
  p.set_backend(r.backend);
  p.set_iterations(r.iterations);
  if (r.stopped) {
    p.set_incomplete(true);
    p.set_iterations_requested(r.iterationsRequested);
  }
  p.set_iteration_us(r.iterationUsMean);
  p.set_planned_iteration_us(r.plannedIterationUs);
  p.set_replay_device(r.replayDevice);
  p.set_time_model(r.measuredTime ? "measured" : "modelled");
  for (const DeviceReport &dr : r.devices) {
    const bool measured = dr.timeSource == "measured";
    const Device &dev = program.devices[dr.device];
    const Stream &main = dev.streams[info.devices[dr.device].mainStream];
    pipefill::rt::MeasuredStage *st = p.add_stages();
    st->set_device(dr.device);
    st->set_stage(dev.desc.stage);
    st->set_iteration_us(dr.iterationUsMean);
    st->set_memory_bytes(dr.memoryBytes);
    st->set_min_free_bytes(dr.minFreeKnown ? dr.minFreeBytes : 0);
    st->set_min_free_measured(dr.minFreeKnown && dr.minFreeMeasured);
    std::map<int, std::pair<double, int>> byKind;
    const size_t n = dr.iterations();
    // A stage that ran no iteration (a resume with nothing left, a stop before the first) has
    // no time at all: marked measured, its zeros would plan the stage with no compute.
    st->set_measured(measured && n > 0);
    const size_t from = n > 1 ? 1 : 0;
    for (size_t i = 0; i < main.ops.size(); ++i) {
      const Op &op = main.ops[i];
      if (op.kind != OpKind::Compute)
        continue;
      double dur = 0, start = 0;
      int cnt = 0;
      for (size_t k = from; k < n; ++k) {
        const OpTime &t = dr.mainOps()[k][i];
        if (t.start < 0)
          continue;
        dur += t.duration();
        start += t.start - dr.iterationStart[k];
        ++cnt;
      }
      pipefill::rt::MeasuredInstruction *mi = st->add_instructions();
      mi->set_op_index(static_cast<uint32_t>(i));
      mi->set_kind(static_cast<pipefill::rt::ComputeOp::Kind>(op.compute));
      mi->set_microbatch(op.microbatch);
      mi->set_chunk(op.chunk);
      mi->set_planned_us(effectivePlannedUs(dev, op));
      // An instruction no iteration timed (a stop before it) has neither time.
      mi->set_measured(measured && cnt > 0);
      if (cnt > 0)
        (measured ? mi->set_measured_us(dur / cnt) : mi->set_modelled_us(dur / cnt));
      mi->set_start_us(cnt ? start / cnt : 0);
      auto &acc = byKind[op.compute];
      acc.first += dur;
      acc.second += cnt;
    }
    auto mean = [&](pfrt_compute_kind k) {
      if (!measured)
        return 0.0; // only measured means feed the compiler
      auto it = byKind.find(k);
      return it == byKind.end() || !it->second.second ? 0.0
                                                       : it->second.first / it->second.second;
    };
    st->set_forward_us(mean(PFRT_COMPUTE_FORWARD));
    st->set_backward_us(mean(PFRT_COMPUTE_BACKWARD));
    st->set_backward_input_us(mean(PFRT_COMPUTE_BACKWARD_INPUT));
    st->set_backward_weight_us(mean(PFRT_COMPUTE_BACKWARD_WEIGHT));
    st->set_allreduce_us(mean(PFRT_COMPUTE_ALLREDUCE));
    st->set_optimizer_us(mean(PFRT_COMPUTE_OPTIMIZER));
    for (const BubbleReport &b : dr.bubbles) {
      pipefill::rt::MeasuredBubble *mb = st->add_bubbles();
      mb->set_bubble_id(b.bubbleId);
      mb->set_kind(static_cast<pipefill::rt::BubbleOp::Kind>(b.kind));
      mb->set_planned_us(b.plannedUs);
      // A gap no iteration closed has no time at all: neither measured nor modelled.
      mb->set_measured(measured && b.measuredMeanUs >= 0);
      if (b.measuredMeanUs >= 0)
        (measured ? mb->set_measured_us(b.measuredMeanUs) : mb->set_modelled_us(b.measuredMeanUs));
      mb->set_start_us(b.startMeanUs);
      mb->set_planned_free_bytes(b.freeBytes);
    }
  }
  // Fill-layer costs: each host-timed chunk's time is split over its passes in proportion to
  // their planned costs; per (job name, layer) the estimate is the sample-weighted mean.
  struct Acc {
    double planned = 0, plannedBack = 0, fwd = 0, back = 0, fwdSamples = 0, backSamples = 0;
    std::vector<double> fwdRatios, backRatios; // measured / planned of the chunks with the layer
  };
  std::map<std::pair<std::string, uint32_t>, Acc> layers;
  const double scale = run.timeScale > 0 ? run.timeScale : 1.0;
  for (const RunResult::ChunkRun &c : r.chunkRuns) {
    if (c.start < 0 || c.end < c.start || c.batch == 0)
      continue;
    const RunResult::Job &job = run.jobs[c.job];
    const uint32_t L = job.shape.numLayers();
    // A chunk of GEMM_CHAIN stand-ins in the modelled time model lasts its planned time: skip.
    double plannedSum = 0;
    for (uint32_t q = c.passBegin; q < c.passEnd; ++q)
      plannedSum += plannedPassUs(job.shape, q, c.batch);
    if (chunkTimeModelled(r, c) || plannedSum <= 0)
      continue;
    const double ratio = (c.end - c.start) / scale / plannedSum;
    const std::string name = job.name.substr(0, job.name.rfind('@'));
    for (uint32_t q = c.passBegin; q < c.passEnd; ++q) {
      const uint32_t l = q < L ? q : 2 * L - 1 - q;
      const LayerShape &ls = job.shape.layers[l];
      Acc &a = layers[{name, l}];
      a.planned = ls.usPerSample;
      a.plannedBack = job.kind == PFRT_FILL_TRAINING ? ls.backwardUsPerSample : 0;
      if (q < L) {
        a.fwd += ratio * ls.usPerSample * c.batch;
        a.fwdSamples += c.batch;
        a.fwdRatios.push_back(ratio);
      } else {
        a.back += ratio * ls.backwardUsPerSample * c.batch;
        a.backSamples += c.batch;
        a.backRatios.push_back(ratio);
      }
    }
  }
  auto p90 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : sortedPercentile(v, 0.9);
  };
  for (const auto &kv : layers) {
    const Acc &a = kv.second;
    pipefill::rt::MeasuredFillLayer *fl = p.add_fill_layers();
    fl->set_job(kv.first.first);
    fl->set_layer(kv.first.second);
    fl->set_planned_us_per_sample(a.planned);
    fl->set_measured_us_per_sample(a.fwdSamples ? a.fwd / a.fwdSamples : 0);
    fl->set_planned_backward_us_per_sample(a.plannedBack);
    fl->set_measured_backward_us_per_sample(a.backSamples ? a.back / a.backSamples : 0);
    fl->set_p90_us_per_sample(a.planned * p90(a.fwdRatios));
    fl->set_p90_backward_us_per_sample(a.plannedBack * p90(a.backRatios));
    fl->set_samples(static_cast<uint64_t>(a.fwdSamples));
    fl->set_measured(a.fwdSamples > 0);
    fl->set_max_dim(r.maxDim);
  }
  profileChunkGaps(r, scale);
}

} // namespace

namespace {

// What every step of buildReport shares: the run, its iteration count, and the conversion of a
// slot's host-clock instants to report time (from the run's start, divided by the time scale).
struct ReportInputs {
  const Program &program;
  const ProgramInfo &info;
  RunResult &run; // its slots are released as deviceTimeline converts them
  size_t n;
  double scale;
  OpTime model(const TimeSlot &s) const {
    OpTime t;
    if (s.start >= 0)
      t.start = (s.start - run.runStartUs) / scale;
    if (s.end >= 0)
      t.end = (s.end - run.runStartUs) / scale;
    return t;
  }
};

// Run-wide fields copied from the run.
void reportHeader(const ReportInputs &in, ReportData &r) {
  const RunResult &run = in.run;
  r.programName = in.program.name;
  r.backend = run.backend;
  r.rankTransfer = run.rankTransfer;
  r.measuredTime = run.measuredTime;
  r.timeScale = run.timeScale;
  r.replayDevice = run.replayDevice;
  r.fillEnabled = run.fillEnabled;
  r.profileMode = run.profile;
  r.maxDim = run.maxDim;
  r.firstIteration = run.firstIteration;
  r.iterations = run.iterations;
  r.plannedIterationUs = plannedIterationUs(in.program);
  r.jobs = run.jobs;
  r.resumed = run.resumed;
  r.stopped = run.stopped;
  r.iterationsRequested = run.stopped ? run.iterationsRequested : run.iterations;
  r.checkpointPath = run.checkpointPath;
  r.fillBounded = run.fillBounded;
  r.fillSplit = run.fillSplit;
  // Relative to the run's start, unknown instants (-1) kept: every host-timed chunk began after
  // runStartUs, so `start >= 0` still tells them apart.
  r.chunkRuns = std::move(run.chunkRuns);
  for (auto &c : r.chunkRuns) {
    c.start = c.start >= 0 ? c.start - run.runStartUs : -1;
    c.end = c.end >= 0 ? c.end - run.runStartUs : -1;
  }
  r.boundedOnHost = run.boundedOnHost;
  r.boundedOnDevice = run.boundedOnDevice;
  r.hostLagUs = run.hostLagUs / in.scale;
  r.emulatedSpeedRatio = run.emulatedSpeedRatio;
}

// A device's identity, every stream's op times and its main stream's iterations.
DeviceReport deviceTimeline(const ReportInputs &in, uint32_t d) {
  const RunResult &run = in.run;
  const Device &dev = in.program.devices[d];
  const uint32_t m = in.info.devices[d].mainStream;
  const Stream &main = dev.streams[m];
  const size_t n = in.n, nops = main.ops.size();
  DeviceReport dr;
  dr.device = d;
  dr.stage = dev.desc.stage;
  dr.backend = run.deviceBackend[d];
  dr.timeSource = dr.backend == "emulated" ? "emulated" : run.measuredTime ? "measured"
                                                                           : "modelled";
  dr.fill = run.deviceFill[d];
  dr.memoryBytes = dev.desc.memory_bytes;
  dr.plannedIterationUs = dev.desc.planned_iteration_us;
  dr.minFreeKnown = run.minFreeKnown.size() > d && run.minFreeKnown[d];
  dr.minFreeMeasured = run.minFreeMeasured.size() > d && run.minFreeMeasured[d];
  dr.minFreeBytes = dr.minFreeKnown ? run.minFreeBytes[d] : 0;
  dr.mainStream = m;
  if (run.streamPriority.size() > d)
    dr.streamPriority = run.streamPriority[d];
  // Each stream's slots become report times, and the run's copy is released at once: the
  // report never holds more than one stream's timeline twice.
  dr.streamOps.resize(dev.streams.size());
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    StreamTimes &st = dr.streamOps[s];
    std::vector<TimeSlot> &slots = in.run.slots[d][s];
    st.ops = dev.streams[s].ops.size();
    st.iterations = n;
    st.times.resize(n * st.ops);
    for (size_t j = 0; j < st.times.size(); ++j)
      st.times[j] = in.model(slots[j]);
    std::vector<TimeSlot>().swap(slots);
  }
  dr.iterationStart.assign(n, -1);
  dr.iterationEnd.assign(n, -1);
  std::vector<double> busy(n, 0), devIter(n, -1);
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < nops; ++i) {
      const OpTime &t = dr.mainOps()[k][i];
      if (t.start >= 0 && dr.iterationStart[k] < 0)
        dr.iterationStart[k] = t.start;
      if (t.end >= 0)
        dr.iterationEnd[k] = std::max(dr.iterationEnd[k], t.end);
      if (main.ops[i].kind == OpKind::Compute)
        busy[k] += t.duration();
    }
    double from = k ? dr.iterationEnd[k - 1] : dr.iterationStart[0];
    devIter[k] = dr.iterationEnd[k] - from;
  }
  dr.iterationUsMean = steadyMean(devIter);
  dr.mainBusyUsMean = steadyMean(busy);
  return dr;
}

// Bubbles: the gap from the marker to the next main-stream compute. Consecutive bubbles with no
// compute between them (an iteration's tail bubble and the next iteration's warm-up bubble) share
// that gap as the executor's bound does (Executor::BubbleClock): each after the first begins at
// the planned end of the one before (not before its own marker, not after main resumed), so the
// two are not one counted twice and neither is measured as empty. Returns bubble id -> index in
// dr.bubbles.
std::map<uint32_t, size_t> deviceBubbles(const ReportInputs &in, const Stream &main,
                                         DeviceReport &dr) {
  const size_t n = in.n, nops = main.ops.size();
  std::map<uint32_t, size_t> bubbleIndex;
  std::vector<size_t> indexOfOp(nops, SIZE_MAX);
  for (size_t i = 0; i < nops; ++i) {
    const Op &op = main.ops[i];
    if (op.kind != OpKind::Bubble)
      continue;
    BubbleReport b;
    b.bubbleId = op.bubble.bubble_id;
    b.kind = op.bubble.kind;
    b.opIndex = static_cast<uint32_t>(i);
    b.plannedStartUs = op.bubble.planned_start_us;
    b.plannedUs = op.bubble.planned_duration_us;
    b.freeBytes = op.bubble.free_bytes;
    b.measuredUs.assign(n, -1);
    b.beginUs.assign(n, -1);
    b.idleEndUs.assign(n, -1);
    indexOfOp[i] = dr.bubbles.size();
    bubbleIndex[b.bubbleId] = dr.bubbles.size();
    dr.bubbles.push_back(b);
  }
  // The main stream's ops in run order; `chain` holds the bubbles begun since the last compute.
  std::vector<std::pair<BubbleReport *, size_t>> chain; // bubble, iteration
  // Main resumed at resumeAt (-1: the run ended first): each bubble of the chain ends where the
  // next one begins, the last one there.
  auto close = [&](double resumeAt) {
    for (size_t c = 0; c < chain.size(); ++c) {
      auto &[b, k] = chain[c];
      const double marker = dr.mainOps()[k][b->opIndex].start;
      if (c == 0) {
        b->beginUs[k] = marker;
      } else {
        const auto &[prev, kp] = chain[c - 1];
        b->beginUs[k] = chainedBubbleBegin(marker, prev->beginUs[kp], prev->plannedUs, resumeAt);
      }
      b->idleEndUs[k] = resumeAt;
    }
    for (size_t c = 0; c < chain.size(); ++c) {
      auto &[b, k] = chain[c];
      const double end = c + 1 < chain.size() ? chain[c + 1].first->beginUs[chain[c + 1].second]
                                              : resumeAt;
      if (end >= 0)
        b->measuredUs[k] = end - b->beginUs[k];
    }
    chain.clear();
  };
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < nops; ++i) {
      const double start = dr.mainOps()[k][i].start;
      if (start < 0)
        continue;
      if (main.ops[i].kind == OpKind::Compute)
        close(start);
      else if (main.ops[i].kind == OpKind::Bubble)
        chain.push_back({&dr.bubbles[indexOfOp[i]], k});
    }
  close(-1); // the last bubbles of the run: their end is not known
  for (BubbleReport &b : dr.bubbles) {
    std::vector<double> starts(n, -1);
    for (size_t k = 0; k < n; ++k)
      if (b.beginUs[k] >= 0 && dr.iterationStart[k] >= 0)
        starts[k] = b.beginUs[k] - dr.iterationStart[k];
    const bool closed = std::any_of(b.measuredUs.begin(), b.measuredUs.end(),
                                    [](double v) { return v >= 0; });
    b.measuredMeanUs = closed ? steadyMean(b.measuredUs) : -1;
    b.startMeanUs = steadyMean(starts);
  }
  return bubbleIndex;
}

// Fill chunks: planned and run time inside their bubble, and overruns: still running when main
// resumed compute (a chunk of a tail bubble that runs on into the next warm-up bubble, main still
// idle, is not one).
void fillInBubbles(const ReportInputs &in, uint32_t d,
                   const std::map<uint32_t, size_t> &bubbleIndex, DeviceReport &dr,
                   ReportData &r, std::vector<double> &overruns) {
  const Device &dev = in.program.devices[d];
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    for (size_t i = 0; i < st.ops.size(); ++i) {
      const Op &op = st.ops[i];
      if (op.kind != OpKind::Fill)
        continue;
      auto bi = bubbleIndex.find(op.fill.bubble_id);
      if (bi == bubbleIndex.end())
        continue;
      BubbleReport &b = dr.bubbles[bi->second];
      // A chunk of a periodic plan runs once every `period` iterations.
      const double perIteration =
          op.fill.planned_us / static_cast<double>(op.fill.period ? op.fill.period : 1);
      b.plannedFillUs += perIteration;
      if (dr.timeSource != "emulated") { // replay: fill runs only where main does (as samples)
        r.plannedFillUsPerIteration += perIteration;
        r.plannedChunksPerIteration += 1.0 / (op.fill.period ? op.fill.period : 1);
      }
      for (size_t k = 0; k < in.n; ++k) {
        OpTime t = dr.streamOps[s][k][i];
        if (t.start < 0)
          continue;
        b.fillUsMean += t.duration() / in.n;
        const double idleEnd = b.idleEndUs[k];
        if (idleEnd >= 0 && t.end > idleEnd + 1e-3) {
          ++b.overruns;
          b.overrunUs += t.end - idleEnd;
          overruns.push_back(t.end - idleEnd);
        }
      }
    }
  }
}

// Why chunks overran: each chunk that ended past the measured end of the bubble it ran in, its
// overrun split into the part it ran longer than predicted and the rest (its bubble ended
// earlier than the bound had predicted). Chunks without a prediction (unbounded) count as the
// latter.
void overrunCauses(const ReportInputs &in, const std::vector<std::map<uint32_t, size_t>> &index,
                   ReportData &r) {
  for (const RunResult::ChunkRun &c : r.chunkRuns) {
    if (c.start < 0 || c.end < c.start || c.device >= r.devices.size())
      continue;
    const DeviceReport &dr = r.devices[c.device];
    auto bi = index[c.device].find(c.bubbleId);
    const int64_t k = c.iteration - in.run.firstIteration;
    if (bi == index[c.device].end() || k < 0 || k >= int64_t(dr.iterations()))
      continue;
    const BubbleReport &b = dr.bubbles[bi->second];
    const double idleEnd = b.idleEndUs[k];
    const double end = c.end / in.scale, took = (c.end - c.start) / in.scale;
    if (idleEnd < 0 || !(end > idleEnd + 1e-3))
      continue;
    const double over = end - idleEnd;
    const double longer =
        c.predictedUs > 0 ? std::min(over, std::max(0.0, took - c.predictedUs)) : 0.0;
    ++r.overrunChunks;
    r.overrunLongerUs += longer;
    r.overrunShorterBubbleUs += over - longer;
    if (c.cpuUs >= 0 && r.measuredTime)
      r.overrunThreadWaitingUs = std::max(0.0, r.overrunThreadWaitingUs) +
                                 std::min(over, std::max(0.0, took - c.cpuUs / in.scale));
  }
}

// Switch latency: bubble begin -> first fill chunk start in it, per iteration; `idle` keeps only
// bubbles whose fill stream had nothing running when they began.
void switchLatencies(const ReportInputs &in, uint32_t d, DeviceReport &dr,
                     std::vector<double> &all, std::vector<double> &idle) {
  const Device &dev = in.program.devices[d];
  // Fill slots per stream (all iterations), sorted by start, with the latest end so far: was the
  // stream busy at an instant? And each bubble's fill ops (stream, op), found once.
  std::vector<std::vector<std::pair<double, double>>> busyFill(dev.streams.size());
  std::vector<std::vector<double>> maxEndUpTo(dev.streams.size());
  std::map<uint32_t, std::vector<std::pair<uint32_t, size_t>>> fillOpsOf;
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    for (size_t i = 0; i < st.ops.size(); ++i)
      if (st.ops[i].kind == OpKind::Fill)
        fillOpsOf[st.ops[i].fill.bubble_id].push_back({s, i});
    for (size_t k = 0; k < in.n; ++k)
      for (size_t i = 0; i < st.ops.size(); ++i)
        if (st.ops[i].kind == OpKind::Fill) {
          OpTime t = dr.streamOps[s][k][i];
          if (t.start >= 0 && t.end >= t.start)
            busyFill[s].push_back({t.start, t.end});
        }
    std::sort(busyFill[s].begin(), busyFill[s].end());
    double maxEnd = -1;
    for (const auto &iv : busyFill[s])
      maxEndUpTo[s].push_back(maxEnd = std::max(maxEnd, iv.second));
  }
  // Some slot that started before `at` was still running at `at`.
  auto busyAt = [&](uint32_t stream, double at) {
    const auto &iv = busyFill[stream];
    const size_t before =
        std::lower_bound(iv.begin(), iv.end(), at,
                         [](const std::pair<double, double> &x, double a) { return x.first < a; }) -
        iv.begin();
    return before > 0 && maxEndUpTo[stream][before - 1] > at;
  };
  static const std::vector<std::pair<uint32_t, size_t>> kNone;
  for (BubbleReport &b : dr.bubbles) {
    auto found = fillOpsOf.find(b.bubbleId);
    const auto &fillOps = found == fillOpsOf.end() ? kNone : found->second;
    double sum = 0;
    int cnt = 0;
    for (size_t k = 0; k < in.n; ++k) {
      double begin = b.beginUs[k];
      double first = -1;
      uint32_t firstStream = 0;
      for (const auto &[s, i] : fillOps) {
        OpTime t = dr.streamOps[s][k][i];
        if (t.start >= 0 && (first < 0 || t.start < first)) {
          first = t.start;
          firstStream = s;
        }
      }
      if (begin >= 0 && first >= 0) {
        double lat = std::max(0.0, first - begin);
        sum += lat;
        ++cnt;
        all.push_back(lat);
        if (!busyAt(firstStream, begin))
          idle.push_back(lat);
      }
    }
    if (cnt)
      b.switchLatencyMeanUs = sum / cnt;
  }
}

// Run-wide statistics over the devices: overruns, switch latency, real-stage iteration, fill run.
void runStatistics(const ReportInputs &in, const std::vector<double> &overruns,
                   const std::vector<double> &latencies, std::vector<double> idle,
                   ReportData &r) {
  for (const DeviceReport &dr : r.devices)
    for (const BubbleReport &b : dr.bubbles) {
      if (b.measuredMeanUs >= 0) {
        r.bubbleUsPerIteration += b.measuredMeanUs;
      } else {
        ++r.bubblesUnobserved;
        r.unobservedPlannedUs += b.plannedUs;
      }
      r.fillUsPerIteration += b.fillUsMean;
      r.overrunCount += b.overruns;
      r.overrunUs += b.overrunUs;
    }
  for (double o : overruns)
    r.overrunMaxUs = std::max(r.overrunMaxUs, o);
  if (!latencies.empty()) {
    double sum = 0, mx = 0;
    for (double v : latencies) {
      sum += v;
      mx = std::max(mx, v);
    }
    r.switchLatencyMeanUs = sum / latencies.size();
    r.switchLatencyMaxUs = mx;
  }
  if (!idle.empty()) {
    std::sort(idle.begin(), idle.end());
    r.switchIdleP50Us = sortedPercentile(idle, 0.50);
    r.switchIdleP99Us = sortedPercentile(idle, 0.99);
    r.switchIdleCount = idle.size();
    r.switchIdleUs = std::move(idle);
  }
  double sum = 0;
  int cnt = 0;
  for (const DeviceReport &dr : r.devices)
    if (dr.timeSource != "emulated") {
      sum += dr.iterationUsMean;
      ++cnt;
    }
  r.realIterationUsMean = cnt ? sum / cnt : 0;
  for (const RunResult::ChunkRun &c : r.chunkRuns)
    if (c.start >= 0 && c.end >= c.start)
      r.fillUsRun += (c.end - c.start) / in.scale;
  if (!r.boundedOnHost) // device-timed chunks: their slots
    r.fillUsRun = r.fillUsPerIteration * static_cast<double>(in.n);
}

// Pipeline iteration times: between consecutive iteration ends (max over devices).
void pipelineIterations(size_t n, ReportData &r) {
  r.iterationUs.assign(n, 0);
  double prevEnd = -1;
  for (size_t k = 0; k < n; ++k) {
    double end = -1, start = -1;
    for (const DeviceReport &dr : r.devices) {
      end = std::max(end, dr.iterationEnd[k]);
      if (dr.iterationStart[k] >= 0 && (start < 0 || dr.iterationStart[k] < start))
        start = dr.iterationStart[k];
    }
    r.iterationUs[k] = end - (k ? prevEnd : std::max(0.0, start));
    prevEnd = end;
  }
  r.iterationUsMean = steadyMean(r.iterationUs);
}

} // namespace

JobTotals jobTotals(const std::vector<RunResult::Job> &jobs) {
  JobTotals t;
  for (const RunResult::Job &j : jobs) {
    t.chunks.run += j.chunksRun;
    t.chunks.deferred += j.chunksDeferred;
    t.chunks.skipped += j.chunksSkipped;
    t.chunks.pending += j.chunksPending;
    t.chunks.split += j.chunksSplit;
    t.chunks.stoppedOnDevice += j.chunksStoppedOnDevice;
    t.samplesThisRun += j.samplesThisRun;
    t.samplesPlanned += j.samplesPlanned;
    t.iterationsHeld += j.iterationsHeld;
    t.samplesHeld += j.samplesHeld;
  }
  return t;
}

void writeChunkCounts(JsonWriter &w, const ChunkCounts &c) {
  w.value("chunks_run", c.run);
  w.value("chunks_deferred", c.deferred);
  w.value("chunks_split", c.split);
  w.value("chunks_skipped", c.skipped);
  w.value("chunks_pending", c.pending);
  w.value("chunks_stopped_on_device", c.stoppedOnDevice);
}

void writeFillBoundCounts(JsonWriter &w, const ChunkCounts &c, double fillUsRun,
                          double overrunUs) {
  writeChunkCounts(w, c);
  w.value("fill_us_run", fillUsRun);
  w.value("overrun_us", overrunUs);
  w.value("overrun_fraction_of_fill", fillUsRun > 0 ? overrunUs / fillUsRun : 0.0);
}

ReportData buildReport(const Program &program, const ProgramInfo &info, RunResult &&run) {
  const ReportInputs in{program, info, run, run.iterations,
                        run.timeScale > 0 ? run.timeScale : 1.0};
  ReportData r;
  reportHeader(in, r);
  r.jobEmulated.assign(r.jobs.size(), false);
  for (size_t j = 0; j < r.jobs.size() && j < info.jobs.size(); ++j) {
    bool anyReal = false;
    for (const auto &ds : info.jobs[j].streamOnDevice)
      anyReal |= ds.first >= run.deviceBackend.size() || run.deviceBackend[ds.first] != "emulated";
    r.jobEmulated[j] = !info.jobs[j].streamOnDevice.empty() && !anyReal;
  }
  std::vector<double> latencies, idleLatencies, overruns;
  std::vector<std::map<uint32_t, size_t>> bubbleIndexes;
  for (uint32_t d = 0; d < program.devices.size(); ++d) {
    DeviceReport dr = deviceTimeline(in, d);
    const Stream &main = program.devices[d].streams[dr.mainStream];
    bubbleIndexes.push_back(deviceBubbles(in, main, dr));
    const std::map<uint32_t, size_t> &bubbleIndex = bubbleIndexes.back();
    for (const BubbleReport &b : dr.bubbles)
      r.plannedBubbleUsPerIteration += b.plannedUs;
    fillInBubbles(in, d, bubbleIndex, dr, r, overruns);
    switchLatencies(in, d, dr, latencies, idleLatencies);
    r.devices.push_back(std::move(dr));
  }
  runStatistics(in, overruns, latencies, std::move(idleLatencies), r);
  overrunCauses(in, bubbleIndexes, r);
  pipelineIterations(in.n, r);
  writeJson(r, program);
  writeSummary(r);
  buildProfile(r, program, info, run);
  return r;
}

} // namespace pfrt
