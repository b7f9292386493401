// Programs as static tables (runtime/pfrt_tables.h): the replay of a generated binary's tables
// through the builder API, and the command line of such a binary.
#include "runtime/pfrt_tables.h"
#include "runtime/Program.h"
#include "runtime/ProgramIO.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pfrt {
namespace {

[[noreturn]] void bad(const std::string &where, const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_PROGRAM, "program tables: " + where + ": " + message);
}

void check(pfrt_status status, const std::string &where) {
  if (status != PFRT_OK)
    throw Error(status, "program tables: " + where + ": " + pfrt_last_error());
}

std::string row(const char *table, uint64_t index) {
  return std::string(table) + "[" + std::to_string(index) + "]";
}

void requireTable(const void *rows, uint32_t count, const char *table) {
  if (count && !rows)
    bad(table, std::to_string(count) + " rows declared but the table is NULL");
}

void addJobs(pfrt_program *p, const pfrt_program_tables &t) {
  for (uint32_t j = 0; j < t.num_jobs; ++j) {
    const pfrt_table_job &job = t.jobs[j];
    if (uint64_t(job.first_layer) + job.num_layers > t.num_layers)
      bad(row("jobs", j), "layers [" + std::to_string(job.first_layer) + ", " +
                              std::to_string(job.first_layer + uint64_t(job.num_layers)) +
                              ") are beyond the " + std::to_string(t.num_layers) +
                              " rows of the layers table");
    uint32_t id = 0;
    check(pfrt_program_add_fill_job(p, &job.desc, &id), row("jobs", j));
    for (uint32_t l = 0; l < job.num_layers; ++l)
      check(pfrt_fill_job_add_layer(p, id, &t.layers[job.first_layer + l]),
            row("layers", job.first_layer + l));
  }
}

void addDevicesStreamsEvents(pfrt_program *p, const pfrt_program_tables &t) {
  uint32_t id = 0;
  for (uint32_t d = 0; d < t.num_devices; ++d)
    check(pfrt_program_add_device(p, &t.devices[d], &id), row("devices", d));
  for (uint32_t s = 0; s < t.num_streams; ++s) {
    const pfrt_table_stream &st = t.streams[s];
    check(pfrt_program_create_stream(p, st.device, st.role, st.priority, st.name, &id),
          row("streams", s));
  }
  for (uint32_t e = 0; e < t.num_events; ++e)
    check(pfrt_program_create_event(p, t.events[e].device, t.events[e].name, &id),
          row("events", e));
}

void enqueue(pfrt_program *p, const pfrt_program_tables &t, uint32_t i) {
  const pfrt_table_op &o = t.ops[i];
  const std::string where = row("ops", i);
  auto u32 = [&](uint64_t v, const char *what) {
    if (v > UINT32_MAX)
      bad(where, std::string(what) + " " + std::to_string(v) + " does not fit 32 bits");
    return static_cast<uint32_t>(v);
  };
  pfrt_status status = PFRT_OK;
  switch (o.kind) {
  case PFRT_TABLE_COMPUTE:
    status =
        pfrt_program_enqueue_compute(p, o.device, o.stream, static_cast<pfrt_compute_kind>(o.a),
                                     u32(o.b, "microbatch"), u32(o.c, "chunk"), o.x, o.y);
    break;
  case PFRT_TABLE_SEND:
    status = pfrt_program_enqueue_send(p, o.device, o.stream, u32(o.a, "peer"), o.b,
                                       u32(o.c, "tag"), o.x, o.y);
    break;
  case PFRT_TABLE_RECV:
    status = pfrt_program_enqueue_recv(p, o.device, o.stream, u32(o.a, "peer"), o.b,
                                       u32(o.c, "tag"), o.x, o.y);
    break;
  case PFRT_TABLE_RECORD:
    status = pfrt_program_enqueue_record(p, o.device, o.stream, u32(o.a, "event"));
    break;
  case PFRT_TABLE_WAIT:
    status = pfrt_program_enqueue_wait(p, o.device, o.stream, u32(o.a, "event"));
    break;
  case PFRT_TABLE_BUBBLE:
    if (o.a >= t.num_bubbles)
      bad(where, "bubble row " + std::to_string(o.a) + " is beyond the " +
                     std::to_string(t.num_bubbles) + " rows of the bubbles table");
    status = pfrt_program_enqueue_bubble(p, o.device, o.stream, &t.bubbles[o.a]);
    break;
  case PFRT_TABLE_FILL:
    if (o.a >= t.num_chunks)
      bad(where, "chunk row " + std::to_string(o.a) + " is beyond the " +
                     std::to_string(t.num_chunks) + " rows of the chunks table");
    status = pfrt_program_enqueue_fill(p, o.device, o.stream, &t.chunks[o.a]);
    break;
  case PFRT_TABLE_COPY:
    status = pfrt_program_enqueue_copy(p, o.device, o.stream, static_cast<pfrt_copy_direction>(o.a),
                                       o.b, o.x);
    break;
  case PFRT_TABLE_ALLOC:
    status = pfrt_program_enqueue_alloc(p, o.device, o.stream, u32(o.a, "buffer"), o.b);
    break;
  case PFRT_TABLE_FREE:
    status = pfrt_program_enqueue_free(p, o.device, o.stream, u32(o.a, "buffer"));
    break;
  default:
    bad(where, "unknown op kind " + std::to_string(static_cast<int>(o.kind)));
  }
  check(status, where);
}

} // namespace

