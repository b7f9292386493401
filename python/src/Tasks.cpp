//===- Tasks.cpp - pipefill._core: fill tasks of a session ---------------===//
//
// Binds pfrt_session_task_* (runtime/pfrt.h): a Python callable becomes a fill
// task whose steps the session's worker thread runs in bubbles. The step runs
// on that thread, so it takes the GIL there; every binding that can wait for
// the worker (bubble_end, bubble_wait, close) releases the GIL (Session.h,
// Module.cpp) or the two would deadlock. The callable is the package's
// _TaskRunner (python/pipefill/_tasks.py): it calls FillTask.step(), keeps any
// exception for the bubble's exit to raise, and returns the samples done, or -1
// after an exception.
//
//===----------------------------------------------------------------------===//
#include "python/src/Session.h"

#include <nanobind/stl/string.h>

#include <cxxabi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace pipefill::py {
namespace {

/// One step, with the GIL held.
pfrt_status stepWithGil(const TaskRunner &task, uint64_t *outSamples) {
  // What the step calls knows it runs on its session's worker (Session::close refuses).
  struct StepScope {
    const Session *outer = stepSession;
    explicit StepScope(const Session *s) { stepSession = s; }
    ~StepScope() { stepSession = outer; }
  } scope(task.session);
  try {
    nb::object r = task.runner();
    const int64_t n = nb::cast<int64_t>(r);
    if (n < 0)
      return PFRT_ERROR_INTERNAL; // the runner caught an exception (it raises at the bubble end)
    *outSamples = static_cast<uint64_t>(n);
    return PFRT_OK;
  } catch (nb::python_error &e) {
    // The runner itself failed (it catches the task's exceptions): report it as unraisable.
    e.discard_as_unraisable("pipefill fill task runner");
    return PFRT_ERROR_INTERNAL;
  } catch (abi::__forced_unwind &) {
    throw; // the thread is ending (below)
  } catch (...) {
    return PFRT_ERROR_INTERNAL;
  }
}

/// pfrt_session_task_step_fn for a TaskRunner (Session::taskRunners owns it).
///
/// The interpreter may be exiting with a bubble open (a session nobody closed): a thread that
/// takes the GIL then is ended by CPython (pthread_exit, a forced unwind). So no step starts once
/// finalization has begun, and a forced unwind (finalization began while the step waited for
/// the GIL) goes through untouched: swallowing it aborts the process, and releasing a GIL the
/// thread never got is a fatal error, so the GIL is taken and released by hand, not by a guard.
pfrt_status pythonStep(void *user, uint64_t *outSamples) {
  const TaskRunner &task = *static_cast<const TaskRunner *>(user);
  if (interpreterFinalizing())
    return PFRT_ERROR_UNAVAILABLE; // the step never runs; nobody is left to report it to
  const PyGILState_STATE gil = PyGILState_Ensure();
  const pfrt_status status = stepWithGil(task, outSamples);
  PyGILState_Release(gil);
  return status;
}

nb::dict taskStats(const pfrt_session_task_stats &t) {
  nb::dict d;
  d["name"] = t.name;
  d["step_us"] = t.step_us;
  d["memory_bytes"] = t.memory_bytes;
  d["max_steps"] = t.max_steps;
  d["steps"] = t.steps;
  d["samples"] = t.samples;
  d["steps_this_run"] = t.steps_this_run;
  d["samples_this_run"] = t.samples_this_run;
  d["measured_us_p50"] = t.measured_us_p50;
  d["measured_us_p90"] = t.measured_us_p90;
  d["measured_us_max"] = t.measured_us_max;
  d["measured_us_mean"] = t.measured_us_mean;
  d["predicted_us"] = t.predicted_us;
  d["task_us"] = t.task_us;
  d["skipped_no_fit"] = t.skipped_no_fit;
  d["skipped_memory"] = t.skipped_memory;
  d["overruns"] = t.overruns;
  d["overrun_us"] = t.overrun_us;
  d["done"] = t.done != 0;
  d["failed"] = t.failed != 0;
  d["error_status"] = pfrt_status_name(t.error_status);
  return d;
}

uint32_t taskId(int64_t task) {
  if (task < 0 || task > 0xFFFFFFFFll)
    throw RunFailure("task " + std::to_string(task) + " does not exist",
                     "PFRT_ERROR_INVALID_ARGUMENT");
  return static_cast<uint32_t>(task);
}

} // namespace

