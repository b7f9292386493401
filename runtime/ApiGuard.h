// The C API's boundary, shared by its two files (ProgramApi.cpp: the program builder, loader and
// validation; Api.cpp: runs and reports): exceptions become a status and pfrt_last_error().
#ifndef PFRT_API_GUARD_H
#define PFRT_API_GUARD_H

#include "runtime/Program.h"
#include "runtime/pfrt.h"

#include <new>
#include <string>

namespace pfrt {

// Sets the message pfrt_last_error() returns on this thread (defined in ProgramApi.cpp).
void setLastError(const std::string &message);

// Runs f; an exception it throws becomes the status returned and the thread's last error.
template <class F> pfrt_status guard(F &&f) {
  try {
    f();
    return PFRT_OK;
  } catch (const Error &e) {
    setLastError(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    setLastError("out of memory");
    return PFRT_ERROR_INTERNAL;
  } catch (const std::exception &e) {
    setLastError(std::string("internal error: ") + e.what());
    return PFRT_ERROR_INTERNAL;
  } catch (...) {
    setLastError("internal error: unknown exception");
    return PFRT_ERROR_INTERNAL;
  }
}

// A caller's argument is wrong.
[[noreturn]] inline void invalid(const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_ARGUMENT, message);
}

inline pfrt::Program &prog(pfrt_program *p) {
  if (!p)
    invalid("program is NULL");
  return p->program;
}

} // namespace pfrt

#endif // PFRT_API_GUARD_H