pfrt_program *buildFromTables(const pfrt_program_tables &t) {
  if (t.version != PFRT_TABLES_VERSION)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "program tables of version " + std::to_string(t.version) +
                    ", this runtime reads version " + std::to_string(PFRT_TABLES_VERSION) +
                    ": regenerate them with this pipefill-translate --to-cpp");
  requireTable(t.devices, t.num_devices, "devices");
  requireTable(t.streams, t.num_streams, "streams");
  requireTable(t.events, t.num_events, "events");
  requireTable(t.jobs, t.num_jobs, "jobs");
  requireTable(t.layers, t.num_layers, "layers");
  requireTable(t.bubbles, t.num_bubbles, "bubbles");
  requireTable(t.chunks, t.num_chunks, "chunks");
  requireTable(t.ops, t.num_ops, "ops");
  pfrt_program *p = nullptr;
  check(pfrt_program_create(t.name ? t.name : "", &p), "name");
  try {
    check(pfrt_program_set_iterations(p, t.iterations), "iterations");
    check(pfrt_program_set_seed(p, t.seed), "seed");
    check(pfrt_program_set_planned_iteration_us(p, t.planned_iteration_us),
          "planned_iteration_us");
    addJobs(p, t);
    addDevicesStreamsEvents(p, t);
    for (uint32_t i = 0; i < t.num_ops; ++i)
      enqueue(p, t, i);
    check(pfrt_program_validate(p), "validate");
  } catch (...) {
    pfrt_program_destroy(p);
    throw;
  }
  return p;
}

} // namespace pfrt

namespace {

void usage(const char *argv0, FILE *to) {
  std::fprintf(to,
               "usage: %s [options]\n"
               "Runs the plan compiled into this binary (pipefill-translate --to-cpp).\n"
               "  --backend host|cuda|auto     (default auto)\n"
               "  --iterations N               (default: the plan's)\n"
               "  --time-model measured|modelled\n"
               "  --fill-policy bounded|whole|unbounded\n"
               "  --time-scale X               (host, modelled time)\n"
               "  --max-dim N                  cap fill-workload dimensions\n"
               "  --checkpoint FILE            resume from / save fill progress\n"
               "  --report FILE                write the run report (JSON)\n"
               "  --no-fill                    main job only\n"
               "  --quiet                      no summary on stdout\n",
               argv0);
}

bool parseUnsigned(const char *s, unsigned long long max, unsigned long long &out) {
  if (!s || !*s || *s == '-' || *s == '+')
    return false;
  char *end = nullptr;
  errno = 0;
  out = std::strtoull(s, &end, 10);
  return errno == 0 && *end == '\0' && out <= max;
}

bool parsePositive(const char *s, double &out) {
  if (!s || !*s)
    return false;
  char *end = nullptr;
  errno = 0;
  out = std::strtod(s, &end);
  return errno == 0 && *end == '\0' && out > 0 && out < 1e9;
}

int argError(const char *argv0, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", argv0, message.c_str());
  return 2;
}

} // namespace