void registerTasks(nb::class_<Session> &session) {
  session
      .def(
          "task_add",
          [](Session &s, const std::string &name, nb::object runner, double stepUs,
             int64_t memoryBytes, int64_t maxSteps) {
            if (!PyCallable_Check(runner.ptr()))
              throw nb::type_error("the task runner must be callable");
            // The C API takes the name as a C string: a NUL would cut it short silently.
            if (const size_t nul = name.find('\0'); nul != std::string::npos)
              throw nb::value_error(("the fill task name contains a NUL character (at index " +
                                     std::to_string(nul) + "): names are C strings")
                                        .c_str());
            if (memoryBytes < 0)
              throw nb::value_error("memory_bytes must be >= 0");
            if (maxSteps < 0)
              throw nb::value_error("max_steps must be >= 0 (0: no limit)");
            auto owned = std::make_unique<TaskRunner>(TaskRunner{&s, std::move(runner)});
            pfrt_session_task_desc d{};
            d.name = name.c_str();
            d.step = pythonStep;
            d.user_data = owned.get();
            d.step_us = stepUs;
            d.memory_bytes = static_cast<uint64_t>(memoryBytes);
            d.max_steps = static_cast<uint64_t>(maxSteps);
            uint32_t id = 0;
            // Without the GIL: on a CUDA session the call waits for the worker, which may be
            // running another task's Python step.
            s.call([&](pfrt_session *ps) { return pfrt_session_task_add(ps, &d, &id); },
                   "task_add");
            if (s.taskRunners.size() <= id)
              s.taskRunners.resize(id + 1);
            s.taskRunners[id] = std::move(owned);
            return id;
          },
          "name"_a, "runner"_a, "step_us"_a, "memory_bytes"_a = 0, "max_steps"_a = 0,
          "pfrt_session_task_add: registers `runner` (a callable returning the samples one step "
          "did, or -1 after an exception it keeps) as a fill task. Returns its id.")
      .def(
          "task_count",
          [](const Session &s) {
            uint32_t n = 0;
            s.call([&](pfrt_session *ps) { return pfrt_session_task_count(ps, &n); },
                   "task_count");
            return n;
          },
          "Number of fill tasks.")
      .def(
          "task_get",
          [](const Session &s, int64_t task) {
            pfrt_session_task_stats t{};
            const uint32_t id = taskId(task);
            s.call([&](pfrt_session *ps) { return pfrt_session_task_get(ps, id, &t); },
                   "task_get");
            return taskStats(t);
          },
          "task"_a, nb::sig("def task_get(self, task: int) -> dict[str, typing.Any]"),
          "pfrt_session_task_get: steps, samples, measured step times (p50, p90, max, mean), "
          "predicted_us, skips, overruns of one task.")
      .def(
          "task_state_set",
          [](Session &s, int64_t task, nb::bytes state) {
            const uint32_t id = taskId(task);
            const char *data = state.c_str();
            const size_t size = state.size();
            s.call([&](pfrt_session *ps) { return pfrt_session_task_state_set(ps, id, data, size); },
                   "task_state_set");
          },
          "task"_a, "state"_a,
          "Bytes saved with the task in the next checkpoint (pfrt_session_task_state_set).")
      .def(
          "task_state_get",
          [](const Session &s, int64_t task) {
            const void *data = nullptr;
            size_t size = 0;
            const uint32_t id = taskId(task);
            s.call([&](pfrt_session *ps) { return pfrt_session_task_state_get(ps, id, &data, &size); },
                   "task_state_get");
            return nb::bytes(static_cast<const char *>(data), size);
          },
          "task"_a, "The task's bytes from the last checkpoint_load (b'' if none).");
}

} // namespace pipefill::py
