// pfrt-gpu-bench: measures what the PipeFill targets are about on a real backend:
//   1. the main job's iteration time with and without fill (slowdown ratio), on a 1F1B pipeline
//      built through the builder API (replay mode when there are fewer GPUs than stages);
//   2. the bubble context-switch latency: main-stream event record -> first fill kernel start on
//      the fill stream.
// Fill chunks are sized from a measured per-sample time (a calibration run), like the compiler
// would do from a profile. Prints a short table; --report-prefix writes the run reports.
#include "runtime/pfrt.h"
#include "runtime/tools/pfrt-gpu-bench/GpuBenchArgs.h"
#include "runtime/testing/SamplePrograms.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using gpubench::Args;

pfrt_fill_layer_desc encoder(const Args &a) {
  pfrt_fill_layer_desc l{};
  l.kind = PFRT_LAYER_ENCODER;
  l.hidden = a.hidden;
  l.heads = a.heads;
  l.seq = a.seq;
  l.ffn = a.ffn;
  return l;
}

pfrt_options options(const Args &a, uint32_t iterations) {
  pfrt_options o;
  pfrt_options_init(&o);
  o.backend = a.backend;
  o.iterations = iterations;
  o.time_scale = a.timeScale;
  o.stage = a.stage;
  o.max_dim = a.maxDim;
  return o;
}

struct Run {
  pfrt_report *report = nullptr;
  pfrt_report_stats stats{};
  ~Run() { pfrt_report_destroy(report); }
};

bool run(pfrt_program *p, const pfrt_options &o, Run &r, const char *what) {
  if (pfrt_run(p, &o, &r.report) != PFRT_OK) {
    std::fprintf(stderr, "pfrt-gpu-bench: error: %s run failed: %s\n", what, pfrt_last_error());
    return false;
  }
  pfrt_report_get_stats(r.report, &r.stats);
  return true;
}

void save(const Args &a, const Run &r, const char *suffix) {
  if (a.reportPrefix.empty())
    return;
  std::string path = a.reportPrefix + "." + suffix + ".json";
  if (pfrt_report_write_json(r.report, path.c_str()) != PFRT_OK)
    std::fprintf(stderr, "pfrt-gpu-bench: warning: %s\n", pfrt_last_error());
}

// One device with one inference fill job of `layers` copies of `layer`; null after an error.
pfrt::samples::OneDeviceProgram oneDevice(const char *name, const char *jobName,
                                          const pfrt_fill_layer_desc &layer, uint32_t layers) {
  pfrt_fill_job_desc jd{};
  jd.name = jobName;
  jd.kind = PFRT_FILL_INFERENCE;
  std::string error;
  pfrt::samples::OneDeviceProgram p =
      pfrt::samples::oneDeviceProgram(name, jd, layer, layers, nullptr, &error);
  if (!p.program)
    std::fprintf(stderr, "pfrt-gpu-bench: error: %s: %s\n", name, error.c_str());
  return p;
}

// One device: a long idle bubble with one fill chunk of `batch` samples through every layer.
// Returns the measured fill time per sample and layer.
bool calibrateFill(const Args &a, double &usPerSampleLayer) {
  const uint32_t batch = 4;
  const pfrt::samples::OneDeviceProgram p =
      oneDevice("fill-calibration", "calibration", encoder(a), a.layers);
  if (!p.program)
    return false;
  uint32_t ev = 0;
  pfrt_program_create_event(p.program, p.device, "bubble", &ev);
  pfrt_bubble_desc b{};
  b.planned_duration_us = 200000;
  b.emulate_idle = 1;
  pfrt_fill_chunk_desc c{};
  c.layer_end = a.layers;
  c.batch = batch;
  pfrt::samples::enqueueFilledBubble(p, ev, b, &c);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, 0, 0, 100, 0);
  pfrt_options o = options(a, 3);
  o.stage = -1;
  Run r;
  bool ok = run(p.program, o, r, "fill calibration");
  pfrt_program_destroy(p.program);
  if (!ok)
    return false;
  usPerSampleLayer = r.stats.fill_us_per_iteration / (batch * a.layers);
  return usPerSampleLayer > 0;
}

