// NCCL point-to-point channels between rank processes (CUDA backend, one process per rank).
//
// libnccl is loaded at run time (dlopen of PFRT_NCCL_LIBRARY, else libnccl.so.2), not linked: it
// is a 200 MB library that many GPU machines lack, and a binary that needs it only for rank mode
// must still start without it. The entry points are kept as function pointers (NcclApi), which
// also lets the tests drive the channel logic with a fake NCCL on machines without GPUs.
//
// One two-rank communicator per ordered link (orderedChannelLinks, runtime/Transport.h) whose ends
// are on different ranks: the link's channels carry their messages in the same order at both ends,
// one message per channel and iteration, so the k-th ncclSend on a communicator always meets its
// k-th ncclRecv. A 1F1B pipeline needs one communicator per direction between neighbouring ranks,
// whatever its microbatch count (one per channel, as before, was 2 per microbatch: 126 on a middle
// rank of the bundled example). The sender enqueues a link's sends on the link's own stream, so a
// send never blocks the sender's later work, as the compiler's simulation assumes; sends of one
// link wait for each other only as their receives do. Communicators are created nonblocking
// (ncclConfig_t.blocking = 0) and polled with a time limit, so a peer that never joins is an error
// after peer_timeout_s, never a hang.
#ifndef PFRT_NCCL_H
#define PFRT_NCCL_H

#include "runtime/Transport.h"

#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pfrt {

struct NcclApi {
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) commInitRankConfig = nullptr;
  decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&ncclCommFinalize) commFinalize = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclGetLastError) getLastError = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  int version = 0;  // ncclGetVersion: major * 10000 + minor * 100 + patch
  std::string path; // the library that was loaded
  void *handle = nullptr;
};

// The oldest libnccl taken (ncclGetVersion's code of 2.19.0), and a version code as "2.28.9"
// (codes before 2.9 were major * 1000 + minor * 100 + patch).
constexpr int kNcclOldest = 21900;
std::string ncclVersionName(int code);

// Loads libnccl (PFRT_NCCL_LIBRARY if set, else libnccl.so.2) and resolves NcclApi. Returns null
// and sets `error` when the library or one of its symbols is missing, or when it is older than
// kNcclOldest.
std::shared_ptr<const NcclApi> loadNccl(std::string &error);

// The links of one rank that cross to another rank.
class NcclChannels {
public:
  // Collective: every rank calls it with the program's links (orderedChannelLinks) in the same
  // order. Creates this rank's communicators on the current CUDA device. The unique ids are
  // exchanged with transport.allGather. Throws Error (PFRT_ERROR_BACKEND) on an NCCL error, or
  // when the communicators are not all ready after timeoutS (the failing ones are named).
  NcclChannels(std::shared_ptr<const NcclApi> api,
               const std::vector<std::vector<ChannelKey>> &links, Transport &transport,
               double timeoutS);
  ~NcclChannels();
  NcclChannels(const NcclChannels &) = delete;
  NcclChannels &operator=(const NcclChannels &) = delete;

  // True when `key` crosses between this rank and another one.
  bool has(const ChannelKey &key) const { return linkOf_.count(key) != 0; }
  // Crossing channels of this rank, and the communicators (links) that carry them.
  size_t size() const { return linkOf_.size(); }
  size_t communicators() const { return links_.size(); }
  // The link (0 .. communicators()-1) that carries `key`; its channels share a stream and a
  // buffer on the sender. Throws std::out_of_range when !has(key).
  size_t linkOf(const ChannelKey &key) const { return linkOf_.at(key); }
  // Collective, once after the constructor: connects every link with one 1-byte message from
  // `buffer` (device memory of at least 1 byte) on `stream`, all links in one NCCL group, and
  // waits (polling, at most the time limit) until the group is enqueued. NCCL connects a pair of
  // ranks on their first message, and the connection needs both ends: without this, a link's
  // first send would wait for a receive that its peer issues only once told the send is enqueued.
  // The caller then waits for `stream` (the messages themselves) with waitStream.
  void connect(void *buffer, cudaStream_t stream);
  // Waits until `stream` has finished its work, polling the communicators for errors; throws
  // Error (PFRT_ERROR_BACKEND) on an NCCL error or after the time limit.
  void waitStream(cudaStream_t stream, const char *what);
  // Enqueues the channel's send (this rank is its sender) / receive (its receiver) of `bytes` on
  // `stream`. Throws Error (PFRT_ERROR_BACKEND) when NCCL reports an error. Calls from several
  // threads are serialized (NCCL calls on one device must not run concurrently).
  void send(const ChannelKey &key, const void *buffer, size_t bytes, cudaStream_t stream);
  void recv(const ChannelKey &key, void *buffer, size_t bytes, cudaStream_t stream);
  // Throws when a communicator reports an asynchronous error (a peer failed). From any thread;
  // while another thread sends or receives (it checks the communicator itself) it returns at once.
  void check();
  // Tears the communicators down: finalize (flushes outstanding operations) then destroy; after
  // an error, abort instead. The destructor does it too. From any thread; not from within
  // another call of this object.
  void close(bool failed);

private:
  struct Link {
    std::vector<ChannelKey> channels;
    ncclComm_t comm = nullptr;
    bool sender = false; // this rank sends on the link (rank 0 of its communicator)
  };
  // The constructor's part inside one NCCL group: this rank's communicators from the ids.
  void createCommunicators(const std::vector<std::vector<ChannelKey>> &links,
                           Transport &transport, const std::vector<std::string> &all, size_t head);
  void settle(const Link &link, const char *what, const std::string &where);
  void settleAll(const char *what);
  [[noreturn]] void fail(const std::string &where, ncclComm_t comm, const char *what,
                         ncclResult_t result);

  std::shared_ptr<const NcclApi> api_;
  double timeoutS_;
  std::vector<Link> links_;
  std::map<ChannelKey, size_t> linkOf_;
  std::mutex mutex_; // NCCL calls of this rank, one at a time
  bool closed_ = false;
};

// "device S -> device D tag T" for messages.
std::string channelName(const ChannelKey &key);
// "device S -> device D tag T", or "... tags T1, T2, ... (N channels)" for a link of several.
std::string linkName(const std::vector<ChannelKey> &link);

} // namespace pfrt

#endif // PFRT_NCCL_H
