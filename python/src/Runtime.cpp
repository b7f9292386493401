//===- Runtime.cpp - pipefill._core and _rt: the runtime binding ----------===//
//
// The runtime half of the Python binding (Runtime.h): binds the public C API
// of runtime/pfrt.h only, so changes inside the runtime never touch this file,
// and links no compiler library (pipefill._rt is this file, Tasks.cpp and
// RuntimeModule.cpp over pfrt).
//
//===----------------------------------------------------------------------===//
#include "python/src/Runtime.h"
#include "python/src/Gil.h"

#include "python/src/FileError.h"
#include "python/src/PyText.h"
#include "python/src/Session.h"
#include "runtime/pfrt.h"

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace nb = nanobind;
using namespace nb::literals;

namespace pipefill::py {
namespace {

/// Owns one run's pfrt_report.
class RunReport {
public:
  explicit RunReport(pfrt_report *report) : report(report) {}
  ~RunReport() { pfrt_report_destroy(report); }
  RunReport(const RunReport &) = delete;
  RunReport &operator=(const RunReport &) = delete;

  std::string json() const { return pfrt_report_json(report); }
  std::string summary() const { return pfrt_report_summary(report); }

  nb::dict stats() const {
    pfrt_report_stats s{};
    check(pfrt_report_get_stats(report, &s), "reading the run report");
    nb::dict d;
    d["backend"] = s.backend ? s.backend : "";
    d["first_iteration"] = s.first_iteration;
    d["iterations"] = s.iterations;
    d["iteration_us_mean"] = s.iteration_us_mean;
    d["planned_iteration_us"] = s.planned_iteration_us;
    d["bubble_us_per_iteration"] = s.bubble_us_per_iteration;
    d["fill_us_per_iteration"] = s.fill_us_per_iteration;
    d["overrun_count"] = s.overrun_count;
    d["overrun_us"] = s.overrun_us;
    d["switch_latency_us_mean"] = s.switch_latency_us_mean;
    d["jobs"] = s.jobs;
    // Whether the times above were read from a clock (else modelled), as pfrt_report_stats says.
    d["time_measured"] = s.time_measured != 0;
    d["real_iteration_us_mean"] = s.real_iteration_us_mean;
    return d;
  }

  nb::list jobs() const {
    pfrt_report_stats s{};
    check(pfrt_report_get_stats(report, &s), "reading the run report");
    nb::list out;
    for (uint32_t j = 0; j < s.jobs; ++j) {
      pfrt_report_job job{};
      check(pfrt_report_get_job(report, j, &job), "reading the run report");
      nb::dict d;
      d["name"] = job.name ? job.name : "";
      d["kind"] = pfrt::fillKindName(job.kind);
      d["samples_completed"] = job.samples_completed;
      d["samples_this_run"] = job.samples_this_run;
      d["samples_planned"] = job.samples_planned;
      d["checksum"] = job.checksum;
      d["steps"] = job.steps;
      d["weights_checksum"] = job.weights_checksum;
      d["iterations_held"] = job.iterations_held;
      d["samples_held"] = job.samples_held;
      d["samples_in_flight_planned"] = job.samples_in_flight_planned;
      out.append(d);
    }
    return out;
  }

