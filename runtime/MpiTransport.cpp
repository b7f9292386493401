// The MPI transport: one rank per process, a rank runs one device of the program.
//
// Every MPI call goes through one mutex (mpiLock) and is nonblocking (Comm_idup, Isend, Irecv,
// Ibarrier, Igatherv polled with MPI_Test), so any thread level from MPI_THREAD_SERIALIZED up
// works and no call ever blocks without a timeout: a peer that exited or hung gives a clear error
// after `timeoutS` instead of a hang, and an MPI call that fails gives its error. The calls that
// cannot be nonblocking (MPI_Init, MPI_Finalize) and the ranks' meeting at exit are bounded too
// (MpiExit.h). Channels whose both ends are in this process use the in-process transport.
//
// Wire message (MPI_BYTE, one per channel and iteration; the channel's index in the program-wide
// channel list is the MPI tag, and MPI keeps the order of messages with the same source and tag):
// the generation, the channel, and the ready time relative to the run's origin (modelled time is
// therefore consistent across processes whose origins were aligned by the start barrier).
#include "runtime/Transport.h"

#include "runtime/MpiExit.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace pfrt {
namespace {

std::atomic<bool> gFailed{false};
// Bytes per rank in one round of a gather (MpiTransport::collect); mpiSetGatherChunkForTesting.
std::atomic<uint64_t> gChunkBytes{uint64_t(64) << 20};
bool gInitializedByUs = false;

std::string seconds(double s) { return mpiSeconds(s); }

// The peer timeout: how long MPI_Finalize may take (atExit; at least kMpiExitFloorS).
std::atomic<double> gPeerTimeoutS{120};

int worldRank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void atExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (gFailed) {
    mpiExitHeartbeatStop();
    // mpirun stops the peers (they may be waiting for this rank). A process alone in its world
    // (started without mpirun) has none: it finalizes quietly, without MPI_Abort's banner after
    // its own error.
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1)
      MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!gInitializedByUs)
    return;
  // Every rank has written its outputs before any exits: mpirun aborts the job when one rank
  // exits with a nonzero code (a stopped run exits 130, 143 or 138), which would kill rank 0
  // while it merges and writes the report. Bounded by heartbeats, not by the merge's length: a
  // rank that goes silent for the limit ends the wait (MpiExit.h).
  mpiExitTogether();
  // Past the exit every rank has written its outputs; Open MPI's MPI_Finalize waits for every
  // rank once more, so a peer that hangs now (stopped, or stuck in its own exit) would hold this
  // rank forever: bounded by the peer timeout, at least kMpiExitFloorS (a rank a second late must
  // not fail a run whose outputs are written).
  const double limit = std::max(gPeerTimeoutS.load(), kMpiExitFloorS);
  const int rank = worldRank();
  mpiUnderDeadline(limit,
                   "rank " + std::to_string(rank) + ": MPI_Finalize did not return after " +
                       seconds(limit) + " s (a peer is hung; --peer-timeout sets the limit, at "
                       "least " + seconds(kMpiExitFloorS) + " s here)",
                   [] { return MPI_Finalize(); });
}

struct Wire {
  int64_t gen;
  uint32_t src, dst, tag;
  int32_t hasReady;
  double readyRelUs;
};

// Keeps what an unfinished MPI request reads or writes alive to the end of the process. A request
// given up at the peer timeout or at an abort may still complete whenever MPI makes progress
// later (a collective cannot be cancelled; a late peer still receives a send), and it would then
// write into freed memory. Only failed runs give requests up; the list is reachable from a
// static, so leak checkers do not report it.
void abandon(std::shared_ptr<void> owner) {
  if (!owner)
    return;
  static std::mutex m;
  static auto *kept = new std::vector<std::shared_ptr<void>>();
  std::lock_guard<std::mutex> lock(m);
  kept->push_back(std::move(owner));
}

// A run's two communicators: messages and collectives on `comm`, the stop votes on `vote`. Made
// once per process and handed to the next run when a run ends cleanly (nothing in flight, no
// failure): each run used to duplicate MPI_COMM_WORLD twice and never free them, and MPI has
// about 32k communicator ids (--compare 1000 is 4002 runs). After a failure they are left as they
// are (an abandoned collective may still be in flight on them) and the next run makes new ones.
struct Comms {
  MPI_Comm comm = MPI_COMM_NULL, vote = MPI_COMM_NULL;
};
std::mutex gSpareMutex;
Comms gSpare;
// The communicator of the ranks' exit (MpiExit.h): made once per process, with the first run's.
MPI_Comm gExitComm = MPI_COMM_NULL;

