/* A C program using the installed pfrt API: builds a one-device program with a
 * bubble and a fill chunk through the builder calls, runs it on the host
 * backend, then loads and runs the stream program the installed tools compiled.
 * Prints "consumer: ok" and exits 0 only if every check holds. */
#include "runtime/pfrt.h"

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    pfrt_status st_ = (call);                                                         \
    if (st_ != PFRT_OK) {                                                             \
      fprintf(stderr, "consumer: %s failed: %s: %s\n", #call, pfrt_status_name(st_),  \
              pfrt_last_error());                                                     \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

#define EXPECT(cond)                                                                  \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "consumer: check failed: %s\n", #cond);                        \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

enum { ITERATIONS = 3, BATCH = 4 };

static int built_program(void) {
  pfrt_program *program = NULL;
  CHECK(pfrt_program_create("consumer", &program));
  pfrt_device_desc device = {0};
  device.memory_bytes = 1u << 30;
  uint32_t dev, main_stream, fill_stream, event, job;
  CHECK(pfrt_program_add_device(program, &device, &dev));
  CHECK(pfrt_program_create_stream(program, dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main",
                                   &main_stream));
  CHECK(pfrt_program_create_stream(program, dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill",
                                   &fill_stream));
  CHECK(pfrt_program_create_event(program, dev, "bubble0", &event));

  pfrt_fill_job_desc job_desc = {0};
  job_desc.name = "mlp";
  job_desc.kind = PFRT_FILL_INFERENCE;
  job_desc.seed = 7;
  CHECK(pfrt_program_add_fill_job(program, &job_desc, &job));
  pfrt_fill_layer_desc layer = {0};
  layer.name = "mlp";
  layer.kind = PFRT_LAYER_MLP;
  layer.in = 16;
  layer.hidden = 32;
  layer.out = 16;
  layer.planned_us_per_sample = 50;
  layer.weight_bytes = 4096;
  layer.activation_bytes_per_sample = 256;
  CHECK(pfrt_fill_job_add_layer(program, job, &layer));

  /* main: forward, [bubble of 20 ms], backward; fill: wait for the bubble, one chunk. */
  CHECK(
      pfrt_program_enqueue_compute(program, dev, main_stream, PFRT_COMPUTE_FORWARD, 0, 0, 300, 0));
  CHECK(pfrt_program_enqueue_record(program, dev, main_stream, event));
  pfrt_bubble_desc bubble = {0};
  bubble.bubble_id = 0;
  bubble.kind = PFRT_BUBBLE_STEADY;
  bubble.planned_start_us = 300;
  bubble.planned_duration_us = 20000;
  bubble.free_bytes = 1u << 29;
  bubble.emulate_idle = 1;
  CHECK(pfrt_program_enqueue_bubble(program, dev, main_stream, &bubble));
  CHECK(pfrt_program_enqueue_compute(program, dev, main_stream, PFRT_COMPUTE_BACKWARD, 0, 0, 600,
                                     20300));
  CHECK(pfrt_program_enqueue_wait(program, dev, fill_stream, event));
  pfrt_fill_chunk_desc chunk = {0};
  chunk.job = job;
  chunk.bubble_id = 0;
  chunk.layer_begin = 0;
  chunk.layer_end = 1;
  chunk.batch = BATCH;
  chunk.planned_us = 200;
  chunk.peak_bytes = 1u << 20;
  CHECK(pfrt_program_enqueue_fill(program, dev, fill_stream, &chunk));
  CHECK(pfrt_program_validate(program));

  pfrt_options options;
  pfrt_options_init(&options);
  options.backend = PFRT_BACKEND_HOST;
  options.iterations = ITERATIONS;
  /* Modelled time: the bubble bound compares planned times, so the chunk's samples run however
   * loaded the machine is (with measured time a loaded machine may defer all of them). */
  options.time_model = PFRT_TIME_MODELLED;
  pfrt_report *report = NULL;
  CHECK(pfrt_run(program, &options, &report));
  pfrt_report_stats stats;
  CHECK(pfrt_report_get_stats(report, &stats));
  pfrt_report_job done;
  CHECK(pfrt_report_get_job(report, 0, &done));
  printf("consumer: built program: %u iterations, %.0f us mean, job %s %llu/%llu samples\n",
         stats.iterations, stats.iteration_us_mean, done.name,
         (unsigned long long)done.samples_completed, (unsigned long long)done.samples_planned);
  EXPECT(strcmp(stats.backend, "host") == 0);
  EXPECT(stats.iterations == ITERATIONS);
  EXPECT(stats.jobs == 1);
  /* One chunk of BATCH samples per iteration is what the program plans. */
  EXPECT(done.samples_planned == (uint64_t)ITERATIONS * BATCH);
  EXPECT(done.samples_completed > 0 && done.samples_completed <= done.samples_planned);
  EXPECT(strstr(pfrt_report_json(report), "\"iteration_us\"") != NULL);
  pfrt_report_destroy(report);
  pfrt_program_destroy(program);
  return 0;
}

static int compiled_program(const char *path) {
  pfrt_program *program = NULL;
  CHECK(pfrt_program_load(path, &program));
  pfrt_options options;
  pfrt_options_init(&options);
  options.backend = PFRT_BACKEND_HOST;
  options.time_scale = 0.05;
  options.max_dim = 32;
  pfrt_report *report = NULL;
  CHECK(pfrt_run(program, &options, &report));
  pfrt_report_stats stats;
  CHECK(pfrt_report_get_stats(report, &stats));
  printf("consumer: %s: %u iterations, planned %.1f us, %u fill jobs\n", path, stats.iterations,
         stats.planned_iteration_us, stats.jobs);
  EXPECT(stats.iterations == 2); /* the loop count the tools were asked to write */
  EXPECT(stats.planned_iteration_us > 0);
  EXPECT(stats.jobs > 0);
  pfrt_report_destroy(report);
  pfrt_program_destroy(program);

  /* A missing file is an error with a message, not a crash. */
  EXPECT(pfrt_program_load("does-not-exist.pb", &program) == PFRT_ERROR_IO);
  EXPECT(strstr(pfrt_last_error(), "does-not-exist.pb") != NULL);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer PROGRAM.pb\n");
    return 2;
  }
  printf("consumer: pfrt API version %d\n", PFRT_API_VERSION);
  if (built_program() != 0 || compiled_program(argv[1]) != 0)
    return 1;
  printf("consumer: ok\n");
  return 0;
}
