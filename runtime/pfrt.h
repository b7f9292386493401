/*
 * pfrt.h: the pipefill runtime's public API (flat C ABI, prefix pfrt_).
 *
 * A stream program (see proto/stream_program.proto and docs/runtime.md) is built either with the
 * builder calls below (generated C++ emits them as straight-line code) or loaded from a protobuf
 * file by pfrt_program_load, which drives the very same builder calls. pfrt_run executes it on a
 * backend (host threads or CUDA streams) and returns a report.
 *
 * Conventions:
 *   - every call that can fail returns a pfrt_status; on failure pfrt_last_error() returns a
 *     message naming what was wrong (the file, device/stream/op indices). No C++ exception ever
 *     crosses this API.
 *   - handles are opaque; indices (device, stream, event, job) are returned by the creating call
 *     and count from 0 in creation order, exactly like the repeated fields of the protobuf.
 *   - descriptor structs are zero-initialised by the caller (`pfrt_x_desc d = {0};` in C,
 *     `pfrt_x_desc d{};` in C++); every zero is a sensible default. pfrt_options has an init call.
 *   - times are microseconds, sizes bytes.
 */
#ifndef PFRT_H
#define PFRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 12 removed the verb-first names of version 3 (pfrt_add_device, pfrt_enqueue_fill,
 * pfrt_request_stop, ...), kept as aliases since version 4: every call is object, then verb
 * (pfrt_program_add_device, pfrt_program_enqueue_fill, pfrt_stop_request). Version 13 appended
 * pfrt_session_options.host_end_at_once, version 14 pfrt_options.rank_part. */
#define PFRT_API_VERSION 14

/* The range of time_scale (real us per planned us) that runs and sessions accept. */
#define PFRT_MIN_TIME_SCALE 1e-4
#define PFRT_MAX_TIME_SCALE 1e3

typedef enum pfrt_status {
  PFRT_OK = 0,
  PFRT_ERROR_INVALID_ARGUMENT = 1, /* bad argument: null pointer, index out of range, bad value */
  PFRT_ERROR_IO = 2,               /* a file could not be opened, read or written */
  PFRT_ERROR_PARSE = 3,            /* a program/checkpoint file is malformed */
  PFRT_ERROR_INVALID_PROGRAM = 4,  /* the program breaks a rule of the stream model */
  PFRT_ERROR_UNAVAILABLE = 5,      /* backend not compiled in, or no GPU for the CUDA backend */
  PFRT_ERROR_BACKEND = 6,          /* a CUDA / cuBLAS call failed while running */
  PFRT_ERROR_INTERNAL = 7
} pfrt_status;

/* Message of the last failing call on this thread ("" if none). Valid until the next call. */
const char *pfrt_last_error(void);
/* "PFRT_OK", "PFRT_ERROR_IO", ... */
const char *pfrt_status_name(pfrt_status status);

typedef struct pfrt_program pfrt_program;
typedef struct pfrt_report pfrt_report;

/* Values equal the protobuf enums of stream_program.proto. */
typedef enum pfrt_stream_role {
  PFRT_STREAM_MAIN = 1,
  PFRT_STREAM_FILL = 2,
  PFRT_STREAM_COPY = 3
} pfrt_stream_role;

typedef enum pfrt_priority {
  PFRT_PRIORITY_DEFAULT = 0, /* MAIN -> HIGH, FILL -> LOW, COPY -> NORMAL */
  PFRT_PRIORITY_HIGH = 1,
  PFRT_PRIORITY_NORMAL = 2,
  PFRT_PRIORITY_LOW = 3
} pfrt_priority;

typedef enum pfrt_compute_kind {
  PFRT_COMPUTE_FORWARD = 1,
  PFRT_COMPUTE_BACKWARD = 2,
  PFRT_COMPUTE_BACKWARD_INPUT = 3,
  PFRT_COMPUTE_BACKWARD_WEIGHT = 4,
  PFRT_COMPUTE_ALLREDUCE = 5,
  PFRT_COMPUTE_OPTIMIZER = 6
} pfrt_compute_kind;

typedef enum pfrt_bubble_kind {
  PFRT_BUBBLE_UNSPECIFIED = 0,
  PFRT_BUBBLE_WARMUP = 1,
  PFRT_BUBBLE_STEADY = 2,
  PFRT_BUBBLE_COOLDOWN = 3,
  PFRT_BUBBLE_TAIL = 4
} pfrt_bubble_kind;

typedef enum pfrt_copy_direction {
  PFRT_COPY_HOST_TO_DEVICE = 0,
  PFRT_COPY_DEVICE_TO_HOST = 1
} pfrt_copy_direction;

typedef enum pfrt_fill_kind {
  PFRT_FILL_INFERENCE = 1,
  PFRT_FILL_TRAINING = 2
} pfrt_fill_kind;

typedef enum pfrt_layer_kind {
  PFRT_LAYER_ENCODER = 1,   /* transformer encoder block: hidden, heads, seq, ffn */
  PFRT_LAYER_MLP = 2,       /* y = GELU(x W1) W2: in, hidden, out */
  PFRT_LAYER_GEMM_CHAIN = 3 /* calibrated GEMM chain of size dim; passes `width` through */
} pfrt_layer_kind;

typedef enum pfrt_backend {
  PFRT_BACKEND_AUTO = 0, /* CUDA if cudaGetDeviceCount() > 0, else host */
  PFRT_BACKEND_HOST = 1,
  PFRT_BACKEND_CUDA = 2
} pfrt_backend;

/* How the host backend takes main-job time (the CUDA backend always measures on the device). */
typedef enum pfrt_time_model {
  /* Real main-stage compute: a CPU kernel calibrated once per process to the planned time (so
   * runs with and without fill do identical main work), timed on the clock. Sends, receives and
   * copies stay modelled at their planned times; emulated stages (replay) run at planned times. */
  PFRT_TIME_MEASURED = 0,
  /* Fast model for tests: main compute, transfers and copies last exactly their planned time on
   * a scaled clock; only fill kernels are real. Everything it prints is labelled "modelled". */
  PFRT_TIME_MODELLED = 1
} pfrt_time_model;