// Context switch: main records, idles 2 ms; the fill stream waits and runs a tiny GEMM chain.
bool switchLatency(const Args &a, Run &r) {
  pfrt_fill_layer_desc l{};
  l.kind = PFRT_LAYER_GEMM_CHAIN;
  l.dim = 64;
  l.planned_us_per_sample = 20;
  const pfrt::samples::OneDeviceProgram p = oneDevice("switch-latency", "tiny", l, 1);
  if (!p.program)
    return false;
  for (uint32_t i = 0; i < 8; ++i) {
    uint32_t ev = 0;
    pfrt_program_create_event(p.program, p.device, "bubble", &ev);
    pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, i, 0, 1000,
                                 0);
    pfrt_bubble_desc b{};
    b.bubble_id = i;
    b.planned_duration_us = 2000;
    b.emulate_idle = 1;
    pfrt_fill_chunk_desc c{};
    c.bubble_id = i;
    c.layer_end = 1;
    c.batch = 1;
    c.sample_begin = i;
    c.planned_us = 20;
    pfrt::samples::enqueueFilledBubble(p, ev, b, &c);
  }
  pfrt_options o = options(a, a.iterations);
  o.stage = -1;
  bool ok = run(p.program, o, r, "context-switch");
  pfrt_program_destroy(p.program);
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  if (!gpubench::parse(argc, argv, a))
    return 2;

  double perSampleLayer = 0;
  if (!calibrateFill(a, perSampleLayer))
    return 1;

  pfrt::samples::PipelineSpec spec;
  spec.name = "gpu-bench";
  spec.stages = a.stages;
  spec.microbatches = a.microbatches;
  spec.forwardUs = a.forwardUs;
  spec.backwardUs = a.backwardUs;
  spec.p2pUs = a.p2pUs;
  spec.iterations = a.iterations;
  spec.memoryBytes = 141ull << 30;
  spec.staticBytes = 40ull << 30;
  spec.layer = encoder(a);
  spec.fillLayers = a.layers;
  spec.fillUsPerSample = perSampleLayer * 1.1; // safety margin
  spec.fillFraction = a.fillFraction;
  spec.maxBatch = 256;
  std::string error;
  pfrt_program *program = pfrt::samples::buildPipeline(spec, &error);
  if (!program) {
    std::fprintf(stderr, "pfrt-gpu-bench: error: %s\n", error.c_str());
    return 1;
  }

  pfrt_options noFill = options(a, a.iterations);
  noFill.enable_fill = 0;
  pfrt_options withFill = options(a, a.iterations);
  Run base, filled, sw;
  bool ok = run(program, noFill, base, "no-fill") && run(program, withFill, filled, "fill") &&
            switchLatency(a, sw);
  if (!ok) {
    pfrt_program_destroy(program);
    return 1;
  }
  save(a, base, "nofill");
  save(a, filled, "fill");
  save(a, sw, "switch");

  uint64_t samples = 0;
  for (uint32_t j = 0; j < filled.stats.jobs; ++j) {
    pfrt_report_job job;
    if (pfrt_report_get_job(filled.report, j, &job) == PFRT_OK)
      samples += job.samples_this_run;
  }
  const double slowdown = base.stats.iteration_us_mean > 0
                              ? filled.stats.iteration_us_mean / base.stats.iteration_us_mean - 1
                              : 0;
  const double filledFraction = filled.stats.bubble_us_per_iteration > 0
                                    ? filled.stats.fill_us_per_iteration /
                                          filled.stats.bubble_us_per_iteration
                                    : 0;
  std::printf("pfrt-gpu-bench: backend %s, %u stages x %u micro-batches 1F1B, %u iterations%s\n",
              filled.stats.backend, a.stages, a.microbatches, a.iterations,
              std::strcmp(filled.stats.backend, "cuda-replay") == 0
                  ? " (one stage on the GPU, peers emulated)"
                  : "");
  std::printf("  fill job: %u encoder layers h=%u a=%u s=%u f=%u, %.1f us per sample and layer\n",
              a.layers, a.hidden, a.heads, a.seq, a.ffn, perSampleLayer);
  std::printf("  %-36s %12s %12s\n", "", "measured", "target");
  std::printf("  %-36s %12.1f %12s\n", "planned iteration (us)", base.stats.planned_iteration_us,
              "");
  std::printf("  %-36s %12.1f %12s\n", "iteration without fill (us)",
              base.stats.iteration_us_mean, "");
  std::printf("  %-36s %12.1f %12s\n", "iteration with fill (us)", filled.stats.iteration_us_mean,
              "");
  std::printf("  %-36s %11.2f%% %12s  %s\n", "main-job slowdown", 100 * slowdown, "<= 1%",
              slowdown <= 0.01 ? "ok" : "ABOVE TARGET");
  std::printf("  %-36s %12.1f %12s\n", "bubble time / iteration (us)",
              filled.stats.bubble_us_per_iteration, "");
  std::printf("  %-36s %12.2f %12s\n", "fill time / bubble time", filledFraction, ">= 0.9 planned");
  std::printf("  %-36s %12.1f %12s\n", "fill samples / iteration",
              static_cast<double>(samples) / a.iterations, "");
  std::printf("  %-36s %12llu %12s  (%.1f us)\n", "overruns",
              static_cast<unsigned long long>(filled.stats.overrun_count), "0",
              filled.stats.overrun_us);
  std::printf("  %-36s %12.1f %12s  %s\n", "context switch, record -> fill (us)",
              sw.stats.switch_latency_us_mean, "<= 20",
              sw.stats.switch_latency_us_mean >= 0 && sw.stats.switch_latency_us_mean <= 20
                  ? "ok"
                  : "ABOVE TARGET");
  std::printf("  %-36s %12.1f %12s\n", "context switch inside the pipeline (us)",
              filled.stats.switch_latency_us_mean, "");
  pfrt_program_destroy(program);
  return 0;
}
