#include "runtime/PeerWait.h"

#include "runtime/Program.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace pfrt {

namespace {

[[noreturn]] void hung(const std::string &what, double limitS, const char *more) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limitS);
  throw Error(PFRT_ERROR_BACKEND, what + " did not finish within " + limit +
                                      " s while transfers with other ranks were in flight: a "
                                      "peer rank hung (--peer-timeout sets the limit)" +
                                      more);
}

} // namespace

void pollUntil(const std::function<bool()> &ready, const PeerWatch &watch,
               const std::string &what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto lastCheck = start - std::chrono::seconds(1);
  for (int poll = 0;; ++poll) {
    if (ready())
      return;
    if (watch.expired && watch.expired->load())
      hung(what, watch.limitS, " (an earlier wait of this rank ran past the limit)");
    const auto now = Clock::now();
    if (watch.check && now - lastCheck >= std::chrono::milliseconds(1)) {
      watch.check();
      lastCheck = now;
    }
    if (std::chrono::duration<double>(now - start).count() > watch.limitS) {
      if (watch.expired)
        watch.expired->store(true);
      hung(what, watch.limitS, "");
    }
    // A fill thread waits here for its bubble to begin: it must wake within tens of us.
    if (poll < 50)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

} // namespace pfrt
