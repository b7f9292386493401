//===- Session.h - pipefill._core and _rt: the session binding --------===//
//
// The binding of a pfrt_session (one rank's fill, driven by the caller's loop)
// and the error helpers of the runtime half, shared by Runtime.cpp and Tasks.cpp
// (fill tasks). Binds the public C API of runtime/pfrt.h only.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PYTHON_SESSION_H
#define PIPEFILL_PYTHON_SESSION_H

#include "python/src/FileError.h"
#include "python/src/Gil.h"
#include "runtime/Program.h"
#include "runtime/pfrt.h"

#include <nanobind/nanobind.h>

#include <cstring>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pipefill::py {

namespace nb = nanobind;

/// A pfrt call failed; `status` is pfrt_status_name's text. A bubble_end that failed (a fill
/// task failed in the bubble) still ended the bubble: its numbers ride along (RunError's
/// `bubble_result`).
struct RunFailure : std::runtime_error {
  RunFailure(const std::string &what, std::string status)
      : std::runtime_error(what), status(std::move(status)) {}
  std::string status;
  std::optional<pfrt_session_bubble_result> bubbleResult;
};

/// What pfrt_session_bubble_end returned, as Session.end's dict.
inline nanobind::dict bubbleResultDict(const pfrt_session_bubble_result &r) {
  nanobind::dict d;
  d["chunks_run"] = r.chunks_run;
  d["chunks_deferred"] = r.chunks_deferred;
  d["samples_completed"] = r.samples_completed;
  d["fill_us"] = r.fill_us;
  d["overrun_us"] = r.overrun_us;
  d["end_wait_us"] = r.end_wait_us;
  d["task_steps"] = r.task_steps;
  d["task_samples"] = r.task_samples;
  d["task_us"] = r.task_us;
  return d;
}

/// The runtime's message with the C session calls it names replaced by the Session methods a
/// Python user called (pfrt_session_bubble_end(PFRT_SESSION_UNPLANNED) -> Session.end(-1)).
inline std::string pythonNames(std::string text) {
  static const std::pair<const char *, const char *> kNames[] = {
      {"pfrt_session_bubble_end(PFRT_SESSION_UNPLANNED)", "Session.end(-1)"},
      {"pfrt_session_bubble_begin", "Session.begin"},
      {"pfrt_session_bubble_end", "Session.end"},
      {"pfrt_session_bubble_wait", "Session.wait"},
      {"pfrt_session_unplanned_begin", "Session.unplanned"},
      {"pfrt_session_iteration_end", "Session.iteration_end"},
      {"pfrt_session_checkpoint_save", "Session.checkpoint_save"},
      {"pfrt_session_checkpoint_load", "Session.checkpoint_load"},
      {"pfrt_session_task_add", "Session.add_task"},
      {"pfrt_session_task_get", "Session.tasks"},
      {"pfrt_session_task_state_set", "Session.task_state_set"},
      {"pfrt_session_report_json", "Session.report"},
      {"pfrt_session_get_job", "Session.jobs"},
      {"pfrt_session_fill_stream", "Session.fill_stream"},
      {"pfrt_session_destroy", "Session.close"},
      {"PFRT_SESSION_UNPLANNED", "-1 (the unplanned bubble)"},
      {"main_stream must be NULL on the host backend (a cudaStream_t is for CUDA sessions)",
       "stream must be None on the host backend (a CUDA stream is for CUDA sessions)"},
      {"main_stream", "stream"},
  };
  for (const auto &[c, py] : kNames)
    for (size_t at = text.find(c); at != std::string::npos; at = text.find(c, at))
      text.replace(at, std::strlen(c), py);
  return text;
}

/// Throws the error of a failed pfrt call: `what` is the call, `error` pfrt_last_error()'s text.
[[noreturn]] inline void fail(pfrt_status status, const std::string &what,
                              const std::string &error) {
  std::string message = what + ": " + pythonNames(error);
  if (status == PFRT_ERROR_IO)
    throw pipefill::embed::FileError(message, "", 0);
  throw RunFailure(message, pfrt_status_name(status));
}

