#include "runtime/Compare.h"

#include "runtime/FillPredictor.h"
#include "runtime/Program.h"
#include "runtime/Report.h"
#include "support/Json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sched.h>
#include <vector>

namespace pfrt {

using pipefill::JsonWriter;

namespace {

struct ReportFree {
  void operator()(pfrt_report *r) const { pfrt_report_destroy(r); }
};
using ReportPtr = std::unique_ptr<pfrt_report, ReportFree>;

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return 0.5 * (v[(n - 1) / 2] + v[n / 2]);
}

// The launcher's local rank (ranks of one run on this machine count from 0); -1 when none says.
int localRank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                          "LOCAL_RANK"})
    if (const char *v = std::getenv(var)) {
      char *end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n >= 0 && n < (1 << 20))
        return static_cast<int>(n);
    }
  return -1;
}

// The k-th highest CPU this process may run on (the highest is the one least likely to host the
// OS's own work; ranks on one machine take one each, wrapping around); -1 when unknown.
int pickCpu(int k) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (k < 0 || sched_getaffinity(0, sizeof set, &set) != 0)
    return -1;
  std::vector<int> cpus;
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &set))
      cpus.push_back(c);
  return cpus.empty() ? -1 : cpus[static_cast<size_t>(k) % cpus.size()];
}

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

thread_local std::string tlsCompareRun;

} // namespace

std::string currentCompareRun() { return tlsCompareRun.empty() ? "none" : tlsCompareRun; }

// The time the run's fill samples were done in: every iteration's samples count, so the real
// devices' whole span (their mean leaves the first iteration out); a merged rank run carries no
// timeline: its mean times the iterations.
static double realSpanUs(const ReportData &d) {
  double span = 0;
  int spans = 0;
  for (const DeviceReport &dr : d.devices)
    if (dr.timeSource != "emulated" && dr.iterations() && dr.iterationStart.front() >= 0 &&
        dr.iterationEnd.back() > dr.iterationStart.front()) {
      span += dr.iterationEnd.back() - dr.iterationStart.front();
      ++spans;
    }
  return spans ? span / spans : d.realIterationUsMean * d.iterations;
}

