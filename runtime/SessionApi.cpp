// The C entry points of sessions (pfrt_session_* in pfrt.h): handles checked against the live
// set, exceptions turned into a status and pfrt_last_error().
#include "runtime/Session.h"
#include "runtime/SessionImpl.h"

#include "runtime/ProgramIO.h"
#include "runtime/pfrt.h"

#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>

// The opaque handle.
struct pfrt_session {
  std::unique_ptr<pfrt::session::Session> impl;
};

namespace {

using pfrt::Error;

// Live sessions: a call on a destroyed (or never created) handle is an error, not a crash.
std::mutex liveMutex;
std::set<const pfrt_session *> &live() {
  static std::set<const pfrt_session *> set;
  return set;
}

template <class F> pfrt_status guard(F &&f) {
  try {
    f();
    return PFRT_OK;
  } catch (const Error &e) {
    pfrt::setLastError(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    pfrt::setLastError("out of memory");
    return PFRT_ERROR_INTERNAL;
  } catch (const std::exception &e) {
    pfrt::setLastError(std::string("internal error: ") + e.what());
    return PFRT_ERROR_INTERNAL;
  } catch (...) {
    pfrt::setLastError("internal error: unknown exception");
    return PFRT_ERROR_INTERNAL;
  }
}

pfrt::session::Session &sess(const pfrt_session *s) {
  if (!s)
    pfrt::session::invalid("session is NULL");
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (!live().count(s))
      pfrt::session::invalid("session is not a live session (destroyed, or not made by "
                    "pfrt_session_create)");
  }
  return *s->impl;
}

// A read call: a live session and a non-NULL `out` (named `what` in the error), set to f(session).
template <class T, class F>
pfrt_status read(const pfrt_session *session, T *out, const char *what, F &&f) {
  return guard([&] {
    const pfrt::session::Session &s = sess(session);
    if (!out)
      pfrt::session::invalid(std::string(what) + " is NULL");
    *out = f(s);
  });
}

void create(const pfrt::Program &program, uint32_t rank, const pfrt_session_options *options,
            pfrt_session **out) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  if (options)
    o = *options;
  auto s = std::make_unique<pfrt_session>();
  s->impl = std::make_unique<pfrt::session::Session>(program, rank, o);
  std::lock_guard<std::mutex> lock(liveMutex);
  live().insert(s.get());
  *out = s.release();
}

struct ProgramOwner {
  pfrt_program *p = nullptr;
  ~ProgramOwner() { pfrt_program_destroy(p); }
};

} // namespace

extern "C" {

void pfrt_session_options_init(pfrt_session_options *options) {
  if (!options)
    return;
  *options = pfrt_session_options{};
  options->backend = PFRT_BACKEND_AUTO;
  options->time_scale = 1.0;
  options->fill_policy = PFRT_FILL_BOUNDED;
  options->fill_idle_priority = 1;
}

pfrt_status pfrt_session_create(const pfrt_program *program, uint32_t rank,
                                const pfrt_session_options *options, pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::session::invalid("out_session is NULL");
    *out = nullptr;
    if (!program)
      pfrt::session::invalid("program is NULL");
    create(program->program, rank, options, out);
  });
}

pfrt_status pfrt_session_create_file(const char *path, uint32_t rank,
                                     const pfrt_session_options *options, pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::session::invalid("out_session is NULL");
    *out = nullptr;
    if (!path || !*path)
      pfrt::session::invalid("program path is empty");
    ProgramOwner p;
    p.p = pfrt::loadProgram(pfrt::readFile(path), path);
    create(p.p->program, rank, options, out);
  });
}

pfrt_status pfrt_session_create_memory(const void *data, size_t size, const char *source,
                                       uint32_t rank, const pfrt_session_options *options,
                                       pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::session::invalid("out_session is NULL");
    *out = nullptr;
    if (!data && size)
      pfrt::session::invalid("data is NULL");
    ProgramOwner p;
    p.p = pfrt::loadProgram(std::string(static_cast<const char *>(data), size),
                            source ? source : "<memory>");
    create(p.p->program, rank, options, out);
  });
}

void pfrt_session_destroy(pfrt_session *session) {
  if (!session)
    return;
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (!live().count(session))
      return; // not live: destroyed twice, or never ours
    // From a fill task's step: the worker cannot join itself. Refused (the session stays live);
    // the task fails when the step returns and the next bubble_wait / bubble_end reports it.
    if (session->impl->refuseDestroyFromStep())
      return;
    live().erase(session);
  }
  delete session;
}

pfrt_status pfrt_session_rank_info(const pfrt_session *session, uint32_t *rank, uint32_t *ranks,
                                   uint32_t *ops, uint32_t *bubbles) {
  return guard([&] {
    const pfrt::session::Session &s = sess(session);
    if (rank)
      *rank = s.rank();
    if (ranks)
      *ranks = s.ranks();
    if (ops)
      *ops = static_cast<uint32_t>(s.ops().size());
    if (bubbles)
      *bubbles = static_cast<uint32_t>(s.bubbles().size());
  });
}

pfrt_status pfrt_session_op_get(const pfrt_session *session, uint32_t index,
                                pfrt_session_op *out) {
  return read(session, out, "out_op", [&](const pfrt::session::Session &s) {
    if (index >= s.ops().size())
      pfrt::session::invalid("op " + std::to_string(index) + " does not exist (rank " +
                    std::to_string(s.rank()) + " has " + std::to_string(s.ops().size()) +
                    " main ops)");
    return s.ops()[index];
  });
}

