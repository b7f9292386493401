//===- SessionBench.cpp - cost of an empty bubble_begin/bubble_end pair ---===//
//
// What a framework pays per bubble for handing it to pipefill when there is
// nothing to fill, on the host backend (pfrt_session_*):
//   - NoWork: the bubble has no chunk and nothing is deferred: begin/end never
//     wake the worker thread (the fast path);
//   - Handoff: the bubble has a chunk that does not run in this iteration (a
//     periodic plan), so begin hands the bubble to the worker thread, which
//     finds nothing to start, and end waits for it: the cost of the thread
//     handoff itself, a lower bound for every bubble with work.
// Each iteration is begin + end + iteration_end (wall clock).
//
//===----------------------------------------------------------------------===//

#include "runtime/pfrt.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

namespace {

pfrt_program *makeProgram(bool withChunk) {
  pfrt_program *p = nullptr;
  pfrt_program_create("bench", &p);
  uint32_t dev = 0, main = 0, fill = 0, ev = 0, job = 0;
  pfrt_program_add_device(p, nullptr, &dev);
  pfrt_program_create_stream(p, dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_program_create_stream(p, dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_program_create_event(p, dev, "b", &ev);
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  pfrt_program_add_fill_job(p, &jd, &job);
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 16;
  ld.planned_us_per_sample = 100;
  pfrt_fill_job_add_layer(p, job, &ld);
  pfrt_program_enqueue_compute(p, dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
  pfrt_program_enqueue_record(p, dev, main, ev);
  pfrt_bubble_desc b{};
  b.planned_duration_us = 1000;
  pfrt_program_enqueue_bubble(p, dev, main, &b);
  pfrt_program_enqueue_compute(p, dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 1000, 0);
  pfrt_program_enqueue_wait(p, dev, fill, ev);
  pfrt_fill_chunk_desc f{};
  f.job = job;
  f.layer_end = 1;
  f.batch = 1;
  f.planned_us = 100;
  // Runs only in iteration 1000 of every 1001: never during the benchmark.
  f.period = 1001;
  f.phase = 1000;
  if (withChunk)
    pfrt_program_enqueue_fill(p, dev, fill, &f);
  return p;
}

void run(benchmark::State &state, bool withChunk) {
  pfrt_program *p = makeProgram(withChunk);
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  pfrt_session *s = nullptr;
  if (pfrt_session_create(p, 0, &o, &s) != PFRT_OK) {
    state.SkipWithError(pfrt_last_error());
    pfrt_program_destroy(p);
    return;
  }
  for (auto _ : state) {
    if (pfrt_session_bubble_begin(s, 0, nullptr, 0) != PFRT_OK ||
        pfrt_session_bubble_end(s, 0, nullptr) != PFRT_OK ||
        pfrt_session_iteration_end(s) != PFRT_OK) {
      state.SkipWithError(pfrt_last_error());
      break;
    }
  }
  pfrt_session_stats st{};
  pfrt_session_get_stats(s, &st);
  if (st.chunks_run != 0)
    state.SkipWithError("a chunk ran: the bubble was not empty");
  pfrt_session_destroy(s);
  pfrt_program_destroy(p);
}

void BM_EmptyBubble_NoWork(benchmark::State &state) { run(state, false); }
void BM_EmptyBubble_Handoff(benchmark::State &state) { run(state, true); }

BENCHMARK(BM_EmptyBubble_NoWork)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EmptyBubble_Handoff)->UseRealTime()->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