/* What a fill chunk does when it does not fit what is left of its bubble. */
typedef enum pfrt_fill_policy {
  /* Bubble-bound (default): a chunk starts only if its predicted time fits the rest of its
   * bubble; otherwise the longest head of it (its first passes, whole layers) that fits runs and
   * the rest of the chunk, or all of it when not even one pass fits, is deferred, in order, to a
   * later bubble of its job (nothing lost). An inference chunk with no head that fits runs its
   * first samples that fit (half its batch, a quarter, ...), the rest first in line. */
  PFRT_FILL_BOUNDED = 0,
  /* Every chunk runs when its stream reaches it, however late (for measuring what the bound
   * saves; on a GPU this is what stream priorities alone give). */
  PFRT_FILL_UNBOUNDED = 1,
  /* Bubble-bound with whole chunks only: a chunk that does not fit is deferred whole (for
   * measuring what running heads of chunks gains). Appended in API version 5. */
  PFRT_FILL_BOUNDED_WHOLE = 2
} pfrt_fill_policy;

/* ---------------------------------------------------------------------------------------------
 * Building a program
 * ------------------------------------------------------------------------------------------- */

pfrt_status pfrt_program_create(const char *name, pfrt_program **out_program);
void pfrt_program_destroy(pfrt_program *program);

/* Loop count (0 = 1); pfrt_options.iterations overrides it. */
pfrt_status pfrt_program_set_iterations(pfrt_program *program, uint32_t iterations);
pfrt_status pfrt_program_set_seed(pfrt_program *program, uint64_t seed);
pfrt_status pfrt_program_set_planned_iteration_us(pfrt_program *program, double planned_us);

typedef struct pfrt_device_desc {
  uint32_t stage;
  uint64_t memory_bytes; /* capacity; 0 = unknown */
  uint64_t static_bytes; /* main-job bytes held all iteration */
  double planned_iteration_us;
  double p2p_latency_us, p2p_bandwidth_gbps, pcie_bandwidth_gbps;
  /* StageCalibration: planned compute per kind (used when an op's planned_us is 0). */
  double forward_us, backward_us, backward_input_us, backward_weight_us, allreduce_us,
      optimizer_us;
  uint32_t gemm_dim; /* CUDA GEMM-chain link size; 0 = 2048 */
} pfrt_device_desc;

/* desc may be NULL (all defaults). */
pfrt_status pfrt_program_add_device(pfrt_program *program, const pfrt_device_desc *desc,
                                    uint32_t *out_device);
pfrt_status pfrt_program_create_stream(pfrt_program *program, uint32_t device,
                                       pfrt_stream_role role, pfrt_priority priority,
                                       const char *name, uint32_t *out_stream);
pfrt_status pfrt_program_create_event(pfrt_program *program, uint32_t device, const char *name,
                                      uint32_t *out_event);

/* Ops are appended to the stream's loop body in call order. */
pfrt_status pfrt_program_enqueue_compute(pfrt_program *program, uint32_t device, uint32_t stream,
                                         pfrt_compute_kind kind, uint32_t microbatch,
                                         uint32_t chunk, double planned_us,
                                         double planned_start_us);
pfrt_status pfrt_program_enqueue_send(pfrt_program *program, uint32_t device, uint32_t stream,
                                      uint32_t peer, uint64_t bytes, uint32_t tag,
                                      double planned_us, double planned_start_us);
pfrt_status pfrt_program_enqueue_recv(pfrt_program *program, uint32_t device, uint32_t stream,
                                      uint32_t peer, uint64_t bytes, uint32_t tag,
                                      double planned_us, double planned_start_us);
pfrt_status pfrt_program_enqueue_record(pfrt_program *program, uint32_t device, uint32_t stream,
                                        uint32_t event);
pfrt_status pfrt_program_enqueue_wait(pfrt_program *program, uint32_t device, uint32_t stream,
                                      uint32_t event);

typedef struct pfrt_bubble_desc {
  uint32_t bubble_id; /* unique per device */
  pfrt_bubble_kind kind;
  double planned_start_us;
  double planned_duration_us;
  uint64_t free_bytes;
  int emulate_idle; /* nonzero: the main stream idles planned_duration_us itself */
} pfrt_bubble_desc;
pfrt_status pfrt_program_enqueue_bubble(pfrt_program *program, uint32_t device, uint32_t stream,
                                        const pfrt_bubble_desc *bubble);

typedef struct pfrt_fill_chunk_desc {
  uint32_t job;
  uint32_t bubble_id;
  uint32_t layer_begin, layer_end; /* passes [begin, end); training jobs have 2 x layers passes */
  uint32_t batch;
  uint64_t sample_begin;
  int32_t iteration_offset;
  int weights_streamed;    /* nonzero: copy weights from pinned host memory each chunk */
  int activations_on_host; /* nonzero: park intermediate activations in pinned host memory */
  double planned_us;
  uint64_t peak_bytes;
  /* Periodic plans: runs in iterations it >= phase with (it - phase) % period == 0; the period
   * index replaces the iteration in the sample formula. 0 or 1: every iteration. */
  uint32_t period, phase;
} pfrt_fill_chunk_desc;
pfrt_status pfrt_program_enqueue_fill(pfrt_program *program, uint32_t device, uint32_t stream,
                                      const pfrt_fill_chunk_desc *chunk);
pfrt_status pfrt_program_enqueue_copy(pfrt_program *program, uint32_t device, uint32_t stream,
                                      pfrt_copy_direction direction, uint64_t bytes,
                                      double planned_us);
pfrt_status pfrt_program_enqueue_alloc(pfrt_program *program, uint32_t device, uint32_t stream,
                                       uint32_t buffer, uint64_t bytes);
pfrt_status pfrt_program_enqueue_free(pfrt_program *program, uint32_t device, uint32_t stream,
                                      uint32_t buffer);

typedef struct pfrt_fill_job_desc {
  const char *name;
  pfrt_fill_kind kind;
  uint64_t samples;               /* 0 = unbounded */
  uint64_t samples_per_iteration; /* 0 = derived from the chunks */
  uint64_t seed;
  float learning_rate; /* training; 0 = 0.01 */
} pfrt_fill_job_desc;
pfrt_status pfrt_program_add_fill_job(pfrt_program *program, const pfrt_fill_job_desc *job,
                                      uint32_t *out_job);