pfrt_compare_result runCompare(pfrt_program *program, const pfrt_options &options,
                               uint32_t repetitions) {
  if (repetitions == 0 || repetitions > PFRT_COMPARE_MAX_REPETITIONS)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "compare runs 1 to " + std::to_string(PFRT_COMPARE_MAX_REPETITIONS) +
                    " ABBA repetitions, got " + std::to_string(repetitions));
  if (options.checkpoint_path && *options.checkpoint_path)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "compare runs the program many times: it cannot use a checkpoint");
  if (!options.enable_fill || options.profile)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT, "compare needs fill enabled (it runs with and "
                                             "without fill itself)");
  if (options.fill_cpu >= 0)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "compare measures main and fill contending for one core: it cannot pin fill "
                "to its own CPU (fill_cpu / --fill-cpu)");
  const bool ranks = options.rank >= 0 || options.world > 0;
  pfrt_options b = options;
  if (b.backend != PFRT_BACKEND_CUDA && b.time_model == PFRT_TIME_MEASURED && b.cpu < 0 &&
      (b.backend == PFRT_BACKEND_HOST || pfrt_cuda_device_count() == 0)) {
    // Main and fill of the real stage share one core; each rank of this machine its own.
    const int local = ranks ? localRank() : 0;
    b.cpu = pickCpu(local >= 0 ? local : options.rank);
  }
  pfrt_options a = b;
  a.enable_fill = 0;

  pfrt_compare_result out{};
  out.repetitions_requested = repetitions;
  out.switch_latency_us_p50 = out.switch_latency_us_p99 = -1;
  out.rank = -1;
  // One run's numbers; a block's are added to the result only once the block is complete, so a
  // stop request (a signal: pfrt_stop_request) that cuts a block short leaves the blocks before
  // it as the result.
  struct RunNumbers {
    double us = 0;
    bool stopped = false;
    std::vector<double> latencies;
    JobTotals totals;
    double fillUsRun = 0, overrunUs = 0, fillTimeUs = 0, plannedTimeUs = 0;
  };
  int runIndex = 0;
  auto run = [&](bool fill) {
    ++runIndex;
    pfrt_report *raw = nullptr;
    tlsCompareRun = std::to_string(repetitions) + " (run " + std::to_string(runIndex) + " of " +
                    std::to_string(2 + 4 * uint64_t(repetitions)) + ")";
    const pfrt_status status = pfrt_run(program, fill ? &b : &a, &raw);
    tlsCompareRun.clear();
    if (status != PFRT_OK)
      throw Error(PFRT_ERROR_BACKEND, std::string(fill ? "B" : "A") + " run " +
                                          std::to_string(runIndex) + ": " + pfrt_last_error());
    ReportPtr r(raw);
    RunNumbers n;
    n.stopped = r->data.stopped; // every rank knows (the ranks agree on a stop)
    if (ranks) {
      out.rank = r->rank;
      out.world = r->world;
      if (r->rank != 0)
        return n; // rank 0 holds the merged run
    }
    const ReportData &d = r->data;
    out.time_measured = d.measuredTime ? 1 : 0;
    out.real_device = d.replayDevice;
    out.time_scale = d.timeScale > 0 ? d.timeScale : 1.0;
    n.us = d.realIterationUsMean;
    if (fill) {
      n.latencies = d.switchIdleUs;
      n.totals = jobTotals(d.jobs);
      n.fillUsRun = d.fillUsRun;
      n.overrunUs = d.overrunUs;
      n.fillTimeUs = realSpanUs(d);
      n.plannedTimeUs = d.plannedIterationUs * d.iterations;
    }
    return n;
  };
  std::vector<double> aa, blocks, aTimes, bTimes, latencies;
  double fillSamples = 0, fillTimeUs = 0, plannedSamples = 0, plannedTimeUs = 0;
  auto addFill = [&](const RunNumbers &y) {
    latencies.insert(latencies.end(), y.latencies.begin(), y.latencies.end());
    const ChunkCounts &c = y.totals.chunks;
    out.chunks_run += c.run;
    out.chunks_deferred += c.deferred;
    out.chunks_split += c.split;
    out.chunks_stopped_on_device += c.stoppedOnDevice;
    out.chunks_skipped += c.skipped;
    out.chunks_pending += c.pending;
    fillSamples += static_cast<double>(y.totals.samplesThisRun);
    plannedSamples += static_cast<double>(y.totals.samplesPlanned);
    out.fill_us_run += y.fillUsRun;
    out.overrun_us += y.overrunUs;
    fillTimeUs += y.fillTimeUs;
    plannedTimeUs += y.plannedTimeUs;
  };
  // A/A first (also warms caches and the calibration), then ABBA blocks.
  // The pair counts for the noise floor only: the means printed beside the slowdown are of the
  // runs the slowdown compares (a slow first run made them disagree, even in sign).
  const RunNumbers a0 = run(false);
  const RunNumbers a1 = a0.stopped ? RunNumbers{} : run(false);
  bool stopped = a0.stopped || a1.stopped;
  if (!stopped && a0.us > 0)
    aa.push_back(std::fabs(a1.us / a0.us - 1));
  for (uint32_t k = 0; k < repetitions && !stopped; ++k) {
    RunNumbers block[4]; // A B B A
    for (int i = 0; i < 4 && !stopped; ++i) {
      block[i] = run(i == 1 || i == 2);
      stopped = block[i].stopped;
    }
    if (stopped)
      break; // the cut block is not counted
    const double x1 = block[0].us, y1 = block[1].us, y2 = block[2].us, x2 = block[3].us;
    aTimes.push_back(x1);
    aTimes.push_back(x2);
    bTimes.push_back(y1);
    bTimes.push_back(y2);
    if (x1 + x2 > 0)
      blocks.push_back((y1 + y2) / (x1 + x2) - 1);
    if (x1 > 0)
      aa.push_back(std::fabs(x2 / x1 - 1));
    addFill(block[1]);
    addFill(block[2]);
    ++out.repetitions;
  }
  out.incomplete = stopped ? 1 : 0;
  if (out.rank > 0)
    return out; // the numbers are rank 0's
  auto mean = [](const std::vector<double> &v) {
    double s = 0;
    for (double x : v)
      s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  out.main_only_us_mean = mean(aTimes);
  out.with_fill_us_mean = mean(bTimes);
  out.slowdown = median(blocks);
  out.slowdown_min = blocks.empty() ? 0 : *std::min_element(blocks.begin(), blocks.end());
  out.slowdown_max = blocks.empty() ? 0 : *std::max_element(blocks.begin(), blocks.end());
  out.noise_floor = median(aa);
  if (!latencies.empty()) {
    std::sort(latencies.begin(), latencies.end());
    out.switch_latency_us_p50 = sortedPercentile(latencies, 0.5);
    out.switch_latency_us_p99 = sortedPercentile(latencies, 0.99);
    out.switch_latency_count = latencies.size();
  }
  out.fill_samples_per_s = fillTimeUs > 0 ? fillSamples / (fillTimeUs * 1e-6) : 0;
  out.fill_samples_per_s_planned = plannedTimeUs > 0 ? plannedSamples / (plannedTimeUs * 1e-6) : 0;
  return out;
}

