#include "runtime/PeerWait.h"

#include "runtime/Program.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace pfrt {

void pollUntil(const std::function<bool()> &ready, const PeerWatch &watch,
               const std::string &what) {
  const auto start = std::chrono::steady_clock::now();
  for (int poll = 0;; ++poll) {
    if (ready())
      return;
    if (watch.check)
      watch.check();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > watch.limitS) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", watch.limitS);
      throw Error(PFRT_ERROR_BACKEND,
                  what + " did not finish within " + limit +
                      " s while transfers with other ranks were in flight: a peer rank hung "
                      "(--peer-timeout sets the limit)");
    }
    if (poll < 50)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(
          std::chrono::microseconds(poll < 100 ? 20 : poll < 300 ? 100 : 1000));
  }
}

} // namespace pfrt