/// `value` as the 32-bit unsigned integer the C API takes; ValueError naming `name` when it is
/// negative or does not fit (it would be truncated silently otherwise).
inline uint32_t toUint32(int64_t value, const char *name) {
  if (value < 0 || value > 0xFFFFFFFFll)
    throw std::invalid_argument(std::string(name) + " must be >= 0 and < 2**32 (got " +
                                std::to_string(value) + ")");
  return static_cast<uint32_t>(value);
}

inline void check(pfrt_status status, const std::string &what) {
  if (status != PFRT_OK)
    fail(status, what, pfrt_last_error());
}

/// Runs `call` (a pfrt call returning a status) with the GIL released, then checks its status:
/// for every call that can wait for a session's worker thread, which takes the GIL to run a
/// Python fill task's step (Tasks.cpp).
template <class Call> void checkWithoutGil(Call &&call, const std::string &what) {
  pfrt_status status;
  {
    GilRelease release;
    status = call();
  }
  check(status, what);
}

inline nb::object jsonLoads(const std::string &text) {
  return callingPython(
      [&] { return nb::module_::import_("json").attr("loads")(nb::str(text.data(), text.size())); });
}

class Session;

/// One fill task of a session: the Python callable its steps call (the package's _TaskRunner)
/// and the session; the C task's user_data (Tasks.cpp).
struct TaskRunner {
  Session *session;
  nb::object runner;
};

/// The session whose Python fill task step runs on this thread (its worker thread, during a
/// step; Tasks.cpp), else null.
inline thread_local const Session *stepSession = nullptr;

