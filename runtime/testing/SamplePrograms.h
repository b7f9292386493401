// Stream programs built through the public builder API (the way generated C++ does it), for the
// runtime's tests and for pfrt-gpu-bench. Not part of the runtime library.
#ifndef PFRT_TESTING_SAMPLE_PROGRAMS_H
#define PFRT_TESTING_SAMPLE_PROGRAMS_H

#include "runtime/pfrt.h"

#include <string>
#include <vector>

namespace pfrt {
namespace samples {

struct PipelineSpec {
  std::string name = "pipeline";
  enum Schedule { GPipe, OneFOneB } schedule = OneFOneB;
  uint32_t stages = 4, microbatches = 8;
  double forwardUs = 1000, backwardUs = 2000, p2pUs = 20;
  double allreduceUs = 0, optimizerUs = 0;
  uint64_t activationBytes = 1 << 20;
  uint64_t memoryBytes = 80ull << 30, staticBytes = 20ull << 30;
  uint32_t iterations = 4;
  // Gaps shorter than this are not marked as bubbles.
  double minBubbleUs = 1;
  // Fill: one job, `fillLayers` copies of `layer`, a chunk per bubble sized to fillFraction of it.
  bool fill = true;
  pfrt_fill_kind fillKind = PFRT_FILL_INFERENCE;
  pfrt_fill_layer_desc layer{};
  uint32_t fillLayers = 2;
  double fillUsPerSample = 100; // planned per layer and sample (forward; training backward = 2x)
  double fillFraction = 0.8;
  double switchUs = 20;         // planned context-switch cost charged per chunk
  uint32_t maxBatch = 64;
  uint64_t fillSamples = 0;     // 0: unbounded
  int32_t trainingDevice = -1;  // training jobs run on one device (-1: the last stage)
  bool weightsStreamed = false, activationsOnHost = false;
};

// Simulates the schedule at its planned costs (steady state), marks every main-stream wait longer
// than minBubbleUs as a bubble and fills it. Returns null and sets *error on failure.
pfrt_program *buildPipeline(const PipelineSpec &spec, std::string *error);

// Planned bubble durations per device as the builder computed them (for tests).
struct PlannedBubble {
  uint32_t device, bubbleId;
  double startUs, durationUs;
};
std::vector<PlannedBubble> plannedBubbles(const PipelineSpec &spec);
double plannedIteration(const PipelineSpec &spec);

// The start of the small hand-built programs of the tests and benchmarks: one device (`device`,
// or the defaults when null) with a main and a fill stream, and one fill job `job` of `layers`
// copies of `layer`; no ops yet. On failure `program` is null and *error says why.
struct OneDeviceProgram {
  pfrt_program *program = nullptr;
  uint32_t device = 0, main = 0, fill = 0, job = 0;
};
OneDeviceProgram oneDeviceProgram(const char *name, const pfrt_fill_job_desc &job,
                                  const pfrt_fill_layer_desc &layer, uint32_t layers,
                                  const pfrt_device_desc *device, std::string *error);

// oneDeviceProgram (default device) with one inference job "chain" of `layers` GEMM-chain layers
// of dimension 16 planned at `usPerSample` per sample: the calibrated stand-in work of the bound's
// tests and benchmarks.
OneDeviceProgram chainJobProgram(const char *name, uint32_t layers, std::string *error,
                                 double usPerSample = 1000);
// A one-pass chunk of that job (layer 0) in bubble `bubble`: `batch` samples from `sampleBegin`,
// planned at 1 ms per sample.
pfrt_fill_chunk_desc chainChunk(uint32_t bubble, uint32_t batch, uint64_t sampleBegin);

// A bubble handed to fill: on the main stream, event `event` recorded and then `bubble`; on the
// fill stream, a wait on `event` and then `chunk` of the program's job (only the wait when null).
// Returns the first failing call's status.
pfrt_status enqueueFilledBubble(const OneDeviceProgram &p, uint32_t event,
                                const pfrt_bubble_desc &bubble, const pfrt_fill_chunk_desc *chunk);

// The default small encoder layer used by the tests: hidden 32, heads 4, seq 8, ffn 64.
pfrt_fill_layer_desc smallEncoder();
// A small MLP layer: in/out 16, hidden 32.
pfrt_fill_layer_desc smallMlp();

} // namespace samples
} // namespace pfrt

#endif // PFRT_TESTING_SAMPLE_PROGRAMS_H