pfrt_status pfrt_session_bubble_get(const pfrt_session *session, uint32_t index,
                                    pfrt_session_bubble *out) {
  return read(session, out, "out_bubble", [&](const pfrt::session::Session &s) {
    if (index >= s.bubbles().size())
      pfrt::session::invalid("bubble index " + std::to_string(index) + " does not exist (rank " +
                    std::to_string(s.rank()) + " has " + std::to_string(s.bubbles().size()) +
                    " bubbles)");
    return s.bubbles()[index].desc;
  });
}

pfrt_status pfrt_session_bubble_begin(pfrt_session *session, uint32_t bubble, void *main_stream,
                                      double duration_us) {
  return guard([&] { sess(session).begin(bubble, main_stream, duration_us); });
}

pfrt_status pfrt_session_unplanned_begin(pfrt_session *session, double duration_us,
                                         void *main_stream) {
  return guard([&] { sess(session).beginUnplanned(duration_us, main_stream); });
}

pfrt_status pfrt_session_bubble_end(pfrt_session *session, uint32_t bubble,
                                    pfrt_session_bubble_result *out) {
  return guard([&] {
    pfrt_session_bubble_result r{};
    try {
      sess(session).end(bubble, r);
    } catch (...) {
      if (out)
        *out = r; // zeros, or the ended bubble's numbers when a fill task failed in it
      throw;
    }
    if (out)
      *out = r;
  });
}

pfrt_status pfrt_session_bubble_wait(pfrt_session *session) {
  return guard([&] { sess(session).wait(); });
}

pfrt_status pfrt_session_iteration_end(pfrt_session *session) {
  return guard([&] { sess(session).iterationEnd(); });
}

pfrt_status pfrt_session_checkpoint_save(pfrt_session *session, const char *path) {
  return guard([&] { sess(session).saveCheckpoint(path ? path : ""); });
}

pfrt_status pfrt_session_checkpoint_load(pfrt_session *session, const char *path) {
  return guard([&] { sess(session).loadCheckpoint(path ? path : ""); });
}

pfrt_status pfrt_session_get_stats(const pfrt_session *session, pfrt_session_stats *out) {
  return read(session, out, "out_stats", [](const pfrt::session::Session &s) { return s.stats(); });
}

pfrt_status pfrt_session_chunk_count(const pfrt_session *session, uint32_t *out) {
  return read(session, out, "out_count",
              [](const pfrt::session::Session &s) { return static_cast<uint32_t>(s.chunkCount()); });
}

pfrt_status pfrt_session_chunk_get(const pfrt_session *session, uint32_t index,
                                   pfrt_session_chunk *out) {
  return read(session, out, "out_chunk",
              [&](const pfrt::session::Session &s) { return s.chunkAt(index); });
}

pfrt_status pfrt_session_get_job(const pfrt_session *session, uint32_t job,
                                 pfrt_report_job *out) {
  return read(session, out, "out_job", [&](const pfrt::session::Session &s) { return s.job(job); });
}

pfrt_status pfrt_session_task_add(pfrt_session *session, const pfrt_session_task_desc *desc,
                                  uint32_t *out_task) {
  return guard([&] {
    pfrt::session::Session &s = sess(session);
    if (!desc)
      pfrt::session::invalid("pfrt_session_task_add: desc is NULL");
    const uint32_t t = s.addTask(*desc);
    if (out_task)
      *out_task = t;
  });
}

pfrt_status pfrt_session_fill_stream(const pfrt_session *session, void **out_stream,
                                     int *out_gpu) {
  return guard([&] {
    if (!out_stream)
      pfrt::session::invalid("pfrt_session_fill_stream: out_stream is NULL");
    void *stream = nullptr;
    int gpu = -1;
    sess(session).fillStream(stream, gpu);
    *out_stream = stream;
    if (out_gpu)
      *out_gpu = gpu;
  });
}

pfrt_status pfrt_session_task_count(const pfrt_session *session, uint32_t *out) {
  return read(session, out, "out_count", [](const pfrt::session::Session &s) { return s.taskCount(); });
}

pfrt_status pfrt_session_task_get(const pfrt_session *session, uint32_t task,
                                  pfrt_session_task_stats *out) {
  return read(session, out, "out_stats",
              [&](const pfrt::session::Session &s) { return s.taskStats(task); });
}

pfrt_status pfrt_session_task_state_set(pfrt_session *session, uint32_t task, const void *data,
                                        size_t size) {
  return guard([&] { sess(session).setTaskState(task, data, size); });
}

pfrt_status pfrt_session_task_state_get(const pfrt_session *session, uint32_t task,
                                        const void **out_data, size_t *out_size) {
  return guard([&] {
    const pfrt::session::Session &s = sess(session);
    if (!out_data || !out_size)
      pfrt::session::invalid("pfrt_session_task_state_get: out_data or out_size is NULL");
    const std::string &state = s.taskState(task);
    *out_data = state.data();
    *out_size = state.size();
  });
}

const char *pfrt_session_report_json(pfrt_session *session) {
  const char *out = nullptr;
  guard([&] { out = sess(session).reportJson().c_str(); });
  return out;
}

} // extern "C"