std::string formatCompare(const pfrt_compare_result &r, bool json) {
  const char *label = r.time_measured ? "measured" : "modelled";
  if (json) {
    JsonWriter w;
    w.beginObject();
    w.value("time_model", label);
    w.value("repetitions", r.repetitions);
    w.value("repetitions_requested", r.repetitions_requested);
    w.value("incomplete", r.incomplete != 0);
    w.value("real_device", r.real_device);
    w.value("ranks", r.world); // 0: one process
    w.value("time_scale", r.time_scale > 0 ? r.time_scale : 1.0); // times: real us / time_scale
    w.value("main_only_us_mean", r.main_only_us_mean);
    w.value("with_fill_us_mean", r.with_fill_us_mean);
    w.value("slowdown", r.slowdown);
    // Modelled time: main compute lasts its planned time with and without fill, so the slowdown
    // is 0 by construction, not a measurement (the plumbing's tests use it).
    w.value("slowdown_measured", r.time_measured != 0);
    w.value("slowdown_min", r.slowdown_min);
    w.value("slowdown_max", r.slowdown_max);
    w.value("noise_floor", r.noise_floor);
    w.beginObject("switch_latency_idle_fill");
    w.value("count", r.switch_latency_count);
    w.value("p50_us", r.switch_latency_us_p50);
    w.value("p99_us", r.switch_latency_us_p99);
    w.endObject();
    w.value("fill_samples_per_s", r.fill_samples_per_s);
    w.value("fill_samples_per_s_planned", r.fill_samples_per_s_planned);
    w.value("fill_throughput_ratio", r.fill_samples_per_s_planned > 0
                                         ? r.fill_samples_per_s / r.fill_samples_per_s_planned
                                         : 0.0);
    writeFillBoundCounts(w,
                         {r.chunks_run, r.chunks_deferred, r.chunks_skipped, r.chunks_pending,
                          r.chunks_split, r.chunks_stopped_on_device},
                         r.fill_us_run, r.overrun_us);
    w.endObject();
    return w.str();
  }
  std::string s = "pipefill-run --compare: " + std::to_string(r.repetitions) +
                  " ABBA block(s) after an A/A pair; A = main only, B = main + fill; time " +
                  label + (r.real_device >= 0
                               ? ", replay (device " + std::to_string(r.real_device) + " real)"
                               : std::string()) +
                  (r.world > 0 ? "; " + std::to_string(r.world) +
                                     " ranks (processes), every run merged on rank 0"
                               : std::string()) +
                  "\n";
  if (r.repetitions == 0) {
    s += r.incomplete ? "  INCOMPLETE: stopped on request before the first of " +
                            std::to_string(r.repetitions_requested) +
                            " block(s) completed: nothing to compare\n"
                      : "  no ABBA block completed: nothing to compare\n";
    return s;
  }
  if (r.incomplete)
    s += "  INCOMPLETE: stopped on request after " + std::to_string(r.repetitions) + " of " +
         std::to_string(r.repetitions_requested) + " block(s); the numbers below are of those\n";
  const double scale = r.time_scale > 0 ? r.time_scale : 1.0;
  if (scale != 1.0)
    s += "  time scale " + fmt("%g", scale) + ": times below are plan us (real us / " +
         fmt("%g", scale) + ")\n";
  s += "  main iteration (us)      A " + fmt("%.1f", r.main_only_us_mean) + "   B " +
       fmt("%.1f", r.with_fill_us_mean) + "\n";
  s += "  main-job slowdown        " + fmt("%+.2f%%", 100 * r.slowdown) + "  (noise floor " +
       fmt("%.2f%%", 100 * r.noise_floor) + " A/A; blocks " + fmt("%+.2f%%", 100 * r.slowdown_min) +
       " .. " + fmt("%+.2f%%", 100 * r.slowdown_max) + ")\n";
  if (!r.time_measured)
    s += "  NOT MEASURED: in the modelled time model main compute lasts its planned time with and "
         "without fill, so the slowdown is 0 by construction; --time-model measured measures "
         "it\n";
  if (r.switch_latency_count)
    s += "  switch latency (us)      p50 " + fmt("%.1f", r.switch_latency_us_p50) + "  p99 " +
         fmt("%.1f", r.switch_latency_us_p99) + "  (" + std::to_string(r.switch_latency_count) +
         " bubbles with an idle fill stream" +
         (scale != 1.0 ? fmt("; real us: p50 %.1f", r.switch_latency_us_p50 * scale) +
                             fmt(" p99 %.1f", r.switch_latency_us_p99 * scale)
                       : std::string()) +
         ")\n";
  else
    s += "  switch latency (us)      - (no bubble with an idle fill stream ran fill)\n";
  s += "  fill throughput          " + fmt("%.1f", r.fill_samples_per_s) + " samples/s " + label +
       " vs " + fmt("%.1f", r.fill_samples_per_s_planned) + " planned (" +
       fmt("%.2f", r.fill_samples_per_s_planned > 0
                       ? r.fill_samples_per_s / r.fill_samples_per_s_planned
                       : 0.0) +
       "x)\n";
  s += "  fill chunks (B runs)     " + std::to_string(r.chunks_run) + " run, " +
       std::to_string(r.chunks_deferred) + " deferred, " + std::to_string(r.chunks_skipped) +
       " skipped, " + std::to_string(r.chunks_pending) + " pending; overrun " +
       fmt("%.1f", r.overrun_us) + " us = " +
       fmt("%.2f%%", r.fill_us_run > 0 ? 100 * r.overrun_us / r.fill_us_run : 0.0) +
       " of fill time\n";
  return s;
}

} // namespace pfrt
