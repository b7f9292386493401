// Rank mode's exit: heartbeats from the end of a run on, the ranks' meeting at exit, and the
// deadline of blocking MPI calls (MpiExit.h says how they fit together).
#include "runtime/MpiExit.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <thread>
#include <unistd.h>
#include <vector>

namespace pfrt {
namespace {

using Clock = std::chrono::steady_clock;

// The messages of the exit communicator (one int each, its value unused). MPI keeps the order of
// messages from one sender on one communicator, so a "done" or "release" comes after every
// heartbeat its sender sent: a receive of any tag takes them all.
enum ExitTag : int { kHeartbeat = 1, kDone = 2, kRelease = 3 };
const int kWord = 0;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct ExitState {
  std::mutex m;
  std::condition_variable cv;
  MPI_Comm comm = MPI_COMM_NULL;
  // This rank and the world on `comm`, read once at setup: the heartbeat thread must not call MPI
  // outside mpiLock(), and the calls below that need them may hold it already.
  int rank = -1, size = 1;
  double limitS = 120;
  bool running = false, stop = false;
  std::thread thread;
};

// Never destroyed: a heartbeat thread may still run while static objects are destroyed at exit
// (a joinable std::thread destroyed there would end the process).
ExitState &state() {
  static ExitState *s = new ExitState();
  return *s;
}

// This rank and the world on the exit communicator (read once by mpiExitSetup).
int exitRank() { return state().rank; }
int exitSize() { return state().size; }

// Ends the process with exit status 1 after `message` (stdout first: exit handlers do not run).
[[noreturn]] void die(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "pipefill-run: %s; exiting with status 1\n", message.c_str());
  std::fflush(stderr);
  ::_exit(1);
}

// One heartbeat to every rank that may wait for this one at exit: rank 0 to all, the others to
// rank 0. False (after a note) when MPI refuses: the peers then fail at their limit.
bool beat(MPI_Comm comm) {
  const int rank = exitRank(), size = exitSize();
  std::lock_guard<std::mutex> lock(mpiLock());
  for (int peer = rank == 0 ? 1 : 0; peer < (rank == 0 ? size : 1); ++peer) {
    MPI_Request request;
    const int rc = MPI_Isend(&kWord, 1, MPI_INT, peer, kHeartbeat, comm, &request);
    if (rc != MPI_SUCCESS) {
      std::fprintf(stderr, "pipefill-run: rank %d: MPI_Isend (heartbeat to rank %d) failed: %s\n",
                   rank, peer, mpiError(rc).c_str());
      return false;
    }
    MPI_Request_free(&request); // a 4-byte send completes without us; the receiver takes it
  }
  return true;
}

void heartbeatLoop() {
  ExitState &s = state();
  std::unique_lock<std::mutex> lock(s.m);
  for (;;) {
    if (s.cv.wait_for(lock, std::chrono::seconds(1), [&] { return s.stop; }))
      return;
    lock.unlock();
    const bool ok = beat(s.comm);
    lock.lock();
    if (!ok)
      return;
  }
}

// A receive of any tag from `peer` on the exit communicator, posted again after each message.
struct Listener {
  int peer = 0;
  int word = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  Clock::time_point heard = Clock::now();
};

// The tag of the next message from the listener's peer, 0 when none has come.
int poll(Listener &l, MPI_Comm comm) {
  std::lock_guard<std::mutex> lock(mpiLock());
  const std::string where = " (at exit, from rank " + std::to_string(l.peer) + ") failed: ";
  if (l.request == MPI_REQUEST_NULL) {
    const int rc = MPI_Irecv(&l.word, 1, MPI_INT, l.peer, MPI_ANY_TAG, comm, &l.request);
    if (rc != MPI_SUCCESS)
      die("rank " + std::to_string(exitRank()) + ": MPI_Irecv" + where + mpiError(rc));
  }
  int done = 0;
  MPI_Status status;
  const int rc = MPI_Test(&l.request, &done, &status);
  if (rc != MPI_SUCCESS)
    die("rank " + std::to_string(exitRank()) + ": MPI_Test" + where + mpiError(rc));
  if (!done)
    return 0;
  l.heard = Clock::now();
  l.request = MPI_REQUEST_NULL;
  return status.MPI_TAG;
}

std::string limitText() {
  return "--peer-timeout sets the limit, at least " + mpiSeconds(kMpiExitFloorS) + " s at exit";
}

// Sends `tag` to `peer`; the request is returned for the caller to complete.
MPI_Request sendWord(MPI_Comm comm, int peer, int tag, const char *what) {
  std::lock_guard<std::mutex> lock(mpiLock());
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(&kWord, 1, MPI_INT, peer, tag, comm, &request);
  if (rc != MPI_SUCCESS)
    die("rank " + std::to_string(exitRank()) + ": MPI_Isend (" + what + " to rank " +
        std::to_string(peer) + ") failed: " + mpiError(rc));
  return request;
}

// True when the send is complete.
bool sent(MPI_Comm comm, MPI_Request &request, const char *what) {
  std::lock_guard<std::mutex> lock(mpiLock());
  int done = 0;
  const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS)
    die("rank " + std::to_string(exitRank()) + ": MPI_Test (" + what + ") failed: " +
        mpiError(rc));
  return done != 0;
}