  void saveJson(nb::handle path) const {
    check(pfrt_report_write_json(report, fsPath(path, "the report path").c_str()),
          "writing the run report");
  }
  void saveProfile(nb::handle path) const {
    check(pfrt_report_write_profile(report, fsPath(path, "the profile path").c_str()),
          "writing the measured profile");
  }
  void saveTrace(nb::handle path) const {
    check(pfrt_report_write_trace(report, fsPath(path, "the trace path").c_str()),
          "writing the run's trace");
  }

private:
  pfrt_report *report;
};

pfrt_backend parseBackend(const std::string &name) {
  if (name == "host")
    return PFRT_BACKEND_HOST;
  if (name == "cuda")
    return PFRT_BACKEND_CUDA;
  if (name == "auto")
    return PFRT_BACKEND_AUTO;
  throw std::invalid_argument("unknown backend '" + name + "' (expected host, cuda or auto)");
}

/// The runtime's message for a Python caller: a bad checkpoint's names pfrt_options' fields, which
/// are run()'s on_bad_checkpoint and max_dim.
std::string forPython(std::string error) {
  const std::string flag = "checkpoint_recovery PFRT_CHECKPOINT_PREVIOUS or PFRT_CHECKPOINT_RESTART";
  if (const size_t at = error.find(flag); at != std::string::npos)
    error.replace(at, flag.size(), "on_bad_checkpoint='previous' or 'restart'");
  const std::string maxDim = "run with max_dim ";
  if (const size_t at = error.find(maxDim); at != std::string::npos)
    error.replace(at, maxDim.size(), "run with max_dim=");
  return error;
}

/// `call` (a pfrt call returning a status) on a helper thread while this one waits in slices
/// without the GIL, checking for signals between them, so Ctrl-C is not held off until a run
/// ends: on a signal whose handler raises (KeyboardInterrupt) the run is asked to stop at its next
/// iteration boundary (pfrt_stop_request: every run of the process), and once it has the
/// exception is raised (after `cleanup`, which frees what the call made).
template <class Call, class Cleanup>
void callInterruptibly(Call &&call, Cleanup &&cleanup, const char *what) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  pfrt_status status = PFRT_OK;
  std::string error; // pfrt_last_error is per thread: the helper's
  std::thread run([&] {
    const pfrt_status st = call();
    std::lock_guard<std::mutex> lock(m);
    status = st;
    if (st != PFRT_OK)
      error = pfrt_last_error();
    done = true;
    cv.notify_all();
  });
  bool interrupted = false;
  for (bool finished = false; !finished;) {
    {
      pipefill::py::GilRelease release;
      std::unique_lock<std::mutex> lock(m);
      finished = cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; });
    }
    if (!finished && !interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true; // the exception stays set until the run has stopped
      pfrt_stop_request();
    }
  }
  run.join();
  if (interrupted) {
    pfrt_stop_clear(); // this call asked for the stop
    cleanup();
    throw nb::python_error();
  }
  if (status != PFRT_OK)
    fail(status, what, forPython(error));
}

pfrt_report *runInterruptibly(pfrt_program *program, const pfrt_options &options) {
  pfrt_report *report = nullptr;
  callInterruptibly([&] { return pfrt_run(program, &options, &report); },
                    [&] {
                      pfrt_report_destroy(report);
                      report = nullptr;
                    },
                    "running the program");
  return report;
}

struct RunArgs {
  std::string backend;
  int64_t iterations;
  double timeScale;
  bool fill, profile;
  int64_t stage, maxDim;
  std::string checkpoint, onBadCheckpoint;
  bool verbose;
};

/// `value` as Python's repr would roughly write it (%g): std::to_string writes 1e-9 as 0.000000
/// and 1e300 with 300 digits.
std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// time_scale within what the runtime accepts (PFRT_MIN_TIME_SCALE..PFRT_MAX_TIME_SCALE).
void checkTimeScale(double timeScale) {
  if (!(timeScale >= PFRT_MIN_TIME_SCALE && timeScale <= PFRT_MAX_TIME_SCALE))
    throw std::invalid_argument("time_scale must be from " + shortNumber(PFRT_MIN_TIME_SCALE) +
                                " to " + shortNumber(PFRT_MAX_TIME_SCALE) + ", got " +
                                shortNumber(timeScale));
}

pfrt_options runOptions(const RunArgs &args) {
  pfrt_options options;
  pfrt_options_init(&options);
  options.backend = parseBackend(args.backend);
  if (args.iterations < 0)
    throw std::invalid_argument("iterations must be >= 0 (0: the program's own count)");
  options.iterations = toUint32(args.iterations, "iterations");
  checkTimeScale(args.timeScale);
  options.time_scale = args.timeScale;
  options.enable_fill = args.fill ? 1 : 0;
  options.profile = args.profile ? 1 : 0;
  if (args.stage < -1 || args.stage > 0x7FFFFFFFll)
    throw std::invalid_argument("stage must be -1 (every device runs) or a device index (got " +
                                std::to_string(args.stage) + ")");
  options.stage = static_cast<int32_t>(args.stage);
  if (args.maxDim < 0)
    throw std::invalid_argument("max_dim must be >= 0");
  options.max_dim = toUint32(args.maxDim, "max_dim");
  options.checkpoint_path = args.checkpoint.empty() ? nullptr : args.checkpoint.c_str();
  if (args.onBadCheckpoint == "fail")
    options.checkpoint_recovery = PFRT_CHECKPOINT_FAIL;
  else if (args.onBadCheckpoint == "previous")
    options.checkpoint_recovery = PFRT_CHECKPOINT_PREVIOUS;
  else if (args.onBadCheckpoint == "restart")
    options.checkpoint_recovery = PFRT_CHECKPOINT_RESTART;
  else
    throw std::invalid_argument("unknown on_bad_checkpoint '" + args.onBadCheckpoint +
                                "' (expected fail, previous or restart)");
  options.verbose = args.verbose ? 1 : 0;
  return options;
}

