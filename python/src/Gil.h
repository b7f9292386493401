// Releasing the GIL around calls that block (runtime calls, compiles) without aborting the
// process at interpreter exit.
#ifndef PIPEFILL_PYTHON_GIL_H
#define PIPEFILL_PYTHON_GIL_H

#include <nanobind/nanobind.h>

#include <cxxabi.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pipefill {
namespace py {

/// Whether the interpreter is shutting down (a thread that takes the GIL then never returns).
inline bool interpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/// The interpreter's main thread (threading.main_thread()), whether the interpreter has begun to
/// exit (an atexit callback: it runs before CPython starts to end daemon threads), and how many
/// other threads are taking the GIL back in a GilRelease right now.
inline std::atomic<unsigned long> mainThreadIdent{0};
inline std::atomic<bool> interpreterExiting{false};
inline std::atomic<int> threadsTakingGil{0};

/// At exit, with the GIL: from now on other threads park instead of taking the GIL back
/// (GilRelease); those already waiting for it get it now, before CPython ends threads (for at
/// most 2 s).
inline void beginInterpreterExit() {
  interpreterExiting = true;
  // Daemon threads still running keep what they refer to (sessions, plans) alive past the
  // exit; nanobind would report those objects as leaked ("likely a reference counting issue").
  namespace nb = nanobind;
  const bool others = nb::len(nb::module_::import_("threading").attr("enumerate")()) > 1;
  if (others)
    nb::set_leak_warnings(false);
  // Those taking the GIL back now, and (20 ms with the GIL free) those past that point: a thread
  // that found its session closed (the sessions close at exit first) is in nanobind's handling
  // of the error, whose cleanup may run Python code and take the GIL again; CPython ending it
  // there unwinds through nanobind's noexcept code and aborts the process ("terminate called
  // after throwing an instance of RunFailure": 2 of 40 exits with polling daemon threads under
  // load). Given the time, it returns to Python and parks at its next call into the module.
  for (int k = 0; k < 2000 && (threadsTakingGil.load() > 0 || (others && k < 20)); ++k) {
    Py_BEGIN_ALLOW_THREADS
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Py_END_ALLOW_THREADS
  }
}

/// Parks this thread until the exiting process ends it (a thread CPython would end: see below).
/// What it still refers to is not freed: nanobind's leak report at exit is turned off.
[[noreturn]] inline void parkForever() {
  nanobind::set_leak_warnings(false);
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

/// Runs `f`, which runs Python code (an import, json.loads, an exception's __init__), from the
/// module's C++. At interpreter exit CPython ends a daemon thread whenever it takes the GIL back,
/// also between two bytecodes of `f` (pthread_exit, a forced unwind); the unwind would reach
/// nanobind's catch-all, which does not rethrow it, and abort the whole process. The thread parks
/// instead, inside the handler (it holds no GIL then): the process is exiting.
template <class F> decltype(auto) callingPython(F &&f) {
  try {
    return f();
  } catch (abi::__forced_unwind &) {
    parkForever();
  }
}

/// Called when the module is imported.
inline void watchInterpreterExit() {
  namespace nb = nanobind;
  mainThreadIdent = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  nb::module_::import_("atexit").attr("register")(nb::cpp_function(&beginInterpreterExit));
}

/// Releases the GIL for its scope, as nb::gil_scoped_release, except at interpreter exit: there
/// CPython ends a daemon thread that takes the GIL back (pthread_exit, a forced unwind), and the
/// unwind would go through this destructor, which is noexcept, and through nanobind's catch-all:
/// the whole process would abort ("terminate called without an active exception", exit 134).
/// A thread other than the main one parks here instead once the interpreter has begun to exit,
/// without the GIL, until the exiting process ends it; one that was already waiting for the GIL
/// gets it before CPython ends threads (beginInterpreterExit waits for it), and one that CPython
/// ends all the same while it takes the GIL back parks there (callingPython).
class GilRelease {
public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  ~GilRelease() {
    const bool main = PyThread_get_thread_ident() == mainThreadIdent.load();
    if (!main) {
      threadsTakingGil.fetch_add(1); // before the check: beginInterpreterExit sees one or other
      if (interpreterExiting.load() || interpreterFinalizing()) {
        threadsTakingGil.fetch_sub(1);
        parkForever();
      }
    }
    try {
      PyEval_RestoreThread(state_); // may end this thread at exit: see callingPython
    } catch (abi::__forced_unwind &) {
      parkForever();
    }
    if (!main)
      threadsTakingGil.fetch_sub(1);
  }
  GilRelease(const GilRelease &) = delete;
  GilRelease &operator=(const GilRelease &) = delete;

private:
  PyThreadState *state_;
};

} // namespace py
} // namespace pipefill

#endif // PIPEFILL_PYTHON_GIL_H
