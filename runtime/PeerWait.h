// Waiting for the GPU while another rank's transfers are in flight (docs/runtime.md §5b, NCCL).
//
// A CUDA wait (cudaEventSynchronize, cudaStreamSynchronize) has no time limit. With NCCL, the
// GPU work a rank waits for may include a receive whose peer never sends: a peer that hangs
// without exiting (stopped, or its GPU stuck) is not seen by mpirun, and the rank would wait for
// good. So in rank mode with NCCL the backend polls instead: the wait's own query, the
// communicators' asynchronous errors between polls, and the peer time limit (--peer-timeout).
// Plain C++ (no CUDA), so the host tests check it with fake queries.
#ifndef PFRT_PEER_WAIT_H
#define PFRT_PEER_WAIT_H

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace pfrt {

struct PeerWatch {
  std::function<void()> check; // throws when a peer failed (NCCL's asynchronous error)
  double limitS = 0;           // the peer time limit, seconds
  // Set by the first wait that runs past the limit: every later wait sharing it fails at once
  // (a thread that failed still resolves its pending events on its way out; the communicators
  // are aborted, which ends the GPU's waits, only once every thread has).
  std::shared_ptr<std::atomic<bool>> expired;
};

// Polls `ready` until it returns true. Between polls: watch.check() (at most once a millisecond),
// then a back-off (yields, then 20 us sleeps: a fill thread waiting for its bubble must wake soon
// after it begins). Throws Error(PFRT_ERROR_BACKEND) when watch.limitS passes first, or at once
// when watch.expired is set: "<what> did not finish within N s while transfers with other ranks
// were in flight: a peer rank hung (--peer-timeout sets the limit)". Exceptions of `ready` and
// `check` pass through.
void pollUntil(const std::function<bool()> &ready, const PeerWatch &watch,
               const std::string &what);

} // namespace pfrt

#endif // PFRT_PEER_WAIT_H