typedef struct pfrt_fill_layer_desc {
  const char *name;
  pfrt_layer_kind kind;
  uint32_t hidden, heads, seq, ffn; /* ENCODER; MLP uses `hidden` too */
  uint32_t in, out;                 /* MLP */
  uint32_t dim, width;              /* GEMM_CHAIN */
  double planned_us_per_sample;
  double planned_backward_us_per_sample;
  uint64_t weight_bytes;
  uint64_t activation_bytes_per_sample;
} pfrt_fill_layer_desc;
pfrt_status pfrt_fill_job_add_layer(pfrt_program *program, uint32_t job,
                                    const pfrt_fill_layer_desc *layer);

/* Checks every rule of the stream model (pfrt_run does too). */
pfrt_status pfrt_program_validate(const pfrt_program *program);

/* ---------------------------------------------------------------------------------------------
 * Program files (the interpreter)
 * ------------------------------------------------------------------------------------------- */

/* Loads a StreamProgram protobuf, binary or text format (by extension: .pbtxt .textproto .txtpb
 * .txt are text, .pb .binpb .bin binary; otherwise by content), and replays it through the builder
 * calls above, then validates it. Errors name the file (and line:column for text). */
pfrt_status pfrt_program_load(const char *path, pfrt_program **out_program);
/* Same from memory; source_name is used in messages. */
pfrt_status pfrt_program_load_memory(const void *data, size_t size, const char *source_name,
                                     pfrt_program **out_program);
/* Writes the program as a StreamProgram (text format for the text extensions, else binary). */
pfrt_status pfrt_program_save(const pfrt_program *program, const char *path);

/* ---------------------------------------------------------------------------------------------
 * Running
 * ------------------------------------------------------------------------------------------- */

/* Called instead of the calibrated main-job compute when set (a framework driving the stages),
 * once per compute op of every device that runs for real (replay: the real stage; emulated
 * devices hold their planned times): on the host backend synchronously on the stream's thread
 * with stream == NULL, once the op's inputs are (modelled to be) there, and timed on the clock;
 * on the CUDA backend with stream = the cudaStream_t to enqueue the stage's kernels into.
 * planned_us is the op's planned time (plan us; real us = planned_us x time_scale). Refused with
 * time_model PFRT_TIME_MODELLED, which would label the framework's real compute modelled. */
typedef void (*pfrt_compute_fn)(void *user, uint32_t device, pfrt_compute_kind kind,
                                uint32_t microbatch, uint32_t chunk, double planned_us,
                                void *stream);

/* Progress of a run: called on a runtime thread after each iteration of the last device's main
 * stream (enqueued, on CUDA), with the iterations this call has done and will do (a resumed run
 * counts from its checkpoint) and the seconds since the run began. Keep it short. In rank mode
 * only the rank that runs the last device calls it. */
typedef void (*pfrt_progress_fn)(void *user, uint32_t done, uint32_t total, double elapsed_s);
/* Rank mode: this rank's part of the run report (the JSON of pfrt_report_rank_json, `size` bytes)
 * as soon as the run is over, before the parts are gathered on rank 0 and merged, so that a
 * gather or merge that fails does not lose it (pipefill-run writes its part file here, which
 * `pipefill-run --merge` can merge later). Called once per run, on the calling thread. */
typedef void (*pfrt_rank_part_fn)(void *user, int32_t rank, const char *json, size_t size);

typedef enum pfrt_rank_transfer {
  PFRT_RANK_TRANSFER_AUTO = 0,
  PFRT_RANK_TRANSFER_MODELLED = 1,
  PFRT_RANK_TRANSFER_NCCL = 2
} pfrt_rank_transfer;

typedef struct pfrt_options {
  pfrt_backend backend;        /* default AUTO */
  uint32_t iterations;         /* 0 = the program's */
  int enable_fill;             /* default 1 */
  int profile;                 /* 1: profile mode: main job only (implies enable_fill = 0) */
  double time_scale;           /* host backend: real us per modelled us; default 1.0 */
  const char *checkpoint_path; /* fill progress file, written after every iteration; NULL: none */
  int32_t stage;               /* K: device K runs for real (with its fill), the others are
                                  emulated (replay; host measured model: their compute at K's
                                  measured speed, else at their planned times); -1 (default):
                                  every device runs for real, except in the host measured model
                                  when the program has more devices than the machine has cores:
                                  then device 0 runs, the others are emulated */
  uint32_t max_dim;            /* fill workload dimension cap; 0 = backend default (host 128,
                                  CUDA none) */
  pfrt_compute_fn compute_fn;  /* optional, see above */
  void *compute_user;
  int verbose; /* nonzero: progress lines on stderr */
  pfrt_time_model time_model;  /* host backend; default PFRT_TIME_MEASURED */
  pfrt_fill_policy fill_policy; /* default PFRT_FILL_BOUNDED */
  /* Host backend: fill/copy stream threads run at the lowest scheduling priority (SCHED_IDLE,
   * else nice 19). Default 1; 0 keeps the main job's priority (unbounded experiments). */
  int fill_idle_priority;
  /* Host backend, measured time: pin the threads of the devices that run for real to this CPU so
   * main and fill share one core (-1, the default: no pinning). */
  int32_t cpu;
  /* CUDA: the GPU ordinal of the first device; -1 (default): the local rank
   * (OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK) modulo the visible GPUs, else 0. */
  int32_t gpu;
  /* What to do when the checkpoint file exists but is truncated, corrupted, of another program or
     of the wrong shape: PFRT_CHECKPOINT_FAIL (default) stops with an error naming the problem;
     PFRT_CHECKPOINT_PREVIOUS resumes from the last good one (PATH.prev); PFRT_CHECKPOINT_RESTART
     moves the bad file to PATH.bad and starts clean. Never mixes states. */
  int checkpoint_recovery;
  /* One process per rank (docs/runtime.md, "Ranks as processes"): a rank runs one device of the
   * program (world must equal the device count) and reaches the other ranks through MPI.
   * rank: -1 (default) runs every device in this process; >= 0 this process's rank, checked
   * against MPI_COMM_WORLD. world: 0 (default) takes MPI_COMM_WORLD's size. Setting either one
   * starts rank mode (MPI is initialised if the program has not). peer_timeout_s: how long a
   * rank waits for a peer's message, the communicators' setup, the start barrier or the final
   * gather before it fails (0 = 120 s); when the runtime initialised MPI, also how long MPI_Init,
   * a silent peer at exit and MPI_Finalize may take, at least 5 s. */
  int32_t rank;
  int32_t world;
  double peer_timeout_s;
  /* Appended in API version 3. */
  pfrt_progress_fn progress; /* optional, see above */
  void *progress_user;
  /* Appended in API version 4. Rank mode, CUDA backend: how a send's bytes reach another rank's
   * GPU. AUTO (default): NCCL (ncclSend/ncclRecv, libnccl loaded at run time) when it loads, else
   * MODELLED with a note on stderr; NCCL: NCCL or an error (PFRT_ERROR_UNAVAILABLE); MODELLED: the
   * sender's communication stream is busy for the planned transfer time and no bytes move. The
   * host backend always models transfers. */
  pfrt_rank_transfer rank_transfer;
  /* Appended in API version 6. Host backend: pin the fill and copy stream threads of the devices
   * that run for real to this CPU (-1, the default: where `cpu` pins them). With `cpu` on another
   * CPU, main and fill never share a core, so the host scheduler never stops a fill chunk for
   * main: a run then measures the bubble bound's own accuracy. pfrt_compare refuses it (it
   * measures main and fill contending for one core). */
  int32_t fill_cpu;
  /* Appended in API version 14. Rank mode: see pfrt_rank_part_fn; NULL (default): none. */
  pfrt_rank_part_fn rank_part;
  void *rank_part_user;
} pfrt_options;

