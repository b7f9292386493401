// Sessions (pfrt_session_*): one rank's fill driven by a framework that owns its training loop.
// The C entry points live in Session.cpp; this header is the little they share with Api.cpp.
#ifndef PFRT_SESSION_H
#define PFRT_SESSION_H

#include <string>

namespace pfrt {

// Sets the message pfrt_last_error() returns on this thread (defined in Api.cpp).
void setLastError(const std::string &message);

} // namespace pfrt

#endif // PFRT_SESSION_H
