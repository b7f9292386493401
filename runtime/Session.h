// Sessions (pfrt_session_*): one rank's fill driven by a framework that owns its training loop.
// The C entry points live in SessionApi.cpp (the class in SessionImpl.h); this header is the
// little they share with Api.cpp.
#ifndef PFRT_SESSION_H
#define PFRT_SESSION_H

#include <string>

namespace pfrt {

// Sets the message pfrt_last_error() returns on this thread (defined in ProgramApi.cpp).
void setLastError(const std::string &message);

// Tests only: the clock sessions read for bubble deadlines, the bound's decisions and fill task
// step times (NULL: the host's monotonic clock, hostNowUs). Chunks are still timed by the backend.
// Lets a test advance a virtual clock from a task's step and count steps without wall time. The
// clock is read from the worker thread and the caller's at once: it must be thread-safe.
void setSessionClockForTesting(double (*clockUs)());

// Tests only: called by a host session's worker when it wakes for a bubble, before it takes it
// (NULL: nothing). A test holds the worker there to stand for a thread that gets no core.
void setSessionWorkerPauseForTesting(void (*pause)());

} // namespace pfrt

#endif // PFRT_SESSION_H
