/* pipefill runtime: programs as static tables.
 *
 * `pipefill-translate --to-cpp` writes a compiled plan as constant tables of the structs below and
 * a one-line main() that calls pfrt_tables_main(); the replay of the tables through the builder
 * API (and the command line of such a standalone binary) live here, in the runtime, so generated
 * files stay data only and every generated binary gets fixes to the replay and the options.
 *
 * C API like pfrt.h (C++17 implementation, C-compatible declarations). A table set is valid for
 * the PFRT_TABLES_VERSION it was generated against; pfrt_program_from_tables rejects another one.
 */
#ifndef PFRT_TABLES_H
#define PFRT_TABLES_H

#include "runtime/pfrt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFRT_TABLES_VERSION 1

typedef enum pfrt_table_op_kind {
  PFRT_TABLE_COMPUTE = 1,
  PFRT_TABLE_SEND = 2,
  PFRT_TABLE_RECV = 3,
  PFRT_TABLE_RECORD = 4,
  PFRT_TABLE_WAIT = 5,
  PFRT_TABLE_BUBBLE = 6,
  PFRT_TABLE_FILL = 7,
  PFRT_TABLE_COPY = 8,
  PFRT_TABLE_ALLOC = 9,
  PFRT_TABLE_FREE = 10
} pfrt_table_op_kind;

/* One op of one stream; ops of a stream appear in stream order. Operands by kind:
 *   COMPUTE      a = pfrt_compute_kind, b = microbatch, c = chunk, x = planned us, y = planned start
 *   SEND, RECV   a = peer device, b = bytes, c = tag, x = planned us, y = planned start
 *   RECORD, WAIT a = event
 *   BUBBLE       a = index into bubbles
 *   FILL         a = index into chunks
 *   COPY         a = pfrt_copy_direction, b = bytes, x = planned us
 *   ALLOC        a = buffer, b = bytes
 *   FREE         a = buffer */
typedef struct pfrt_table_op {
  uint32_t device, stream;
  pfrt_table_op_kind kind;
  uint64_t a, b, c;
  double x, y;
} pfrt_table_op;

typedef struct pfrt_table_stream {
  uint32_t device;
  pfrt_stream_role role;
  pfrt_priority priority;
  const char *name;
} pfrt_table_stream;

typedef struct pfrt_table_event {
  uint32_t device;
  const char *name;
} pfrt_table_event;

/* A fill job and its layers: layers[first_layer, first_layer + num_layers). */
typedef struct pfrt_table_job {
  pfrt_fill_job_desc desc;
  uint32_t first_layer, num_layers;
} pfrt_table_job;

typedef struct pfrt_program_tables {
  uint32_t version; /* PFRT_TABLES_VERSION */
  const char *name;
  uint32_t iterations;
  uint64_t seed;
  double planned_iteration_us;
  const pfrt_device_desc *devices;
  uint32_t num_devices;
  const pfrt_table_stream *streams; /* grouped by device, in stream-id order */
  uint32_t num_streams;
  const pfrt_table_event *events; /* grouped by device, in event-id order */
  uint32_t num_events;
  const pfrt_table_job *jobs;
  uint32_t num_jobs;
  const pfrt_fill_layer_desc *layers;
  uint32_t num_layers;
  const pfrt_bubble_desc *bubbles;
  uint32_t num_bubbles;
  const pfrt_fill_chunk_desc *chunks;
  uint32_t num_chunks;
  const pfrt_table_op *ops;
  uint32_t num_ops;
} pfrt_program_tables;

/* Replays the tables through the builder API and validates the program. Errors (a table of
 * another version, an index out of range, a row the builder rejects) name the table and row. */
pfrt_status pfrt_program_from_tables(const pfrt_program_tables *tables,
                                     pfrt_program **out_program);

/* The main() of a generated binary: builds the program from the tables, runs it with the options
 * given on the command line (--help lists them), prints the summary and writes --report.
 * Returns the process exit code: 0, 1 (the program or the run failed), 2 (bad arguments). */
int pfrt_tables_main(const pfrt_program_tables *tables, int argc, char **argv);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PFRT_TABLES_H */