// MPI_Init_thread, bounded: Open MPI's waits for every rank (a fence over the launcher), so a
// peer that never gets there (frozen, or stuck before it) would hold this rank forever. The
// launcher's rank names this one (MPI cannot be asked yet).
void initMpi(double timeoutS, int &provided) {
  int launched = -1, world = 0;
  const std::string rank = launcherRank(launched, world) ? std::to_string(launched) : "?";
  const double limit = std::max(timeoutS, kMpiExitFloorS);
  const int rc = mpiUnderDeadline(
      limit,
      "rank " + rank + ": MPI_Init did not return after " + seconds(limit) +
          " s (a peer did not start or is hung; --peer-timeout sets the limit, at least " +
          seconds(kMpiExitFloorS) + " s here)",
      [&] { return MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); });
  if (rc != MPI_SUCCESS)
    throw Error(PFRT_ERROR_UNAVAILABLE, "MPI_Init_thread failed: " + mpiError(rc));
}

class MpiTransport : public Transport {
public:
  MpiTransport(int rank, int world, double timeoutS) : timeoutS_(timeoutS) {
    gPeerTimeoutS = timeoutS;
    mpiExitHeartbeatStop(); // the previous run's (--compare): this one is under way
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      initMpi(timeoutS, provided);
      gInitializedByUs = true;
      std::atexit(atExit);
      // Errors of calls on MPI_COMM_WORLD (MPI_Comm_idup below) come back as codes, as on the
      // run's communicators, instead of aborting the job without saying where.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      if (provided < MPI_THREAD_SERIALIZED)
        throw Error(PFRT_ERROR_UNAVAILABLE,
                    "the MPI library gives thread level " + std::to_string(provided) +
                        "; the MPI transport needs MPI_THREAD_SERIALIZED or higher");
    } else {
      int provided = 0;
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_SERIALIZED)
        throw Error(PFRT_ERROR_UNAVAILABLE,
                    "MPI was initialised with thread level " + std::to_string(provided) +
                        "; the MPI transport needs MPI_THREAD_SERIALIZED or higher "
                        "(MPI_Init_thread)");
    }
    {
      std::lock_guard<std::mutex> lock(gSpareMutex);
      comm_ = gSpare.comm;
      voteComm_ = gSpare.vote;
      gSpare = Comms{};
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    if (comm_ == MPI_COMM_NULL) {
      comm_ = duplicateWorld();
      // The stop votes on their own communicator: they stay outstanding across the other
      // collectives (start barrier, final gather) without being ordered against them.
      voteComm_ = duplicateWorld();
    }
    if (gInitializedByUs && gExitComm == MPI_COMM_NULL) {
      gExitComm = duplicateWorld();
      mpiExitSetup(gExitComm, timeoutS);
    } else if (gInitializedByUs) {
      mpiExitSetup(gExitComm, timeoutS);
    }
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
    if (world >= 0 && world != world_)
      throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                  "world " + std::to_string(world) + " was asked for but MPI_COMM_WORLD has " +
                      std::to_string(world_) + " process(es): start the ranks with mpirun -n " +
                      std::to_string(world));
    if (rank >= 0 && rank != rank_)
      throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                  "rank " + std::to_string(rank) + " was asked for but this process is MPI rank " +
                      std::to_string(rank_));
    int flag = 0;
    int *ub = nullptr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tagUb_ = flag && ub ? *ub : 32767;
  }

  // A run that failed may leave sends and stop votes in flight: their buffers stay alive (abandon).
  // A run that ended cleanly hands its communicators to the next (Comms). No MPI call here: the
  // process may have finalized MPI already.
  ~MpiTransport() override {
    if (sends_.empty() && pendingVotes_.empty() && !abandoned_ && !gFailed &&
        comm_ != MPI_COMM_NULL) {
      std::lock_guard<std::mutex> lock(gSpareMutex);
      if (gSpare.comm == MPI_COMM_NULL)
        gSpare = Comms{comm_, voteComm_};
    }
    for (std::unique_ptr<PendingSend> &send : sends_)
      abandon(std::move(send));
    for (std::unique_ptr<Vote> &vote : pendingVotes_)
      abandon(std::move(vote));
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int rankOf(uint32_t device) const override { return static_cast<int>(device); }

  void open(const std::vector<ChannelKey> &channels, int64_t firstGen) override {
    if (static_cast<int64_t>(channels.size()) > tagUb_)
      throw Error(PFRT_ERROR_UNAVAILABLE, "the program has " + std::to_string(channels.size()) +
                                              " channels; MPI tags end at " +
                                              std::to_string(tagUb_));
    std::vector<ChannelKey> local;
    index_.clear();
    recv_.clear();
    for (size_t i = 0; i < channels.size(); ++i) {
      const ChannelKey &k = channels[i];
      index_[k] = static_cast<int>(i);
      if (isLocal(k))
        local.push_back(k);
      else if (rankOf(k.dst) == rank_)
        recv_[k].next = firstGen;
    }
    inner_ = createInProcessTransport();
    inner_->open(local, firstGen);
  }
  void begin(double originUs) override { originUs_ = originUs; }

  void publish(const ChannelKey &key, int64_t gen, const Message &message) override {
    if (isLocal(key))
      return inner_->publish(key, gen, message);
    auto send = std::make_unique<PendingSend>();
    send->wire.gen = gen;
    send->wire.src = key.src;
    send->wire.dst = key.dst;
    send->wire.tag = key.tag;
    send->wire.hasReady = message.readyUs >= 0;
    send->wire.readyRelUs = message.readyUs >= 0 ? message.readyUs - originUs_ : 0;
    std::lock_guard<std::mutex> lock(mpi_);
    reapSendsLocked();
    check(MPI_Isend(&send->wire, sizeof(Wire), MPI_BYTE, rankOf(key.dst), index_.at(key), comm_,
                    &send->request),
          "MPI_Isend (a message to rank " + std::to_string(rankOf(key.dst)) + ")");
    sends_.push_back(std::move(send));
  }

  bool take(const ChannelKey &key, int64_t gen, Message &out,
            const std::atomic<bool> &abort) override {
    if (isLocal(key))
      return inner_->take(key, gen, out, abort);
    RecvChannel &rc = recv_.at(key);
    const int peer = rankOf(key.src);
    if (gen != rc.next)
      throw Error(PFRT_ERROR_INTERNAL, "receive of iteration " + std::to_string(gen) +
                                           " out of order (expected " + std::to_string(rc.next) +
                                           ")");
    const auto start = std::chrono::steady_clock::now();
    bool posted = false;
    // Owned apart from this frame: a receive whose MPI_Test failed is in an unknown state and
    // may still write into it (abandon).
    auto buffer = std::make_shared<Wire>();
    Wire &wire = *buffer;
    MPI_Request request = MPI_REQUEST_NULL;
    for (int spin = 0;; ++spin) {
      if (abort) {
        cancel(request, buffer);
        return false;
      }
      {
        std::lock_guard<std::mutex> lock(mpi_);
        if (!posted) {
          check(MPI_Irecv(&wire, sizeof(Wire), MPI_BYTE, peer, index_.at(key), comm_, &request),
                "MPI_Irecv (a message from rank " + std::to_string(peer) + ")");
          posted = true;
        }
        int done = 0;
        MPI_Status status;
        const int err = MPI_Test(&request, &done, &status);
        if (err != MPI_SUCCESS) {
          abandoned_ = true;
          abandon(buffer);
        }
        check(err, "MPI_Test (a message from rank " + std::to_string(peer) + ")");
        if (done)
          break;
      }
      if (elapsedS(start) > timeoutS_) {
        cancel(request, buffer);
        throw Error(PFRT_ERROR_UNAVAILABLE,
                    "no message from rank " + std::to_string(peer) + " (device " +
                        std::to_string(key.src) + ", tag " + std::to_string(key.tag) +
                        ") for iteration " + std::to_string(gen) + " after " +
                        seconds(timeoutS_) +
                        " s: the peer exited, hung, or runs other options "
                        "(--peer-timeout sets the limit)");
      }
      backoff(spin);
    }
    if (wire.gen != gen || wire.src != key.src || wire.dst != key.dst || wire.tag != key.tag)
      throw Error(PFRT_ERROR_INTERNAL,
                  "rank " + std::to_string(peer) + " sent iteration " + std::to_string(wire.gen) +
                      " of channel " + std::to_string(wire.src) + "->" + std::to_string(wire.dst) +
                      " tag " + std::to_string(wire.tag) + " where iteration " +
                      std::to_string(gen) + " was expected: do all ranks run the same program?");
    rc.next = gen + 1;
    out = Message{};
    out.readyUs = wire.hasReady ? originUs_ + wire.readyRelUs : -1;
    return true;
  }

  void consumed(const ChannelKey &key, int64_t gen) override {
    if (isLocal(key))
      inner_->consumed(key, gen);
  }
  bool waitConsumed(const ChannelKey &key, int64_t gen, int64_t ring,
                    const std::atomic<bool> &abort) override {
    if (isLocal(key))
      return inner_->waitConsumed(key, gen, ring, abort);
    return !abort;
  }
  void wakeAll() override {
    if (inner_)
      inner_->wakeAll();
  }

  // One MPI_Iallreduce (MAX) per round on voteComm_; every rank posts the same rounds in order.
  void postVote(int64_t round, bool stop) override {
    auto vote = std::make_unique<Vote>();
    vote->round = round;
    vote->mine = stop ? 1 : 0;
    std::lock_guard<std::mutex> lock(mpi_);
    check(MPI_Iallreduce(&vote->mine, &vote->any, 1, MPI_INT, MPI_MAX, voteComm_, &vote->request),
          "MPI_Iallreduce (the stop vote of iteration " + std::to_string(round) + ")");
    pendingVotes_.push_back(std::move(vote));
  }

  bool voteResult(int64_t round, bool &stop, const std::atomic<bool> &abort) override {
    std::shared_ptr<Vote> vote;
    {
      // Rounds are read in the order they were posted.
      std::lock_guard<std::mutex> lock(mpi_);
      if (pendingVotes_.empty() || pendingVotes_.front()->round != round)
        throw Error(PFRT_ERROR_INTERNAL,
                    "the stop vote of iteration " + std::to_string(round) +
                        " is read out of order (the oldest unread was " +
                        (pendingVotes_.empty() ? std::string("none")
                                               : std::to_string(pendingVotes_.front()->round)) +
                        ")");
      vote = std::move(pendingVotes_.front());
      pendingVotes_.pop_front();
    }
    // The request stays valid while we poll it outside the list: only this thread reads it.
    if (!wait(vote->request,
              "the stop vote of iteration " + std::to_string(round) +
                  " (every rank votes at the start of each iteration)",
              vote, &abort))
      return false;
    stop = vote->any != 0;
    return true;
  }

  void finish() override {
    // The run is over: from now on the peers hear from this process until it exits (MpiExit.h).
    mpiExitHeartbeatStart();
    // The last rounds' votes, which nobody read (the run ended first); every rank posted them.
    while (!pendingVotes_.empty()) {
      std::shared_ptr<Vote> vote = std::move(pendingVotes_.front());
      pendingVotes_.pop_front();
      wait(vote->request, "the last stop votes (at the end of the run)", vote);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int spin = 0;; ++spin) {
      {
        std::lock_guard<std::mutex> lock(mpi_);
        reapSendsLocked();
        if (sends_.empty())
          return;
      }
      if (elapsedS(start) > timeoutS_)
        throw Error(PFRT_ERROR_UNAVAILABLE,
                    std::to_string(sends_.size()) + " message(s) to other ranks not delivered after " +
                        seconds(timeoutS_) + " s: a peer exited or hung");
      backoff(spin);
    }
  }

  void barrier() override {
    MPI_Request request;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier (the start barrier)");
    }
    wait(request, "the start barrier (waiting for every rank to start the run)", nullptr);
  }

  std::vector<std::string> gather(const std::string &mine, double extraWaitS = 0) override {
    return collect(mine, /*everyone=*/false, extraWaitS);
  }
  std::vector<std::string> allGather(const std::string &mine) override {
    return collect(mine, /*everyone=*/true, 0);
  }