std::unique_ptr<RunReport> runLoaded(pfrt_program *program, const RunArgs &args) {
  std::unique_ptr<pfrt_program, void (*)(pfrt_program *)> owner(program, pfrt_program_destroy);
  const pfrt_options options = runOptions(args);
  return std::make_unique<RunReport>(runInterruptibly(program, options));
}

/// pfrt_compare: the comparison's JSON as a dict, with its text table under "summary".
nb::object compareBytes(nb::bytes data, const std::string &name, int64_t repetitions,
                        const RunArgs &args) {
  if (repetitions < 1 || repetitions > PFRT_COMPARE_MAX_REPETITIONS)
    throw std::invalid_argument("repetitions must be from 1 to " +
                                std::to_string(PFRT_COMPARE_MAX_REPETITIONS) + " ABBA blocks, got " +
                                std::to_string(repetitions));
  const pfrt_options options = runOptions(args);
  pfrt_program *raw = nullptr;
  check(pfrt_program_load_memory(data.c_str(), data.size(), name.c_str(), &raw),
        "loading the stream program");
  std::unique_ptr<pfrt_program, void (*)(pfrt_program *)> program(raw, pfrt_program_destroy);
  pfrt_compare_result result{};
  callInterruptibly(
      [&] {
        return pfrt_compare(program.get(), &options, static_cast<uint32_t>(repetitions), &result);
      },
      [] {}, "comparing runs with and without fill");
  nb::object out = jsonLoads(pfrt_compare_format(&result, 1));
  out["summary"] = std::string(pfrt_compare_format(&result, 0));
  return out;
}

std::unique_ptr<RunReport> runBytes(nb::bytes data, const std::string &name, const RunArgs &args) {
  pfrt_program *program = nullptr;
  check(pfrt_program_load_memory(data.c_str(), data.size(), name.c_str(), &program),
        "loading the stream program");
  return runLoaded(program, args);
}

std::unique_ptr<RunReport> runFile(const std::string &path, const RunArgs &args) {
  // pfrt reports an unreadable file as PFRT_ERROR_IO without errno; check first so Python
  // gets FileNotFoundError / PermissionError like any file API.
  if (FILE *f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    int errnum = errno;
    throw embed::FileError(
        std::string("cannot open stream program (") + std::strerror(errnum) + ")", path, errnum);
  }
  pfrt_program *program = nullptr;
  check(pfrt_program_load(path.c_str(), &program), "loading the stream program");
  return runLoaded(program, args);
}

pfrt_session_options sessionOptions(const std::string &backend, int64_t worldSize,
                                    double timeScale, int64_t maxDim, const std::string &policy,
                                    bool idle, bool endAtOnce) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  if (backend == "host")
    o.backend = PFRT_BACKEND_HOST;
  else if (backend == "cuda")
    o.backend = PFRT_BACKEND_CUDA;
  else
    throw std::invalid_argument("unknown backend '" + backend + "' (expected host or cuda)");
  if (worldSize < 0)
    throw std::invalid_argument("world_size must be >= 0 (0: not checked)");
  o.world_size = toUint32(worldSize, "world_size");
  checkTimeScale(timeScale);
  o.time_scale = timeScale;
  if (maxDim < 0)
    throw std::invalid_argument("max_dim must be >= 0");
  o.max_dim = toUint32(maxDim, "max_dim");
  if (policy == "bounded")
    o.fill_policy = PFRT_FILL_BOUNDED;
  else if (policy == "whole")
    o.fill_policy = PFRT_FILL_BOUNDED_WHOLE;
  else if (policy == "unbounded")
    o.fill_policy = PFRT_FILL_UNBOUNDED;
  else
    throw std::invalid_argument("unknown fill_policy '" + policy +
                                "' (expected bounded, whole or unbounded)");
  o.fill_idle_priority = idle ? 1 : 0;
  o.host_end_at_once = endAtOnce ? 1 : 0;
  return o;
}

std::unique_ptr<Session> openSession(nb::bytes data, const std::string &name, int64_t rank,
                                     const pfrt_session_options &o) {
  toUint32(rank, "rank");
  pfrt_session *s = nullptr;
  const std::string bytes(data.c_str(), data.size());
  checkWithoutGil(
      [&] {
        return pfrt_session_create_memory(bytes.data(), bytes.size(), name.c_str(),
                                          static_cast<uint32_t>(rank), &o, &s);
      },
      "creating the session");
  return std::make_unique<Session>(s);
}

