// NCCL point-to-point channels between rank processes (CUDA backend, one process per rank).
//
// libnccl is loaded at run time (dlopen of PFRT_NCCL_LIBRARY, else libnccl.so.2), not linked: it
// is a 200 MB library that many GPU machines lack, and a binary that needs it only for rank mode
// must still start without it. The entry points are kept as function pointers (NcclApi), which
// also lets the tests drive the channel logic with a fake NCCL on machines without GPUs.
//
// One two-rank communicator per channel (sender device, receiver device, tag) whose ends are on
// different ranks. A channel carries one message per iteration, in iteration order on both ends,
// so its ncclSend/ncclRecv pairs always match; sends of different channels never wait for each
// other (each channel has its own stream on the sender), so a send never blocks the sender's
// later work, as the compiler's simulation assumes. Communicators are created nonblocking
// (ncclConfig_t.blocking = 0) and polled with a time limit, so a peer that never joins is an error
// after peer_timeout_s, never a hang.
#ifndef PFRT_NCCL_H
#define PFRT_NCCL_H

#include "runtime/Transport.h"

#include <nccl.h>

#include <map>
#include <memory>
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
  int version = 0;  // ncclGetVersion: major * 10000 + minor * 100 + patch
  std::string path; // the library that was loaded
  void *handle = nullptr;
};

// Loads libnccl (PFRT_NCCL_LIBRARY if set, else libnccl.so.2) and resolves NcclApi. Returns null
// and sets `error` when the library or one of its symbols is missing, or when its version is
// older than the header's major version.
std::shared_ptr<const NcclApi> loadNccl(std::string &error);

// The channels of one rank that cross to another rank.
class NcclChannels {
public:
  // Collective: every rank calls it with the program's channel list in the same order (the order
  // the executor opens the transport with). Creates this rank's communicators on the current CUDA
  // device. The unique ids are exchanged with transport.allGather. Throws Error
  // (PFRT_ERROR_BACKEND) on an NCCL error, or when the communicators are not all ready after
  // timeoutS (the failing ones are named).
  NcclChannels(std::shared_ptr<const NcclApi> api, const std::vector<ChannelKey> &channels,
               Transport &transport, double timeoutS);
  ~NcclChannels();
  NcclChannels(const NcclChannels &) = delete;
  NcclChannels &operator=(const NcclChannels &) = delete;

  // True when `key` crosses between this rank and another one.
  bool has(const ChannelKey &key) const { return comms_.count(key) != 0; }
  size_t size() const { return comms_.size(); }
  // Enqueues the channel's send (this rank is its sender) / receive (its receiver) of `bytes` on
  // `stream`. Throws Error (PFRT_ERROR_BACKEND) when NCCL reports an error.
  void send(const ChannelKey &key, const void *buffer, size_t bytes, cudaStream_t stream);
  void recv(const ChannelKey &key, void *buffer, size_t bytes, cudaStream_t stream);
  // Throws when a communicator reports an asynchronous error (a peer failed).
  void check();
  // Tears the communicators down: finalize (flushes outstanding operations) then destroy; after
  // an error, abort instead. The destructor does it too.
  void close(bool failed);

private:
  void settle(ncclComm_t comm, const ChannelKey &key, const char *what);
  [[noreturn]] void fail(const ChannelKey &key, const char *what, ncclResult_t result);

  std::shared_ptr<const NcclApi> api_;
  double timeoutS_;
  std::map<ChannelKey, ncclComm_t> comms_;
  bool closed_ = false;
};

// "src->dst tag T" for messages.
std::string channelName(const ChannelKey &key);

} // namespace pfrt

#endif // PFRT_NCCL_H