enum { PFRT_CHECKPOINT_FAIL = 0, PFRT_CHECKPOINT_PREVIOUS = 1, PFRT_CHECKPOINT_RESTART = 2 };

void pfrt_options_init(pfrt_options *options);

/* Runs the program. On success *out_report holds the report (free with pfrt_report_destroy). */
pfrt_status pfrt_run(pfrt_program *program, const pfrt_options *options,
                     pfrt_report **out_report);

/* Clean stop. pfrt_stop_request() asks every run in this process (and any started later, until
 * pfrt_stop_clear()) to stop at the next iteration boundary: every stream finishes the iteration it
 * is in, the checkpoint (if any) is written for the iterations done, and pfrt_run returns PFRT_OK
 * with a report marked incomplete (pfrt_report_incomplete). Async-signal-safe: it only stores an
 * atomic flag, so a SIGINT/SIGTERM handler may call it. In rank mode (options.rank/world) a
 * request on any rank stops every rank at one iteration they agree on (a vote per iteration); the
 * other ranks' reports are marked incomplete too. */
void pfrt_stop_request(void);
void pfrt_stop_clear(void);
int pfrt_stop_requested(void);

/* Number of CUDA devices (0 without a GPU/driver or when the runtime was built without CUDA). */
int pfrt_cuda_device_count(void);
/* 1 if the backend is compiled into this library. */
int pfrt_backend_compiled(pfrt_backend backend);

/* ---------------------------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------------------------- */

typedef struct pfrt_report_stats {
  const char *backend; /* "host", "cuda", "cuda-replay" */
  uint32_t first_iteration;      /* > 0 when resumed from a checkpoint */
  uint32_t iterations;           /* iterations run by this call */
  double iteration_us_mean;      /* first iteration excluded when > 1; measured or modelled as
                                    time_measured says (all time fields below likewise) */
  double planned_iteration_us;
  double bubble_us_per_iteration;      /* main-stream gaps, all devices */
  double fill_us_per_iteration;        /* fill-chunk time, all devices (clock-timed) */
  uint64_t overrun_count;
  double overrun_us;
  double switch_latency_us_mean; /* bubble begin -> first fill chunk start; -1 if no fill ran */
  uint32_t jobs;
  /* Appended in API version 2. */
  int time_measured;             /* 1: the time fields above were measured; 0: modelled */
  double real_iteration_us_mean; /* main-stream iteration time of the devices that ran for real
                                    (replay: the real stage), same time model */
  double switch_latency_us_p50;  /* only bubbles whose fill stream was idle when they began */
  double switch_latency_us_p99;  /* -1 when there is no such bubble */
  uint64_t switch_latency_count;
  uint64_t chunks_run, chunks_deferred, chunks_skipped, chunks_pending;
  double fill_us_run;            /* fill time of the chunks that ran (real us / time_scale) */
  uint64_t fill_samples_completed, fill_samples_planned; /* this run, all jobs */
  /* Appended in API version 5: chunks that ran a head of their passes (the rest deferred). */
  uint64_t chunks_split;
  /* Appended in API version 7. CUDA: chunks the GPU stopped before a pass because their bubble
   * had ended or the pass no longer fit (device-side bound; docs/runtime.md). */
  uint64_t chunks_stopped_on_device;
} pfrt_report_stats;

typedef struct pfrt_report_job {
  const char *name;
  pfrt_fill_kind kind;
  uint64_t samples_completed; /* including work restored from a checkpoint */
  uint64_t samples_this_run;
  uint64_t samples_planned;   /* what the plan schedules in this run's iterations */
  double checksum;            /* inference: sum of |out| weighted by position; training: losses */
  uint64_t steps;             /* training steps completed */
  double weights_checksum;    /* training: checksum of the final weights */
  /* Appended in API version 10. Backpressure: loop iterations in which the job began no new
   * work because two iterations of its chunks were deferred (summed over devices, since the job
   * began; each moves the rest of its plan one iteration later), and the samples the plan
   * completes in them (planned, not yet begun). */
  uint64_t iterations_held;
  uint64_t samples_held;
  /* Appended in API version 11: the plan's own batches in flight at the last iteration (begun by
   * then, completed later; planned, like samples_planned). For a run from the start,
   * samples_completed + pending + samples_held = samples_planned + this. */
  uint64_t samples_in_flight_planned;
} pfrt_report_job;

pfrt_status pfrt_report_get_stats(const pfrt_report *report, pfrt_report_stats *out_stats);
pfrt_status pfrt_report_get_job(const pfrt_report *report, uint32_t job,
                                pfrt_report_job *out_job);