extern "C" int pfrt_tables_main(const pfrt_program_tables *tables, int argc, char **argv) {
  const char *argv0 = argc > 0 && argv[0] ? argv[0] : "pipefill-generated";
  pfrt_options options;
  pfrt_options_init(&options);
  const char *reportPath = nullptr;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto takes = [&]() -> const char * { // the option's value, if there is one
      if (!value)
        return nullptr;
      ++i;
      return value;
    };
    unsigned long long n = 0;
    if (arg == "--help" || arg == "-h") {
      usage(argv0, stdout);
      return 0;
    } else if (arg == "--no-fill") {
      options.enable_fill = 0;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--backend") {
      const char *v = takes();
      if (v && !std::strcmp(v, "host"))
        options.backend = PFRT_BACKEND_HOST;
      else if (v && !std::strcmp(v, "cuda"))
        options.backend = PFRT_BACKEND_CUDA;
      else if (v && !std::strcmp(v, "auto"))
        options.backend = PFRT_BACKEND_AUTO;
      else
        return argError(argv0, "--backend expects host, cuda or auto, got '" +
                                   std::string(v ? v : "") + "'");
    } else if (arg == "--iterations") {
      const char *v = takes();
      if (!parseUnsigned(v, UINT32_MAX, n))
        return argError(argv0, "--iterations expects a non-negative integer, got '" +
                                   std::string(v ? v : "") + "'");
      options.iterations = static_cast<uint32_t>(n);
    } else if (arg == "--max-dim") {
      const char *v = takes();
      if (!parseUnsigned(v, 1u << 20, n))
        return argError(argv0, "--max-dim expects a non-negative integer, got '" +
                                   std::string(v ? v : "") + "'");
      options.max_dim = static_cast<uint32_t>(n);
    } else if (arg == "--time-scale") {
      const char *v = takes();
      double x = 0;
      if (!parsePositive(v, x))
        return argError(argv0, "--time-scale expects a positive number, got '" +
                                   std::string(v ? v : "") + "'");
      options.time_scale = x;
    } else if (arg == "--time-model") {
      const char *v = takes();
      if (v && !std::strcmp(v, "measured"))
        options.time_model = PFRT_TIME_MEASURED;
      else if (v && !std::strcmp(v, "modelled"))
        options.time_model = PFRT_TIME_MODELLED;
      else
        return argError(argv0, "--time-model expects measured or modelled, got '" +
                                   std::string(v ? v : "") + "'");
    } else if (arg == "--fill-policy") {
      const char *v = takes();
      if (v && !std::strcmp(v, "bounded"))
        options.fill_policy = PFRT_FILL_BOUNDED;
      else if (v && !std::strcmp(v, "unbounded"))
        options.fill_policy = PFRT_FILL_UNBOUNDED;
      else if (v && !std::strcmp(v, "whole"))
        options.fill_policy = PFRT_FILL_BOUNDED_WHOLE;
      else
        return argError(argv0, "--fill-policy expects bounded, whole or unbounded, got '" +
                                   std::string(v ? v : "") + "'");
    } else if (arg == "--checkpoint") {
      const char *v = takes();
      if (!v || !*v)
        return argError(argv0, "--checkpoint expects a file");
      options.checkpoint_path = v;
    } else if (arg == "--report") {
      const char *v = takes();
      if (!v || !*v)
        return argError(argv0, "--report expects a file");
      reportPath = v;
    } else {
      usage(argv0, stderr);
      return argError(argv0, "unknown argument '" + arg + "'");
    }
  }
  pfrt_program *program = nullptr;
  if (pfrt_program_from_tables(tables, &program) != PFRT_OK) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, pfrt_last_error());
    return 1;
  }
  pfrt_report *report = nullptr;
  if (pfrt_run(program, &options, &report) != PFRT_OK) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, pfrt_last_error());
    pfrt_program_destroy(program);
    return 1;
  }
  if (!quiet)
    std::fputs(pfrt_report_summary(report), stdout);
  int rc = 0;
  if (reportPath && pfrt_report_write_json(report, reportPath) != PFRT_OK) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, pfrt_last_error());
    rc = 1;
  }
  pfrt_report_destroy(report);
  pfrt_program_destroy(program);
  return rc;
}
