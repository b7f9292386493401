// How a send reaches its receive: the transport behind the executor's point-to-point channels.
//
// A channel is (sender device, receiver device, tag); each iteration (generation) carries at most
// one message on it. The executor publishes a sender's Message with publish() and takes it on the
// receiving stream thread with take(); the backend then waits for the data (CUDA: the event in
// the message; host: the modelled ready time).
//
// Implementations:
//   - in-process (createInProcessTransport): every device in this process; condition variables.
//   - MPI (createMpiTransport, MpiTransport.cpp): one rank per process (a rank is a device). A
//     message between two ranks carries the sender's ready time relative to the run's origin, so
//     modelled time stays consistent across processes. Built when CMake finds MPI.
//   - NCCL (runtime/Nccl.h): not a Transport of its own. CUDA ranks signal over MPI and, when
//     NCCL is used (pfrt_options.rank_transfer), the CUDA backend moves each crossing send's
//     bytes with ncclSend/ncclRecv on the GPUs (docs/runtime.md, §5b "Ranks as processes").
#ifndef PFRT_TRANSPORT_H
#define PFRT_TRANSPORT_H

#include "runtime/Backend.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pfrt {

struct ChannelKey {
  uint32_t src = 0, dst = 0, tag = 0;
  bool operator<(const ChannelKey &o) const {
    return src != o.src ? src < o.src : dst != o.dst ? dst < o.dst : tag < o.tag;
  }
  bool operator==(const ChannelKey &o) const {
    return src == o.src && dst == o.dst && tag == o.tag;
  }
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // This process's rank and the number of ranks (in-process: 0 and 1).
  virtual int rank() const { return 0; }
  virtual int world() const { return 1; }
  // The rank that runs `device` (in-process: this one).
  virtual int rankOf(uint32_t device) const {
    (void)device;
    return rank();
  }

  // Called once before the stream threads start: every channel of the program (in the same order
  // on every rank), the first generation of the run, and where to report errors of `take`.
  virtual void open(const std::vector<ChannelKey> &channels, int64_t firstGen) = 0;
  // The run's common time origin (host clock of this process); messages between processes carry
  // times relative to it.
  virtual void begin(double originUs) { (void)originUs; }
  // Sender side: the message of generation `gen` on `key` (may be called from a CUDA callback).
  virtual void publish(const ChannelKey &key, int64_t gen, const Message &message) = 0;
  // Receiver side: blocks until the message of `gen` is there; false when `abort` was set. Throws
  // Error when the peer cannot deliver it (timeout, a mismatched message).
  virtual bool take(const ChannelKey &key, int64_t gen, Message &out,
                    const std::atomic<bool> &abort) = 0;
  // The receive of `gen` has been enqueued by the backend (its ring slot may be reused).
  virtual void consumed(const ChannelKey &key, int64_t gen) = 0;
  // Blocks until the receives of generations < gen - ring + 1 are enqueued; false on abort. Only
  // meaningful for channels whose both ends are in this process.
  virtual bool waitConsumed(const ChannelKey &key, int64_t gen, int64_t ring,
                            const std::atomic<bool> &abort) = 0;
  // Wakes every blocked call (after `abort` was set).
  virtual void wakeAll() = 0;
  // Completes outstanding sends (end of the run); throws Error on a timeout.
  virtual void finish() {}
  // Blocks until every rank has called it (the run's common start); throws Error on a timeout.
  virtual void barrier() {}
  // Rank 0 receives every rank's bytes (in rank order, its own included); the others get an
  // empty vector. Throws Error on a timeout.
  // `extraWaitS`: how much longer than the peer timeout a rank may wait for the others.
  virtual std::vector<std::string> gather(const std::string &mine, double extraWaitS = 0) {
    (void)extraWaitS;
    return {mine};
  }
  // Every rank receives every rank's bytes (in rank order, its own included). Throws Error on a
  // timeout.
  virtual std::vector<std::string> allGather(const std::string &mine) { return {mine}; }

  // The ranks' agreed clean stop (Executor::stopBefore): every rank posts one vote per round, the
  // same rounds in the same order on every rank, and reads a round's result (true when any rank
  // voted to stop) some rounds later, so the vote costs no wait while the ranks keep pace.
  // postVote does not block. voteResult blocks until every rank has voted in `round`; false when
  // `abort` was set; throws Error on a timeout. One process has nothing to agree on: the executor
  // votes only with more than one rank, and these defaults say so if called.
  virtual void postVote(int64_t round, bool stop);
  virtual bool voteResult(int64_t round, bool &stop, const std::atomic<bool> &abort);
};

// Every channel (a send's sender, receiver and tag) of the program, in the order every process
// computes alike: devices, then streams, then ops (the MPI transport's tags are indices into it).
std::vector<ChannelKey> programChannels(const Program &program);

// The program's channels grouped into ordered links: channels that can share one FIFO connection
// (an NCCL communicator) because their messages are issued in the same order at both ends. Two
// channels of a link have the same sender and receiver device, their sends are on one stream of
// the sender and their receives on one stream of the receiver (each stream's ops are issued by one
// thread, in program order, iteration after iteration), and the order of the sends in the sender's
// stream is the order of the receives in the receiver's. Within each (devices, streams) set the
// split is into the fewest such chains (greedy patience sorting on the receive positions, taken in
// send order; the fewest is the longest run received in the reverse of its send order), so a 1F1B
// pipeline gets one link per direction between neighbouring stages, whatever its microbatch count.
// Links come in an order every process computes alike (by their first channel's place in
// programChannels); each link lists its channels in send order.
std::vector<std::vector<ChannelKey>> orderedChannelLinks(const Program &program);

std::unique_ptr<Transport> createInProcessTransport();

// The MPI transport. Initialises MPI (thread level at least MPI_THREAD_SERIALIZED) unless the
// program already did, and finalises it at exit. `rank`/`world` < 0: taken from MPI_COMM_WORLD;
// otherwise they must equal it. `timeoutS`: how long a receive, the communicators' setup, the
// start barrier or the final gather waits for a peer before failing; MPI_Init, the ranks' meeting
// at exit and MPI_Finalize wait as long, at least kMpiExitFloorS (runtime/MpiExit.h). Throws Error(PFRT_ERROR_UNAVAILABLE) when the runtime
// was built without MPI.
std::unique_ptr<Transport> createMpiTransport(int rank, int world, double timeoutS);
// True when the runtime was built with MPI.
bool mpiTransportCompiled();
// The rank/world of a launcher's environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE,
// PMIX_RANK with OMPI size); false when none is set.
bool launcherRank(int &rank, int &world);
// Marks the run as failed: at exit MPI is aborted (so mpirun stops the peers) instead of finalised.
void mpiMarkFailed();
// Tests: bytes per rank in one round of a gather (0: the default, 64 MiB), so that tests can
// cover parts that take many rounds without gigabytes of data.
void mpiSetGatherChunkForTesting(uint64_t bytes);

} // namespace pfrt

#endif // PFRT_TRANSPORT_H