/* The run report as JSON text (see docs/runtime.md) and the terminal summary table. */
const char *pfrt_report_json(const pfrt_report *report);
const char *pfrt_report_summary(const pfrt_report *report);
pfrt_status pfrt_report_write_json(const pfrt_report *report, const char *path);
/* Writes a pipefill.rt.MeasuredProfile (binary, or text for the text extensions). */
pfrt_status pfrt_report_write_profile(const pfrt_report *report, const char *path);
/* Writes the run's timeline as a Chrome trace (JSON; opens in ui.perfetto.dev and
 * chrome://tracing): one process per device, one thread per stream plus the plan's main stream,
 * fill chunks with their bubble, prediction and overrun; every event's args say whether its time
 * was measured, modelled, emulated or planned. Timestamps are modelled us from the run's start
 * (real us / time scale). Available for reports of pfrt_run, of rank 0 in rank mode and of
 * pfrt_report_merge; another rank's report fails (PFRT_ERROR_INVALID_ARGUMENT). */
pfrt_status pfrt_report_write_trace(const pfrt_report *report, const char *path);
void pfrt_report_destroy(pfrt_report *report);
/* 1 when the run stopped early on pfrt_stop_request (fewer iterations than asked), else 0. */
int pfrt_report_incomplete(const pfrt_report *report);

/* Rank mode: pfrt_run on rank 0 returns the merged report of every rank (gathered over MPI, the
 * same keys as a single-process run); on the other ranks a report whose JSON is this rank's part
 * only (a pipefill.rt.RankResult as JSON; its stats and jobs are empty). This rank's part, on any
 * rank ("" for a single-process run): */
const char *pfrt_report_rank_json(const pfrt_report *report);
/* *rank = -1 and *world = 0 for a single-process run. Either pointer may be NULL. */
pfrt_status pfrt_report_get_rank(const pfrt_report *report, int32_t *rank, int32_t *world);
/* Merges rank parts (files written from pfrt_report_rank_json, one per rank, any order) of a run
 * of `program` into one report; program NULL: the program the first part carries. Fails, naming
 * the files, when they are not all of this program, with the same settings, one per rank. */
pfrt_status pfrt_report_merge(pfrt_program *program, const char *const *paths, uint32_t count,
                              pfrt_report **out_report);

/* ---------------------------------------------------------------------------------------------
 * Slowdown: main-only (A) vs main + fill (B), alternated
 * ------------------------------------------------------------------------------------------- */

typedef struct pfrt_compare_result {
  uint32_t repetitions;        /* ABBA blocks completed (plus one A/A pair first) */
  int time_measured;           /* 1: the iteration times below were measured; 0: modelled */
  int32_t real_device;         /* replay: the device that ran for real; -1: all devices */
  double main_only_us_mean;    /* the blocks' A runs (not the A/A pair): iteration time of the
                                  real device(s) */
  double with_fill_us_mean;    /* the blocks' B runs: the same */
  double slowdown;             /* median over blocks of (B1 + B2) / (A1 + A2) - 1 */
  double noise_floor;          /* median |A/A - 1| over the A/A pair and each block's two As */
  double slowdown_min, slowdown_max; /* over blocks */
  double switch_latency_us_p50, switch_latency_us_p99; /* B runs, idle fill stream only; -1 */
  uint64_t switch_latency_count;
  double fill_samples_per_s;         /* B runs: completed samples / real-device time */
  double fill_samples_per_s_planned; /* planned samples / planned iteration time */
  uint64_t chunks_run, chunks_deferred, chunks_skipped, chunks_pending; /* B runs, summed */
  double fill_us_run, overrun_us;                                      /* B runs, summed */
  uint64_t chunks_split; /* B runs, summed (API version 5) */
  uint64_t chunks_stopped_on_device; /* B runs, summed (API version 7; CUDA) */
  /* Rank mode (API version 11): this process's rank and the number of ranks; only rank 0 holds
   * the numbers above (of the merged runs), the other ranks' are zero. -1 and 0 in one process. */
  int32_t rank, world;
  /* API version 12: the runs' time_scale (real us per planned us; 1 on CUDA). The times above
   * (iterations, switch latency, fill and overrun time) are plan us: real us / time_scale. */
  double time_scale;
  /* API version 12: 1 when a stop request (pfrt_stop_request: a signal) ended the comparison
   * early; `repetitions` then counts the blocks completed (the cut one is left out) of the
   * repetitions_requested. */
  int incomplete;
  uint32_t repetitions_requested;
} pfrt_compare_result;

/* Runs the program 2 + 4 x repetitions times with `options` (A: enable_fill = 0, B: as given) in
 * the order A A (A B B A)^repetitions and fills *out. On the host backend with measured time and
 * no `cpu` given, the threads of the real device(s) are pinned to one CPU so main and fill share
 * it (fill at the lowest priority). `checkpoint_path` must be NULL; `repetitions`: 1 to
 * PFRT_COMPARE_MAX_REPETITIONS. In rank mode (options.rank/world) every rank calls it with the
 * same options and each run is a rank-mode run; rank 0 computes the result from the merged runs,
 * and on the host each rank's threads share the CPU of its local rank (counted down from the
 * highest; the launcher's OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK). */
#define PFRT_COMPARE_MAX_REPETITIONS 1000u
pfrt_status pfrt_compare(pfrt_program *program, const pfrt_options *options, uint32_t repetitions,
                         pfrt_compare_result *out);
/* The result as a text table (json = 0) or a JSON object (json = 1); the string stays valid until
 * the next call on this thread. */
const char *pfrt_compare_format(const pfrt_compare_result *result, int json);

/* ---------------------------------------------------------------------------------------------
 * Sessions: one rank's fill, driven by a framework that owns its training loop (API version 3;
 * fill tasks, pfrt_session_task_*: version 4)
 *
 * A rank is one device of the stream program (one pipeline stage, one process). The framework
 * runs its own forward/backward/sends; where the plan has a bubble it calls
 * pfrt_session_bubble_begin, runs its own work (or waits for a peer), then
 * pfrt_session_bubble_end. The session runs that bubble's planned fill chunks on a worker thread
 * under the bubble bound (a chunk starts only if its predicted time fits what is left of the
 * bubble; otherwise it is deferred, in plan order, to a later bubble of its job). Calls of one
 * session must not overlap (one thread at a time); different sessions are independent.
 * Calls in the wrong order get PFRT_ERROR_INVALID_ARGUMENT and a message, never a hang.
 *
 * CUDA sessions (options.backend CUDA; not yet run on a GPU, see docs/integration.md):
 * bubble_begin and bubble_end record an event on main_stream (the framework's cudaStream_t, of
 * the session's GPU; NULL: the default stream) and return at once, so the framework's host thread
 * may run iterations ahead of its stream (up to 16 bubbles per planned bubble, then bubble_begin
 * waits for the GPU). The worker waits until the GPU reaches a bubble's begin event (its deadline
 * counts from that event's time), runs chunks on a low-priority stream one at a time under the
 * same bound, and starts none once the GPU has passed the end event. bubble_end's result is then
 * all zeros (not known yet); bubble_wait, stats, jobs, tasks and checkpoints wait until the worker
 * has finished every bubble issued so far (the GPU has passed their ends) and report a failure of
 * the worker (PFRT_ERROR_BACKEND for a CUDA error) there or at the next bubble_end.
 * ------------------------------------------------------------------------------------------- */