/// pfrt_run: RunReport, run_bytes, run_file.
void registerRun(nb::module_ &m) {
  nb::class_<RunReport>(m, "RunReport",
                        "What the runtime measured in one pfrt_run (host or CUDA backend). "
                        "Numbers are measured unless their key says planned.")
      .def(
          "report", [](const RunReport &r) { return jsonLoads(r.json()); },
          nb::sig("def report(self) -> dict[str, typing.Any]"),
          "The run report as a dict (the JSON of `pipefill-run --report`, docs/runtime.md).")
      .def("report_json", &RunReport::json, "The run report as JSON text.")
      .def("summary", &RunReport::summary, "The planned-versus-measured summary table.")
      .def("stats", &RunReport::stats, nb::sig("def stats(self) -> dict[str, typing.Any]"),
           "The headline numbers (pfrt_report_get_stats) as a dict; `time_measured` says "
           "whether its times were read from a clock (False: modelled).")
      .def("jobs", &RunReport::jobs, nb::sig("def jobs(self) -> list[dict[str, typing.Any]]"),
           "One dict per fill job (pfrt_report_get_job): samples completed and planned, "
           "checksums, training steps, and iterations_held / samples_held: iterations in "
           "which the job began nothing new because it was two iterations behind, and the "
           "planned samples not begun because of that; samples_in_flight_planned: the plan's "
           "own batches in flight at the run's end.")
      .def(
          "iteration_us",
          [](const RunReport &r) {
            nb::object report = jsonLoads(r.json());
            return nb::module_::import_("numpy").attr("asarray")(report["iteration_us"],
                                                                  "dtype"_a = "float64");
          },
          nb::sig("def iteration_us(self) -> numpy.ndarray"),
          "Measured time of every iteration, microseconds, as a numpy array.")
      .def("save_json", &RunReport::saveJson, "path"_a,
           nb::sig("def save_json(self, path: str | os.PathLike) -> None"),
           "Writes the run report JSON.")
      .def("save_profile", &RunReport::saveProfile, "path"_a,
           nb::sig("def save_profile(self, path: str | os.PathLike) -> None"),
           "Writes the measured profile (text format for .pbtxt) that pipefill.compile("
           "..., profile=path) takes back in.")
      .def("save_trace", &RunReport::saveTrace, "path"_a,
           nb::sig("def save_trace(self, path: str | os.PathLike) -> None"),
           "Writes the run's timeline as a Chrome trace (ui.perfetto.dev, chrome://tracing): a "
           "process per device, a thread per stream and one with the plan; every slice says "
           "whether its time was measured, modelled, emulated or planned. Timestamps are "
           "modelled microseconds (real / time_scale). scripts/trace-svg.py draws one device.");

  auto runArgs = [](const std::string &backend, int64_t iterations, double timeScale, bool fill,
                    bool profile, int64_t stage, int64_t maxDim, const std::string &checkpoint,
                    const std::string &onBadCheckpoint, bool verbose) {
    return RunArgs{backend, iterations, timeScale, fill, profile, stage, maxDim, checkpoint,
                   onBadCheckpoint, verbose};
  };
  m.def(
      "run_bytes",
      [runArgs](nb::bytes program, const std::string &name, const std::string &backend,
                int64_t iterations, double timeScale, bool fill, bool profile, int64_t stage,
                int64_t maxDim, const std::string &checkpoint, const std::string &onBadCheckpoint,
                bool verbose) {
        return runBytes(program, name,
                        runArgs(backend, iterations, timeScale, fill, profile, stage, maxDim,
                                checkpoint, onBadCheckpoint, verbose));
      },
      "program"_a, "name"_a = "<memory>", "backend"_a = "host", "iterations"_a = 0,
      "time_scale"_a = 1.0, "fill"_a = true, "profile"_a = false, "stage"_a = -1,
      "max_dim"_a = 0, "checkpoint"_a = "", "on_bad_checkpoint"_a = "fail", "verbose"_a = false,
      "Runs a StreamProgram held in memory (binary or text protobuf) through pfrt_run.");
  m.def(
      "run_file",
      [runArgs](const std::string &path, const std::string &backend, int64_t iterations,
                double timeScale, bool fill, bool profile, int64_t stage, int64_t maxDim,
                const std::string &checkpoint, const std::string &onBadCheckpoint, bool verbose) {
        return runFile(path, runArgs(backend, iterations, timeScale, fill, profile, stage,
                                     maxDim, checkpoint, onBadCheckpoint, verbose));
      },
      "path"_a, "backend"_a = "host", "iterations"_a = 0, "time_scale"_a = 1.0,
      "fill"_a = true, "profile"_a = false, "stage"_a = -1, "max_dim"_a = 0,
      "checkpoint"_a = "", "on_bad_checkpoint"_a = "fail", "verbose"_a = false,
      "Runs the StreamProgram file at `path` through pfrt_run.");
  m.def(
      "compare_bytes",
      [runArgs](nb::bytes program, const std::string &name, int64_t repetitions,
                const std::string &backend, int64_t iterations, double timeScale, int64_t stage,
                int64_t maxDim, bool verbose) {
        return compareBytes(program, name, repetitions,
                            runArgs(backend, iterations, timeScale, true, false, stage, maxDim,
                                    "", "fail", verbose));
      },
      "program"_a, "name"_a = "<memory>", "repetitions"_a = 3, "backend"_a = "host",
      "iterations"_a = 0, "time_scale"_a = 1.0, "stage"_a = -1, "max_dim"_a = 0,
      "verbose"_a = false, nb::sig("def compare_bytes(program: bytes, name: str = '<memory>', "
                                   "repetitions: int = 3, backend: str = 'host', "
                                   "iterations: int = 0, time_scale: float = 1.0, "
                                   "stage: int = -1, max_dim: int = 0, verbose: bool = False) "
                                   "-> dict[str, typing.Any]"),
      "pfrt_compare on a StreamProgram held in memory: an A/A pair and `repetitions` ABBA blocks "
      "of main-only (A) and main+fill (B) runs; the comparison as a dict (pipefill-run "
      "--compare-json's keys) with its text table under 'summary'.");
}