private:
  struct PendingSend {
    Wire wire{};
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct RecvChannel {
    int64_t next = 0;
  };
  struct Vote {
    int64_t round = 0;
    int mine = 0, any = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  // Every rank's bytes on rank 0 (gather) or on every rank (allGather): the sizes first (64-bit,
  // to every rank), then the bytes in rounds of at most gChunkBytes per rank, so that MPI's int
  // counts and displacements hold however large the parts are (a long run's timelines pass 2 GiB)
  // and the receive buffer stays one round's size. Nonblocking, polled with the peer timeout.
  std::vector<std::string> collect(const std::string &mine, bool everyone, double extraWaitS) {
    const char *what = everyone ? "exchanging setup data between the ranks"
                                : "gathering the ranks' results on rank 0";
    // What the requests read and write, owned apart from this frame: a round given up at the peer
    // timeout may complete later (abandon). `send` holds this rank's bytes of the round in flight
    // (the caller's string may be gone by then); MPI may read the counts and displacements until
    // the round completes.
    struct Buffers {
      uint64_t size = 0;
      std::vector<uint64_t> sizes;
      std::vector<int> counts, displs;
      std::string send, recv;
    };
    auto b = std::make_shared<Buffers>();
    b->size = mine.size();
    b->sizes.resize(static_cast<size_t>(world_));
    MPI_Request request;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      check(MPI_Iallgather(&b->size, 1, MPI_UINT64_T, b->sizes.data(), 1, MPI_UINT64_T, comm_,
                           &request),
            std::string("MPI_Iallgather (") + what + ")");
    }
    wait(request, what, b, nullptr, extraWaitS);
    const std::vector<uint64_t> &sizes = b->sizes;
    const bool receives = everyone || rank_ == 0;
    std::vector<std::string> out(receives ? sizes.size() : 0);
    for (size_t i = 0; i < out.size(); ++i)
      out[i].resize(sizes[i]);
    const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
    const uint64_t chunk = std::max<uint64_t>(
        1, std::min<uint64_t>(gChunkBytes.load(), INT_MAX / static_cast<uint64_t>(world_)));
    std::vector<int> &counts = b->counts, &displs = b->displs;
    counts.resize(sizes.size());
    displs.resize(sizes.size());
    for (uint64_t offset = 0; offset < largest; offset += chunk) {
      int total = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        counts[i] = static_cast<int>(sizes[i] > offset ? std::min(chunk, sizes[i] - offset) : 0);
        displs[i] = total;
        total += counts[i];
      }
      if (receives)
        b->recv.resize(static_cast<size_t>(total));
      const int myCount = counts[static_cast<size_t>(rank_)];
      b->send.assign(myCount ? mine.data() + offset : nullptr, static_cast<size_t>(myCount));
      const char *send = myCount ? b->send.data() : nullptr;
      char *recv = receives && total ? &b->recv[0] : nullptr;
      {
        std::lock_guard<std::mutex> lock(mpi_);
        if (everyone)
          check(MPI_Iallgatherv(send, myCount, MPI_BYTE, recv, counts.data(), displs.data(),
                                MPI_BYTE, comm_, &request),
                std::string("MPI_Iallgatherv (") + what + ")");
        else
          check(MPI_Igatherv(send, myCount, MPI_BYTE, recv, counts.data(), displs.data(),
                             MPI_BYTE, 0, comm_, &request),
                std::string("MPI_Igatherv (") + what + ")");
      }
      wait(request, what, b, nullptr, extraWaitS);
      for (size_t i = 0; i < out.size(); ++i)
        if (counts[i])
          std::memcpy(&out[i][offset], b->recv.data() + displs[i],
                      static_cast<size_t>(counts[i]));
    }
    return out;
  }

  bool isLocal(const ChannelKey &k) const {
    return rankOf(k.src) == rank_ && rankOf(k.dst) == rank_;
  }
  static double elapsedS(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  static void backoff(int spin) {
    // Short sleeps first (a message usually comes soon), then 1 ms.
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 20 ? 20 : spin < 200 ? 100 : 1000));
  }
  // Throws Error naming `call` (and this rank) when an MPI call returned `rc` != MPI_SUCCESS.
  void check(int rc, const std::string &call) const {
    if (rc != MPI_SUCCESS)
      throw Error(PFRT_ERROR_BACKEND,
                  "rank " + std::to_string(rank_) + ": " + call + " failed: " + mpiError(rc));
  }
  // A new communicator with MPI_COMM_WORLD's ranks (MPI_Comm_idup, polled under the peer timeout:
  // a peer frozen before it would hold a blocking MPI_Comm_dup forever). Every rank makes the
  // same ones in the same order.
  MPI_Comm duplicateWorld() {
    auto made = std::make_shared<MPI_Comm>(MPI_COMM_NULL); // written when the request completes
    MPI_Request request;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      check(MPI_Comm_idup(MPI_COMM_WORLD, made.get(), &request),
            "MPI_Comm_idup (making the run's communicators)");
    }
    wait(request, "making the run's communicators (MPI_Comm_idup; every rank makes them as it "
                  "starts)",
         made);
    check(MPI_Comm_set_errhandler(*made, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return *made;
  }
  void reapSendsLocked() {
    while (!sends_.empty()) {
      int done = 0;
      check(MPI_Test(&sends_.front()->request, &done, MPI_STATUS_IGNORE),
            "MPI_Test (a message to rank " +
                std::to_string(rankOf(sends_.front()->wire.dst)) + ")");
      if (!done)
        break;
      sends_.pop_front();
    }
  }
  // Cancels a posted receive and completes it: a message that matched already is received into
  // its buffer now (MPI_Wait returns for a cancelled request whatever the peers do), not after the
  // buffer is gone. If either call fails the receive may still write into `owner` (its buffer),
  // which is then kept alive (abandon).
  void cancel(MPI_Request &request, const std::shared_ptr<void> &owner) {
    if (request == MPI_REQUEST_NULL)
      return;
    std::lock_guard<std::mutex> lock(mpi_);
    int rc = MPI_Cancel(&request);
    const char *what = "MPI_Cancel (a receive given up)";
    if (rc == MPI_SUCCESS) {
      rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
      what = "MPI_Wait (a receive given up)";
    }
    if (rc != MPI_SUCCESS) {
      abandoned_ = true;
      abandon(owner);
    }
    check(rc, what);
  }
  // Polls `request` until it completes (true) or `abort` is set (false); throws Error after the
  // peer timeout. A request left unfinished keeps `owner` (its buffers) alive: abandon.
  bool wait(MPI_Request &request, const std::string &what, const std::shared_ptr<void> &owner,
            const std::atomic<bool> *abort = nullptr, double extraWaitS = 0) {
    const double limit = timeoutS_ + extraWaitS;
    const auto start = std::chrono::steady_clock::now();
    for (int spin = 0;; ++spin) {
      {
        std::lock_guard<std::mutex> lock(mpi_);
        int done = 0;
        const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
          abandoned_ = true; // the request's state is unknown: keep what it may still write
          abandon(owner);
        }
        check(rc, "MPI_Test (" + what + ")");
        if (done)
          return true;
      }
      if (abort && abort->load()) {
        abandoned_ = true;
        abandon(owner);
        return false;
      }
      if (elapsedS(start) > limit) {
        abandoned_ = true;
        abandon(owner);
        throw Error(PFRT_ERROR_UNAVAILABLE,
                    "rank " + std::to_string(rank_) + ": " + what + " timed out after " +
                        seconds(limit) +
                        " s: a peer exited, hung, or runs other options (--peer-timeout sets the "
                        "limit)");
      }
      backoff(spin);
    }
  }

  double timeoutS_;
  std::atomic<bool> abandoned_{false}; // a request was given up: the communicators stay unused
  MPI_Comm comm_ = MPI_COMM_NULL, voteComm_ = MPI_COMM_NULL;
  std::deque<std::unique_ptr<Vote>> pendingVotes_;
  int rank_ = 0, world_ = 1;
  int64_t tagUb_ = 32767;
  double originUs_ = 0;
  std::mutex &mpi_ = mpiLock(); // one lock for every MPI call of the process (heartbeats too)
  std::map<ChannelKey, int> index_;
  std::map<ChannelKey, RecvChannel> recv_;
  std::deque<std::unique_ptr<PendingSend>> sends_;
  std::unique_ptr<Transport> inner_;
};

} // namespace

std::unique_ptr<Transport> createMpiTransport(int rank, int world, double timeoutS) {
  return std::make_unique<MpiTransport>(rank, world, timeoutS);
}

bool mpiTransportCompiled() { return true; }

void mpiMarkFailed() { gFailed = true; }

void mpiSetGatherChunkForTesting(uint64_t bytes) { gChunkBytes = bytes ? bytes : uint64_t(64) << 20; }

} // namespace pfrt