typedef struct pfrt_session pfrt_session;

typedef struct pfrt_session_options {
  pfrt_backend backend;       /* AUTO (default) and HOST: the host backend; CUDA: chunks on the
                                 GPU current on the creating thread, on a low-priority stream,
                                 bubbles are events on main_stream (PFRT_ERROR_UNAVAILABLE
                                 without a CUDA device); see "CUDA sessions" above */
  uint32_t world_size;        /* nonzero: the launcher's world size; the plan must have exactly
                                 this many ranks (devices), else the plan is for another job */
  double time_scale;          /* real us per planned us (planned bubble durations and chunk
                                 predictions are scaled by it); 0 = 1.0 */
  uint32_t max_dim;           /* fill workload dimension cap; 0 = host default (128), CUDA: no
                                 cap */
  pfrt_fill_policy fill_policy; /* BOUNDED (default) or UNBOUNDED (every chunk runs) */
  int fill_idle_priority;     /* 1: the worker thread runs at SCHED_IDLE (else nice 19); 0: not */
  /* Appended in API version 13. Host: 1 makes bubble_end and iteration_end return at once, as on
   * CUDA: the worker runs the bubbles from a queue (a bubble begins and ends at the calls' host
   * clock readings), a chunk in flight at bubble_end finishes its pass on the worker after the
   * call, and bubble_end's result is all zeros (the stats have the numbers; the calls that read
   * them wait for the worker and report first a fill task that failed after its bubble's end).
   * The queue holds 16 commands per planned bubble, iteration ends included; past that, begin and
   * iteration_end wait for the worker. For a framework whose thread must not wait for fill at a
   * bubble's end: a worker at idle priority may get no core for a long time on a loaded machine.
   * 0 (default): bubble_end waits for the chunk in flight and returns the bubble's numbers. CUDA:
   * ignored (always at once). */
  int host_end_at_once;
} pfrt_session_options;

void pfrt_session_options_init(pfrt_session_options *options);

/* Creates a session for `rank` of a loaded program (copied; the program can be destroyed after),
 * of a program file, or of a program in memory. options may be NULL (defaults). */
pfrt_status pfrt_session_create(const pfrt_program *program, uint32_t rank,
                                const pfrt_session_options *options, pfrt_session **out_session);
pfrt_status pfrt_session_create_file(const char *path, uint32_t rank,
                                     const pfrt_session_options *options,
                                     pfrt_session **out_session);
pfrt_status pfrt_session_create_memory(const void *data, size_t size, const char *source_name,
                                       uint32_t rank, const pfrt_session_options *options,
                                       pfrt_session **out_session);
/* Ends an open bubble (waits for its chunk in flight) and frees the session. NULL is a no-op.
 * Called from a fill task's step on the session's own worker thread it is refused: the session
 * stays live (pfrt_last_error says why), and the step's task fails when the step returns, which
 * the next pfrt_session_bubble_wait / pfrt_session_bubble_end reports as
 * PFRT_ERROR_INVALID_ARGUMENT. */
void pfrt_session_destroy(pfrt_session *session);

/* The rank's main-stream work in plan order (compute, send, recv): what the framework runs. */
typedef enum pfrt_session_op_kind {
  PFRT_SESSION_OP_COMPUTE = 1,
  PFRT_SESSION_OP_SEND = 2,
  PFRT_SESSION_OP_RECV = 3
} pfrt_session_op_kind;

typedef struct pfrt_session_op {
  pfrt_session_op_kind kind;
  pfrt_compute_kind compute; /* COMPUTE */
  uint32_t microbatch, chunk; /* COMPUTE */
  uint32_t peer, tag;         /* SEND, RECV: the peer rank and the transfer's tag */
  uint64_t bytes;             /* SEND, RECV */
  double planned_us, planned_start_us;
} pfrt_session_op;

pfrt_status pfrt_session_rank_info(const pfrt_session *session, uint32_t *out_rank,
                                   uint32_t *out_ranks, uint32_t *out_ops, uint32_t *out_bubbles);
pfrt_status pfrt_session_op_get(const pfrt_session *session, uint32_t index,
                                pfrt_session_op *out_op);

typedef struct pfrt_session_bubble {
  uint32_t bubble_id;         /* what bubble_begin takes */
  pfrt_bubble_kind kind;
  int32_t after_op;           /* index (pfrt_session_op_get) of the main op it follows; -1: first */
  double planned_start_us, planned_duration_us;
  uint64_t free_bytes;
  uint32_t chunks;            /* planned fill chunks in it (all iterations of a periodic plan) */
  double planned_fill_us;     /* their planned time (likewise) */
} pfrt_session_bubble;

/* The index-th bubble of the rank in schedule order (index < out_bubbles of rank_info). */
pfrt_status pfrt_session_bubble_get(const pfrt_session *session, uint32_t index,
                                    pfrt_session_bubble *out_bubble);

/* bubble_id of pfrt_session_unplanned_begin's bubble in pfrt_session_bubble_end. */
#define PFRT_SESSION_UNPLANNED 0xFFFFFFFFu

/* Starts filling planned bubble `bubble_id` of this iteration: its deadline is now + duration_us
 * when duration_us > 0 (the framework's own timer), else now + its planned duration x time_scale
 * x (host) the smallest measured / planned length of this bubble in its last 5 iterations (begin
 * to end call; 1 before any; an iteration whose bubble was ended after pfrt_session_bubble_wait
 * measures nothing, since the fill, not the framework, set its length).
 * Bubbles of one iteration must be begun in schedule order; the chunks of bubbles skipped before
 * it are deferred. main_stream must be NULL on the host backend (CUDA: the cudaStream_t the
 * bubble follows). Returns at once; the fill runs on the session's worker thread. */