// Rank 0: waits for every rank's "done" (each must be heard from within the limit), then
// releases them.
void waitForRanks(const ExitState &s) {
  const int size = exitSize();
  std::vector<Listener> from(static_cast<size_t>(size));
  std::vector<bool> done(from.size(), false);
  int left = size - 1;
  for (int spin = 0; left > 0; ++spin) {
    for (int k = 1; k < size; ++k) {
      Listener &l = from[static_cast<size_t>(k)];
      l.peer = k;
      while (!done[static_cast<size_t>(k)])
        if (const int tag = poll(l, s.comm); tag == kDone) {
          done[static_cast<size_t>(k)] = true;
          --left;
        } else if (tag == 0) {
          break;
        }
      if (!done[static_cast<size_t>(k)] && since(l.heard) > s.limitS)
        die("rank 0: no word from rank " + std::to_string(k) + " for " + mpiSeconds(s.limitS) +
            " s at exit: it did not get to the end of its outputs (hung, stopped or killed); " +
            limitText() + "; this rank's outputs are written");
    }
    if (left)
      std::this_thread::sleep_for(std::chrono::milliseconds(spin < 100 ? 1 : 10));
  }
  mpiExitHeartbeatStop(); // the release is the last message to each rank
  std::vector<MPI_Request> releases;
  for (int k = 1; k < size; ++k)
    releases.push_back(sendWord(s.comm, k, kRelease, "the release at exit"));
  const auto start = Clock::now();
  for (MPI_Request &r : releases)
    while (!sent(s.comm, r, "the release at exit")) {
      if (since(start) > s.limitS)
        die("rank 0: the release at exit was not delivered after " + mpiSeconds(s.limitS) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// Rank 1 and up: tells rank 0 it is done, then waits for its release, as long as rank 0 is heard
// from (heartbeats while it merges and writes the report) within the limit.
void waitForRankZero(const ExitState &s) {
  const int rank = exitRank();
  mpiExitHeartbeatStop(); // "done" is the last message to rank 0
  MPI_Request doneSend = sendWord(s.comm, 0, kDone, "done at exit");
  Listener l;
  const auto start = l.heard;
  bool released = false, delivered = false, noted = false;
  for (int spin = 0; !(released && delivered); ++spin) {
    while (!released)
      if (const int tag = poll(l, s.comm); tag == kRelease)
        released = true;
      else if (tag == 0)
        break;
    delivered = delivered || sent(s.comm, doneSend, "done at exit, to rank 0");
    if (released && delivered)
      return;
    if (since(l.heard) > s.limitS)
      die("rank " + std::to_string(rank) + ": no word from rank 0 for " + mpiSeconds(s.limitS) +
          " s while it merges and writes the report (it hung, or was stopped or killed); " +
          limitText() + "; this rank's outputs are written");
    if (!noted && since(start) > s.limitS) {
      std::fprintf(stderr,
                   "pipefill-run: rank %d is done and waits for rank 0 to finish the merged "
                   "report (%s s so far; rank 0 is alive)\n",
                   rank, mpiSeconds(s.limitS).c_str());
      noted = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(spin < 100 ? 1 : 10));
  }
}

} // namespace

std::mutex &mpiLock() {
  static std::mutex *m = new std::mutex(); // used at exit, after static destructors may have run
  return *m;
}

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

std::string mpiSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

int mpiUnderDeadline(double limitS, const std::string &message, const std::function<int()> &call) {
  std::mutex m;
  std::condition_variable cv;
  bool returned = false;
  std::thread dog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (cv.wait_for(lock, std::chrono::duration<double>(limitS), [&] { return returned; }))
      return;
    die(message);
  });
  const int rc = call();
  {
    std::lock_guard<std::mutex> lock(m);
    returned = true;
  }
  cv.notify_all();
  dog.join();
  return rc;
}

void mpiExitSetup(MPI_Comm comm, double limitS) {
  ExitState &s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (s.comm == MPI_COMM_NULL) {
    std::lock_guard<std::mutex> mpi(mpiLock());
    MPI_Comm_rank(comm, &s.rank);
    MPI_Comm_size(comm, &s.size);
    s.comm = comm;
  }
  s.limitS = std::max(limitS, kMpiExitFloorS);
}

void mpiExitHeartbeatStart() {
  ExitState &s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (s.comm == MPI_COMM_NULL || s.running)
    return;
  s.stop = false;
  s.running = true;
  s.thread = std::thread(heartbeatLoop);
}

void mpiExitHeartbeatStop() {
  ExitState &s = state();
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.running)
      return;
    s.stop = true;
    s.running = false;
    thread = std::move(s.thread);
  }
  s.cv.notify_all();
  thread.join();
}

void mpiExitTogether() {
  const ExitState &s = state();
  if (s.comm == MPI_COMM_NULL) {
    mpiExitHeartbeatStop();
    return;
  }
  if (exitRank() == 0)
    waitForRanks(s);
  else
    waitForRankZero(s);
}

} // namespace pfrt