/// Owns one pfrt_session (one rank's fill, driven by the caller's loop).
///
/// Calls of one pfrt_session must not overlap (pfrt.h). Python threads may share a Session, so
/// every call takes the session's turn (callMutex) first: a second thread waits for it, without
/// the GIL (a step that the first one waits for needs it), instead of racing the first; a close
/// waits for the call in progress, and calls after it find the session closed. A fill task's step
/// of this session, on its worker thread while the bubble's caller holds the turn, goes straight
/// through: the runtime refuses what a step may not call.
class Session {
public:
  explicit Session(pfrt_session *session) : session(session) {}
  ~Session() { release(); }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Frees the session with the GIL released (its worker may be running a Python fill task's
  /// step, which needs the GIL to finish) once a call of another thread has returned, then drops
  /// the task objects (with the GIL). A step of this session cannot close it (the worker would
  /// wait for itself): RunFailure.
  void close() {
    if (!session.load())
      return;
    if (stepSession == this)
      throw RunFailure("close called from a fill task's step on the session's worker thread: a "
                       "step cannot close its own session (close it from the thread that runs "
                       "the bubbles)",
                       "PFRT_ERROR_INVALID_ARGUMENT");
    {
      GilRelease release;
      std::lock_guard<std::mutex> turn(callMutex);
      if (pfrt_session *s = session.exchange(nullptr))
        pfrt_session_destroy(s);
    }
    taskRunners.clear();
  }

  /// Runs `fn(session)` (a pfrt call returning a status) in this session's turn with the GIL
  /// released, then checks its status (RunFailure naming `what`; "the session is closed" if it
  /// was closed first).
  template <class Call> void call(Call &&fn, const std::string &what) const {
    pfrt_status status = PFRT_OK;
    bool closed = false;
    {
      GilRelease release;
      std::unique_lock<std::mutex> turn(callMutex, std::defer_lock);
      if (stepSession != this)
        turn.lock();
      pfrt_session *s = session.load();
      closed = s == nullptr;
      if (!closed)
        status = fn(s);
    }
    if (closed)
      throw RunFailure("the session is closed", "PFRT_ERROR_INVALID_ARGUMENT");
    check(status, what);
  }

  /// Frees the session where nobody can be told of an error: the destructor and the garbage
  /// collector (tp_clear). As close(), except on the session's own worker thread (a step that
  /// drops the last reference to its session, or the collector running inside a step), where
  /// the session cannot be freed before the step returns: a helper thread frees it then, and
  /// drops the task objects with the GIL (or leaves them, if the interpreter is exiting).
  void release() noexcept {
    if (stepSession != this) {
      close();
      return;
    }
    pfrt_session *s = session.exchange(nullptr);
    auto *runners = new std::vector<std::unique_ptr<TaskRunner>>(std::move(taskRunners));
    taskRunners.clear();
    std::thread([s, runners] {
      pfrt_session_destroy(s); // waits until the step has returned and the worker has stopped
      if (interpreterFinalizing())
        return; // taking the GIL now would never return
      nb::gil_scoped_acquire gil;
      delete runners;
    }).detach();
  }

  nb::dict info() const {
    uint32_t rank = 0, ranks = 0, ops = 0, bubbles = 0;
    call([&](pfrt_session *s) { return pfrt_session_rank_info(s, &rank, &ranks, &ops, &bubbles); },
         "session");
    nb::dict d;
    d["rank"] = rank;
    d["ranks"] = ranks;
    d["ops"] = ops;
    d["bubbles"] = bubbles;
    return d;
  }

  nb::list bubbles() const {
    uint32_t n = 0;
    call([&](pfrt_session *s) { return pfrt_session_rank_info(s, nullptr, nullptr, nullptr, &n); },
         "session");
    nb::list out;
    for (uint32_t k = 0; k < n; ++k) {
      pfrt_session_bubble b{};
      call([&](pfrt_session *s) { return pfrt_session_bubble_get(s, k, &b); }, "session");
      nb::dict d;
      d["bubble_id"] = b.bubble_id;
      d["kind"] = pfrt::bubbleKindName(b.kind);
      d["after_op"] = b.after_op;
      d["planned_start_us"] = b.planned_start_us;
      d["planned_duration_us"] = b.planned_duration_us;
      d["free_bytes"] = b.free_bytes;
      d["chunks"] = b.chunks;
      d["planned_fill_us"] = b.planned_fill_us;
      out.append(d);
    }
    return out;
  }

  nb::list ops() const {
    uint32_t n = 0;
    call([&](pfrt_session *s) { return pfrt_session_rank_info(s, nullptr, nullptr, &n, nullptr); },
         "session");
    nb::list out;
    for (uint32_t i = 0; i < n; ++i) {
      pfrt_session_op o{};
      call([&](pfrt_session *s) { return pfrt_session_op_get(s, i, &o); }, "session");
      nb::dict d;
      d["kind"] = o.kind == PFRT_SESSION_OP_COMPUTE ? pfrt::computeKindName(o.compute)
                  : o.kind == PFRT_SESSION_OP_SEND  ? "send"
                                                    : "recv";
      d["microbatch"] = o.microbatch;
      d["chunk"] = o.chunk;
      d["peer"] = o.peer;
      d["tag"] = o.tag;
      d["bytes"] = o.bytes;
      d["planned_us"] = o.planned_us;
      d["planned_start_us"] = o.planned_start_us;
      out.append(d);
    }
    return out;
  }

  // mainStream: the framework's cudaStream_t as an integer (CUDA sessions; 0 on the host).
  // int64_t, not uint32_t: nanobind's refusal of -1 or 2**32 would be a TypeError about types.
  void begin(int64_t bubble, double durationUs, uintptr_t mainStream) {
    if (bubble == -1)
      throw std::invalid_argument("bubble -1 is the unplanned bubble: begin it with "
                                  "unplanned(duration_us)");
    if (bubble < 0 || bubble >= static_cast<int64_t>(PFRT_SESSION_UNPLANNED))
      throw std::invalid_argument("bubble must be a bubble id (>= 0 and < 2**32 - 1), got " +
                                  std::to_string(bubble));
    const uint32_t id = static_cast<uint32_t>(bubble);
    void *stream = reinterpret_cast<void *>(mainStream);
    call([&](pfrt_session *s) { return pfrt_session_bubble_begin(s, id, stream, durationUs); },
         "bubble_begin");
  }
  void beginUnplanned(double durationUs, uintptr_t mainStream) {
    void *stream = reinterpret_cast<void *>(mainStream);
    call([&](pfrt_session *s) { return pfrt_session_unplanned_begin(s, durationUs, stream); },
         "unplanned_begin");
  }
  void wait() {
    call([&](pfrt_session *s) { return pfrt_session_bubble_wait(s); }, "bubble_wait");
  }
  nb::dict end(int64_t bubble) {
    pfrt_session_bubble_result r{};
    if (bubble < -1 || bubble >= static_cast<int64_t>(PFRT_SESSION_UNPLANNED))
      throw std::invalid_argument("bubble must be a bubble id (>= 0 and < 2**32 - 1) or -1 (the "
                                  "unplanned bubble), got " + std::to_string(bubble));
    const uint32_t id = bubble < 0 ? PFRT_SESSION_UNPLANNED : static_cast<uint32_t>(bubble);
    try {
      call([&](pfrt_session *s) { return pfrt_session_bubble_end(s, id, &r); }, "bubble_end");
    } catch (RunFailure &e) {
      e.bubbleResult = r; // zeros, or the ended bubble's numbers when a fill task failed in it
      throw;
    }
    return bubbleResultDict(r);
  }
  // The calls below may wait for the worker on a CUDA session (they read what it counts); like
  // every call they run without the GIL (call).
  void iterationEnd() {
    call([&](pfrt_session *s) { return pfrt_session_iteration_end(s); }, "iteration_end");
  }
  void save(const std::filesystem::path &path) {
    call([&](pfrt_session *s) { return pfrt_session_checkpoint_save(s, path.c_str()); },
         "checkpoint_save");
  }
  void load(const std::filesystem::path &path) {
    call([&](pfrt_session *s) { return pfrt_session_checkpoint_load(s, path.c_str()); },
         "checkpoint_load");
  }
  nb::object report() { return jsonLoads(reportJson()); }
  /// (stream, gpu): the CUDA stream the worker runs fill on, as an integer, and its GPU;
  /// (0, -1) on the host (pfrt_session_fill_stream).
  nb::tuple fillStream() const {
    void *stream = nullptr;
    int gpu = -1;
    call([&](pfrt_session *s) { return pfrt_session_fill_stream(s, &stream, &gpu); },
         "fill_stream");
    return nb::make_tuple(reinterpret_cast<uintptr_t>(stream), gpu);
  }
  nb::list chunks() const {
    uint32_t n = 0;
    call([&](pfrt_session *s) { return pfrt_session_chunk_count(s, &n); }, "session");
    nb::list out;
    for (uint32_t i = 0; i < n; ++i) {
      pfrt_session_chunk c{};
      call([&](pfrt_session *s) { return pfrt_session_chunk_get(s, i, &c); }, "session");
      nb::dict d;
      d["job"] = c.job;
      if (c.bubble_id == PFRT_SESSION_UNPLANNED)
        d["bubble_id"] = nb::none();
      else
        d["bubble_id"] = c.bubble_id;
      d["iteration"] = c.iteration;
      d["layer_begin"] = c.layer_begin;
      d["layer_end"] = c.layer_end;
      d["batch"] = c.batch;
      d["sample_begin"] = c.sample_begin;
      d["deferred"] = c.deferred != 0;
      d["planned_us"] = c.planned_us;
      d["predicted_us"] = c.predicted_us;
      d["admitted_us"] = c.admitted_us;
      d["start_us"] = c.start_us;
      d["end_us"] = c.end_us;
      d["deadline_us"] = c.deadline_us;
      out.append(d);
    }
    return out;
  }
  nb::list jobs() const {
    nb::object report = jsonLoads(reportJson());
    return nb::list(report["jobs"]);
  }

private:
  std::string reportJson() const {
    std::string json;
    call(
        [&](pfrt_session *s) {
          const char *text = pfrt_session_report_json(s); // the session's buffer: copied in turn
          if (!text)
            return PFRT_ERROR_INTERNAL;
          json = text;
          return PFRT_OK;
        },
        "report");
    return json;
  }

  std::atomic<pfrt_session *> session;
  mutable std::mutex callMutex; // the session's turn (see the class comment)

public:
  /// The session's fill tasks (python/src/Tasks.cpp), by task id: the C tasks hold pointers to
  /// them.
  std::vector<std::unique_ptr<TaskRunner>> taskRunners;
};

/// Adds the fill task methods (task_add, task_get, task_state_set/get) to the bound Session.
void registerTasks(nb::class_<Session> &session);

} // namespace pipefill::py

#endif // PIPEFILL_PYTHON_SESSION_H