pfrt_status pfrt_session_bubble_begin(pfrt_session *session, uint32_t bubble_id,
                                      void *main_stream, double duration_us);
/* A bubble the plan did not predict (a slow peer, a data-loader stall), bounded by duration_us
 * (> 0): runs the rank's deferred work, then pulls the current iteration's not yet begun planned
 * chunks forward, in plan order. */
pfrt_status pfrt_session_unplanned_begin(pfrt_session *session, double duration_us,
                                         void *main_stream);

typedef struct pfrt_session_bubble_result {
  uint32_t chunks_run;       /* chunks that ran in this bubble */
  uint32_t chunks_deferred;  /* chunks left for a later bubble (did not fit) */
  uint64_t samples_completed;
  double fill_us;            /* measured time of the chunks that ran (real us) */
  double overrun_us;         /* measured: last chunk or task step end past the deadline, 0 if
                                none */
  double end_wait_us;        /* measured: how long bubble_end waited for a chunk in flight */
  /* Fill tasks (API version 4): their steps in this bubble, the samples the steps reported and
   * the measured time of the steps. */
  uint32_t task_steps;
  uint64_t task_samples;
  double task_us;
} pfrt_session_bubble_result;

/* Blocks until the open bubble's fill has nothing more to start: every chunk ran or (bounded) was
 * deferred because it did not fit before the deadline. Bounded by the deadline plus the chunk in
 * flight; unbounded fill runs every chunk first. For a framework whose bubble is idle time it can
 * give away entirely (and for deterministic tests); the bubble stays open. */
pfrt_status pfrt_session_bubble_wait(pfrt_session *session);
/* Ends the open bubble: no further chunk starts; waits for the chunk in flight (host, bounded
 * policy: it stops at its next pass, the rest first in line for a later bubble). Host, bounded
 * policies: if the worker has not taken the bubble yet, it is not waited for; this call defers the
 * bubble's chunks itself (end_wait_us is then the time that took). bubble_id must be
 * the open bubble's (PFRT_SESSION_UNPLANNED for an unplanned one). out_result may be NULL; it is
 * written whenever the call gets that far, also when it returns a fill task's error (the bubble
 * ended; the failed step is in its numbers), else zeroed on error.
 * CUDA: marks the end on main_stream and returns without waiting; out_result is all zeros. */
pfrt_status pfrt_session_bubble_end(pfrt_session *session, uint32_t bubble_id,
                                    pfrt_session_bubble_result *out_result);

/* Ends the rank's iteration (not inside a bubble): chunks of bubbles not begun are deferred. */
pfrt_status pfrt_session_iteration_end(pfrt_session *session);

/* Fill progress (samples, checksums, training weights, batches in flight, deferred chunks) as a
 * FillCheckpoint file (the crash-safe format of pfrt_options.checkpoint_path), outside bubbles
 * and between iterations: after pfrt_session_iteration_end or before an iteration's first planned
 * bubble (a load restarts the iteration, so the bubbles begun in it would run twice; refused
 * once a planned bubble was begun, or an unplanned one took planned chunks forward).
 * load: the file must be of the same program and rank's jobs; the session resumes from it.
 * Fill tasks (version 4): each task's steps, samples and state bytes are saved by name; load
 * needs every task the file names registered (by pfrt_session_task_add) before it; tasks the
 * file does not name start from zero. */
pfrt_status pfrt_session_checkpoint_save(pfrt_session *session, const char *path);
pfrt_status pfrt_session_checkpoint_load(pfrt_session *session, const char *path);

typedef struct pfrt_session_stats {
  uint32_t rank;
  uint64_t iterations;        /* iteration_end calls, plus those restored from a checkpoint */
  uint64_t bubbles, unplanned_bubbles;
  uint64_t chunks_run, chunks_deferred, chunks_skipped, chunks_pending;
  uint64_t samples_completed; /* all jobs, on this rank */
  double fill_us;             /* measured, all chunks */
  uint64_t overrun_count;     /* chunks that ended past their bubble's deadline (measured) */
  double overrun_us;
  double end_wait_us, end_wait_us_max; /* measured time bubble_end waited for chunks in flight */
  /* Fill tasks, all together (API version 4; per task: pfrt_session_task_get). Steps and
   * samples include those restored from a checkpoint; the times are this session's. */
  uint32_t tasks;
  uint64_t task_steps, task_samples;
  double task_us;             /* measured */
  uint64_t task_overrun_count; /* steps that ended past their bubble's deadline (measured) */
  double task_overrun_us;
  /* Appended in API version 5: chunks that ran a head of their passes (the rest deferred). */
  uint64_t chunks_split;
  /* Appended in API version 7. CUDA: chunks the GPU stopped before a pass (device-side bound). */
  uint64_t chunks_stopped_on_device;
} pfrt_session_stats;

/* Stats, jobs and the JSON report are read between bubbles (an error inside one: the worker is
 * updating them). */
pfrt_status pfrt_session_get_stats(const pfrt_session *session, pfrt_session_stats *out_stats);

/* The last chunks that ran (up to 4096, oldest first), each timed on the host clock. */
typedef struct pfrt_session_chunk {
  uint32_t job;
  uint32_t bubble_id;         /* PFRT_SESSION_UNPLANNED for an unplanned bubble */
  uint64_t iteration;
  uint32_t layer_begin, layer_end, batch;
  uint64_t sample_begin;
  int deferred;               /* it ran later than the bubble it was planned for */
  double planned_us;          /* the plan's time */
  double predicted_us;        /* what the bound used, real us (planned x time_scale, corrected
                                 by the measured times); -1 when unbounded */
  /* Measured, real us since the bubble's begin: when the bound let it start (the clock reading
   * it compared, admitted_us + predicted_us <= deadline_us), when its work started and ended. */
  double admitted_us, start_us, end_us, deadline_us;
} pfrt_session_chunk;

pfrt_status pfrt_session_chunk_count(const pfrt_session *session, uint32_t *out_count);
pfrt_status pfrt_session_chunk_get(const pfrt_session *session, uint32_t index,
                                   pfrt_session_chunk *out_chunk);