// The collector sees what a Session holds, its task runners (each holds the user's FillTask),
// so a cycle through them (a task that keeps its session; the package's Session around this
// one) is collected: the session is closed and its worker thread ends.
int sessionTraverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self))
    return 0;
  for (const std::unique_ptr<TaskRunner> &t : nb::inst_ptr<Session>(self)->taskRunners)
    if (t)
      Py_VISIT(t->runner.ptr());
  return 0;
}

int sessionClear(PyObject *self) {
  if (nb::inst_ready(self))
    nb::inst_ptr<Session>(self)->release();
  return 0;
}

PyType_Slot sessionSlots[] = {{Py_tp_traverse, reinterpret_cast<void *>(sessionTraverse)},
                              {Py_tp_clear, reinterpret_cast<void *>(sessionClear)},
                              {0, nullptr}};

/// pfrt_session_*: Session (with its fill tasks, Tasks.cpp), open_session.
void registerSession(nb::module_ &m) {
  auto session = nb::class_<Session>(m, "Session", nb::type_slots(sessionSlots),
                      "One rank's fill, driven by a training loop that owns its schedule "
                      "(pfrt_session_*). Create one with pipefill.Session(plan, rank); use "
                      "`with session.bubble(k): ...` where the plan has bubble k.")
      .def("info", &Session::info, nb::sig("def info(self) -> dict[str, int]"),
           "rank, ranks (the plan's), ops and bubbles (this rank's counts).")
      .def("bubbles", &Session::bubbles,
           nb::sig("def bubbles(self) -> list[dict[str, typing.Any]]"),
           "This rank's bubbles in schedule order: bubble_id, kind, after_op (index into ops(), "
           "-1: before the first), planned_start_us, planned_duration_us, free_bytes, chunks, "
           "planned_fill_us (all planned).")
      .def("ops", &Session::ops, nb::sig("def ops(self) -> list[dict[str, typing.Any]]"),
           "This rank's main work in plan order: kind (forward, backward, ..., send, recv), "
           "microbatch, chunk, peer, tag, bytes, planned_us, planned_start_us.")
      .def("begin", &Session::begin, "bubble"_a, "duration_us"_a = 0.0, "main_stream"_a = 0,
           "pfrt_session_bubble_begin: starts filling bubble `bubble` of this iteration "
           "(deadline: now + its planned duration, or duration_us when > 0). Returns at once. "
           "main_stream: the cudaStream_t the bubble follows, as an integer (CUDA sessions; "
           "0 on the host).")
      .def("begin_unplanned", &Session::beginUnplanned, "duration_us"_a, "main_stream"_a = 0,
           "pfrt_session_unplanned_begin: a bubble the plan did not predict, bounded by "
           "duration_us.")
      .def("wait", &Session::wait,
           "pfrt_session_bubble_wait: blocks until the open bubble has nothing more to start.")
      .def("end", &Session::end, "bubble"_a,
           nb::sig("def end(self, bubble: int) -> dict[str, typing.Any]"),
           "pfrt_session_bubble_end (bubble -1: the unplanned one): no further chunk starts; "
           "waits for the one in flight. Returns chunks_run, chunks_deferred, "
           "samples_completed and the measured fill_us, overrun_us, end_wait_us.")
      .def("iteration_end", &Session::iterationEnd, "pfrt_session_iteration_end.")
      .def("save_checkpoint", &Session::save, "path"_a,
           "Writes the fill progress (pfrt_session_checkpoint_save).")
      .def("load_checkpoint", &Session::load, "path"_a,
           "Resumes from a checkpoint of the same plan and rank.")
      .def("report", &Session::report, nb::sig("def report(self) -> dict[str, typing.Any]"),
           "The session report (pfrt_session_report_json) as a dict.")
      .def("jobs", &Session::jobs, nb::sig("def jobs(self) -> list[dict[str, typing.Any]]"),
           "One dict per fill job: samples, checksum, chunk counts, iterations_held / "
           "samples_held (the job two iterations behind its plan), measured chunk shapes.")
      .def("fill_stream", &Session::fillStream,
           nb::sig("def fill_stream(self) -> tuple[int, int]"),
           "pfrt_session_fill_stream: (the cudaStream_t the worker runs fill on, as an integer; "
           "its GPU), (0, -1) on the host.")
      .def("chunks", &Session::chunks,
           nb::sig("def chunks(self) -> list[dict[str, typing.Any]]"),
           "The last chunks that ran (up to 4096) with their measured times.")
      .def("close", &Session::close, "Ends an open bubble and frees the session.");
  registerTasks(session);
  m.def(
      "open_session",
      [](nb::bytes data, const std::string &name, int64_t rank, int64_t worldSize,
         double timeScale, int64_t maxDim, const std::string &policy, bool idle,
         const std::string &backend, bool endAtOnce) {
        return openSession(
            data, name, rank,
            sessionOptions(backend, worldSize, timeScale, maxDim, policy, idle, endAtOnce));
      },
      "program"_a, "name"_a = "<memory>", "rank"_a = 0, "world_size"_a = 0,
      "time_scale"_a = 1.0, "max_dim"_a = 0, "fill_policy"_a = "bounded",
      "fill_idle_priority"_a = true, "backend"_a = "host", "end_at_once"_a = false,
      "Creates a session for `rank` of a StreamProgram held in memory (pfrt_session_create_memory).");
  m.attr("SESSION_UNPLANNED") = -1;
}
void translateRuntimeException(const std::exception_ptr &p, void *) {
  try {
    std::rethrow_exception(p);
  } catch (const RunFailure &e) {
    callingPython([&] {
      nb::object cls = nb::module_::import_("pipefill._errors").attr("RunError");
      nb::object exc = cls(pyText(e.what()), e.status);
      if (e.bubbleResult)
        exc.attr("bubble_result") = bubbleResultDict(*e.bubbleResult);
      PyErr_SetObject(cls.ptr(), exc.ptr());
    });
  } catch (const embed::FileError &e) {
    nb::object exc = e.path.empty()
                         ? nb::handle(PyExc_OSError)(pyText(e.what()))
                         : nb::handle(PyExc_OSError)(e.errnum, pyText(e.what()),
                                                     nb::steal(PyUnicode_DecodeFSDefaultAndSize(
                                                         e.path.data(),
                                                         static_cast<Py_ssize_t>(e.path.size()))));
    PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
  }
}

} // namespace

void registerRuntime(nb::module_ &m) {
  watchInterpreterExit(); // GilRelease: which threads park at exit
  nb::register_exception_translator(translateRuntimeException);
  registerRun(m);
  registerSession(m);
  m.def("cuda_device_count", &pfrt_cuda_device_count,
        "Number of CUDA devices the runtime sees (0 without a GPU or without the CUDA "
        "backend).");
  m.def(
      "backend_compiled",
      [](const std::string &backend) { return pfrt_backend_compiled(parseBackend(backend)) != 0; },
      "backend"_a, "Whether the backend ('host', 'cuda') is compiled into this module.");
  m.attr("PFRT_API_VERSION") = PFRT_API_VERSION;
}

} // namespace pipefill::py
