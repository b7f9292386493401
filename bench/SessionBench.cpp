//===- SessionBench.cpp - cost of an empty bubble_begin/bubble_end pair ---===//
//
// What a framework pays per bubble for handing it to pipefill when there is
// nothing to fill, on the host backend (pfrt_session_*):
//   - NoWork: the bubble has no chunk and nothing is deferred: begin/end never
//     wake the worker thread (the fast path);
//   - EndFirst: the bubble has a chunk that does not run in this iteration (a
//     periodic plan), so begin wakes the worker thread; end comes at once,
//     usually before the worker has taken the bubble, and then does the
//     worker's part itself instead of waiting for it;
//   - Handoff: the same bubble, but bubble_wait lets the worker take it (it
//     finds nothing to start) before end: the round trip to the worker thread,
//     a lower bound for every bubble whose fill runs.
// Each iteration is begin (+ wait) + end + iteration_end (wall clock).
//
//===----------------------------------------------------------------------===//

#include "runtime/pfrt.h"
#include "runtime/testing/SamplePrograms.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

pfrt_program *makeProgram(bool withChunk, std::string *error) {
  const pfrt::samples::OneDeviceProgram p =
      pfrt::samples::chainJobProgram("bench", 1, error, /*usPerSample=*/100);
  if (!p.program)
    return nullptr;
  uint32_t ev = 0;
  pfrt_program_create_event(p.program, p.device, "b", &ev);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
  pfrt_bubble_desc b{};
  b.planned_duration_us = 1000;
  pfrt_fill_chunk_desc f{};
  f.layer_end = 1;
  f.batch = 1;
  f.planned_us = 100;
  // Runs only in iteration 1000 of every 1001: never during the benchmark.
  f.period = 1001;
  f.phase = 1000;
  pfrt::samples::enqueueFilledBubble(p, ev, b, withChunk ? &f : nullptr);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_BACKWARD, 0, 0, 1000, 0);
  return p.program;
}

enum class Case { NoWork, EndFirst, Handoff };

void run(benchmark::State &state, Case c) {
  const bool withChunk = c != Case::NoWork;
  std::string error;
  pfrt_program *p = makeProgram(withChunk, &error);
  if (!p) {
    state.SkipWithError(error.c_str());
    return;
  }
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
    // A 1 us bubble: in the plan's iteration of the chunk (1000 of every 1001) it does not fit
    // and is deferred, so no chunk runs in any case.
    if (pfrt_session_bubble_begin(s, 0, nullptr, 1.0) != PFRT_OK ||
        (c == Case::Handoff && pfrt_session_bubble_wait(s) != PFRT_OK) ||
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

void BM_EmptyBubble_NoWork(benchmark::State &state) { run(state, Case::NoWork); }
void BM_EmptyBubble_EndFirst(benchmark::State &state) { run(state, Case::EndFirst); }
void BM_EmptyBubble_Handoff(benchmark::State &state) { run(state, Case::Handoff); }

BENCHMARK(BM_EmptyBubble_NoWork)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EmptyBubble_EndFirst)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EmptyBubble_Handoff)->UseRealTime()->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