/* Fill job `job` of the program as this rank ran it (samples, checksum, steps; all fields of
 * pfrt_report_job; samples_planned: what the plan schedules on this rank in the iterations ended). */
pfrt_status pfrt_session_get_job(const pfrt_session *session, uint32_t job,
                                 pfrt_report_job *out_job);
/* The session report as JSON (stats, per job, per chunk shape: planned, predicted and measured
 * times). Valid until the next call on the session; NULL on error (see pfrt_last_error). */
const char *pfrt_session_report_json(pfrt_session *session);

/* ---------------------------------------------------------------------------------------------
 * Fill tasks (API version 4): the user's own work, cut into steps, run in the rank's bubbles
 * under the same bubble bound as the plan's chunks.
 *
 * In every bubble (planned or unplanned) the plan's chunks go first, in plan order (what the
 * bound lets start); then the registered tasks, round-robin (the turn carries over from bubble to
 * bubble), one step at a time, until no task's next step fits or the bubble ends. A step starts
 * only if
 *   - its predicted time fits what is left of the bubble: clock + predicted_us <= deadline
 *     (UNBOUNDED policy: only clock < deadline), and
 *   - the task's memory_bytes <= the bubble's free bytes. A planned bubble's free bytes are the
 *     plan's (pfrt_session_bubble.free_bytes); an unplanned bubble's are the smallest free bytes
 *     of the rank's planned bubbles (memory the plan leaves free at every bubble of this rank; 0
 *     when the rank has no planned bubble).
 * A task that did not fit waits for the next bubble (skipped_no_fit / skipped_memory count one
 * per bubble). The prediction (real us) starts from the estimate and follows the measured steps:
 *   no step measured yet: 1.2 x step_us;
 *   else: max(1.2 x median, 90th percentile) of the last 32 measured steps (the nearest-rank
 *         percentile, so with fewer than 10 steps: their maximum),
 * at least as careful as FreeRide's rule (a step starts only if the time left exceeds 1.2 x its
 * median step time). A step that returns an error (or any status but PFRT_OK) disables its task;
 * the next pfrt_session_bubble_wait or pfrt_session_bubble_end returns that status with a
 * message naming the task (the bubble is still ended by bubble_end, which writes its result
 * too). Steps run on the session's
 * worker thread, one at a time, never concurrently with the plan's chunks. A step must not call
 * pfrt_session_bubble_end or pfrt_session_bubble_wait on its own session (nor, on CUDA sessions,
 * the calls that wait for the worker): they return PFRT_ERROR_INVALID_ARGUMENT.
 * ------------------------------------------------------------------------------------------- */

/* One step of a task; sets *out_samples to the samples (items, batches: the task's unit) it did. */
typedef pfrt_status (*pfrt_session_task_step_fn)(void *user_data, uint64_t *out_samples);

typedef struct pfrt_session_task_desc {
  const char *name;               /* unique in the session (copied); checkpoints match by it */
  pfrt_session_task_step_fn step; /* called on the session's worker thread */
  void *user_data;
  double step_us;                 /* estimated real us per step (> 0, <= 1e9) */
  uint64_t memory_bytes;          /* memory a step needs; runs only where free bytes >= it */
  uint64_t max_steps;             /* 0: no limit; counts steps restored from a checkpoint */
} pfrt_session_task_desc;

/* The CUDA stream the session's worker runs fill on (a cudaStream_t) and its GPU ordinal
 * (out_gpu may be NULL); NULL and -1 on the host backend (API version 8). A task's step on a
 * CUDA session should enqueue its GPU work on this stream (with torch: torch.cuda.ExternalStream;
 * pipefill.Session.add_task does it for torch): the stream has the rank's fill priority, and the
 * runtime waits for it after every step, so the step's measured time, its prediction and the
 * bound cover the GPU work it enqueued there (work left on other streams is not waited for, is
 * not timed, and can run past the bubble). */
pfrt_status pfrt_session_fill_stream(const pfrt_session *session, void **out_stream,
                                     int *out_gpu);

/* Registers a task (outside bubbles); *out_task is its id (0, 1, ... in the order added). */
pfrt_status pfrt_session_task_add(pfrt_session *session, const pfrt_session_task_desc *desc,
                                  uint32_t *out_task);
pfrt_status pfrt_session_task_count(const pfrt_session *session, uint32_t *out_count);

typedef struct pfrt_session_task_stats {
  const char *name;           /* valid while the session lives */
  double step_us;             /* the estimate given to task_add */
  uint64_t memory_bytes, max_steps;
  uint64_t steps, samples;    /* including those restored from a checkpoint */
  uint64_t steps_this_run, samples_this_run;
  /* Measured (real us) over the last 32 steps: median and 90th percentile; max and mean over
   * all steps of this session; 0 before the first step. */
  double measured_us_p50, measured_us_p90, measured_us_max, measured_us_mean;
  double predicted_us;        /* what the bound uses for the next step (real us) */
  double task_us;             /* measured time of all its steps */
  uint64_t skipped_no_fit;    /* bubbles where its next step did not fit the time left */
  uint64_t skipped_memory;    /* bubbles with fewer free bytes than memory_bytes */
  uint64_t overruns;          /* steps that ended past their bubble's deadline */
  double overrun_us;
  int done;                   /* max_steps reached */
  int failed;                 /* a step returned an error: disabled */
  pfrt_status error_status;   /* that error (PFRT_OK if none) */
} pfrt_session_task_stats;

/* A task's numbers, read between bubbles (an error inside one). */
pfrt_status pfrt_session_task_get(const pfrt_session *session, uint32_t task,
                                  pfrt_session_task_stats *out_stats);

/* Opaque bytes saved with the task in the session checkpoint (its own progress: a data loader's
 * position, a model's state), copied; set them before pfrt_session_checkpoint_save. After
 * pfrt_session_checkpoint_load, task_state_get returns the bytes the file held for the task of
 * the same name (size 0: none); they stay valid until the next call on the session. */
pfrt_status pfrt_session_task_state_set(pfrt_session *session, uint32_t task, const void *data,
                                        size_t size);
pfrt_status pfrt_session_task_state_get(const pfrt_session *session, uint32_t task,
                                        const void **out_data, size_t *out_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PFRT_H */
