#include "runtime/Nccl.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <thread>

namespace pfrt {

std::string channelName(const ChannelKey &key) {
  return "device " + std::to_string(key.src) + " -> device " + std::to_string(key.dst) + " tag " +
         std::to_string(key.tag);
}

std::string linkName(const std::vector<ChannelKey> &link) {
  if (link.size() == 1)
    return channelName(link.front());
  std::string tags;
  const size_t shown = std::min<size_t>(link.size(), 4);
  for (size_t i = 0; i < shown; ++i)
    tags += (i ? ", " : "") + std::to_string(link[i].tag);
  if (shown < link.size())
    tags += ", ...";
  return "device " + std::to_string(link.front().src) + " -> device " +
         std::to_string(link.front().dst) + " tags " + tags + " (" +
         std::to_string(link.size()) + " channels)";
}

std::string ncclVersionName(int code) {
  const bool old = code < 10000; // before 2.9
  const int major = old ? code / 1000 : code / 10000;
  const int minor = old ? code % 1000 / 100 : code % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

namespace {

template <typename Fn> bool resolve(void *handle, const char *name, Fn &out, std::string &missing) {
  void *sym = dlsym(handle, name);
  if (!sym) {
    missing += missing.empty() ? name : std::string(", ") + name;
    return false;
  }
  out = reinterpret_cast<Fn>(sym);
  return true;
}

double elapsedS(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// FNV-1a over the links: ranks compare it before trusting each other's ids.
uint64_t linksHash(const std::vector<std::vector<ChannelKey>> &links) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const std::vector<ChannelKey> &link : links) {
    mix(static_cast<uint32_t>(link.size()));
    for (const ChannelKey &k : link) {
      mix(k.src);
      mix(k.dst);
      mix(k.tag);
    }
  }
  return h;
}

// Polling: yield for the first rounds (a send or receive settles in tens of microseconds), then
// sleep longer and longer.
void backoff(int spin) {
  if (spin < 50)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 100 ? 20 : spin < 300 ? 100 : 1000));
}

// NCCL settings that break this design, refused by name: a blocking communicator waits without
// a time limit (a peer that never comes is a hang), and one rendezvous address for every unique
// id makes the concurrent communicator setups collide.
void refuseEnvironment() {
  const char *blocking = std::getenv("NCCL_COMM_BLOCKING");
  if (blocking && std::strcmp(blocking, "0") != 0 && *blocking)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                std::string("NCCL_COMM_BLOCKING=") + blocking +
                    " makes NCCL's communicators blocking; pipefill's rank transfers need "
                    "nonblocking ones (a peer that never joins would hang the rank): unset it");
  const char *commId = std::getenv("NCCL_COMM_ID");
  if (commId && *commId)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                std::string("NCCL_COMM_ID=") + commId +
                    " gives every NCCL communicator one rendezvous address; pipefill makes one "
                    "communicator per link and exchanges their ids itself: unset it");
}

// The links `senderRank` sends on to another rank, in link order: the communicators whose unique
// ids that rank makes.
std::vector<const std::vector<ChannelKey> *>
crossing(const std::vector<std::vector<ChannelKey>> &links, const Transport &transport,
         int senderRank) {
  std::vector<const std::vector<ChannelKey> *> out;
  for (const std::vector<ChannelKey> &link : links)
    if (!link.empty() && transport.rankOf(link.front().src) == senderRank &&
        transport.rankOf(link.front().dst) != senderRank)
      out.push_back(&link);
  return out;
}

} // namespace

std::shared_ptr<const NcclApi> loadNccl(std::string &error) {
  const char *env = std::getenv("PFRT_NCCL_LIBRARY");
  const std::string path = env && *env ? env : "libnccl.so.2";
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = "cannot load the NCCL library '" + path + "' (" + (why ? why : "unknown error") +
            "); install NCCL or point PFRT_NCCL_LIBRARY at libnccl.so.2";
    return nullptr;
  }
  auto api = std::make_shared<NcclApi>();
  api->handle = handle;
  api->path = path;
  std::string missing;
  resolve(handle, "ncclGetVersion", api->getVersion, missing);
  resolve(handle, "ncclGetUniqueId", api->getUniqueId, missing);
  resolve(handle, "ncclCommInitRankConfig", api->commInitRankConfig, missing);
  resolve(handle, "ncclCommGetAsyncError", api->commGetAsyncError, missing);
  resolve(handle, "ncclCommFinalize", api->commFinalize, missing);
  resolve(handle, "ncclCommDestroy", api->commDestroy, missing);
  resolve(handle, "ncclCommAbort", api->commAbort, missing);
  resolve(handle, "ncclSend", api->send, missing);
  resolve(handle, "ncclRecv", api->recv, missing);
  resolve(handle, "ncclGetErrorString", api->getErrorString, missing);
  resolve(handle, "ncclGetLastError", api->getLastError, missing);
  resolve(handle, "ncclGroupStart", api->groupStart, missing);
  resolve(handle, "ncclGroupEnd", api->groupEnd, missing);
  if (!missing.empty()) {
    error = "the NCCL library '" + path + "' lacks " + missing + " (NCCL " +
            ncclVersionName(kNcclOldest) + " or newer is needed)";
    dlclose(handle);
    return nullptr;
  }
  // 2.19 or newer: before it, a thread's group job was one at a time, so a second nonblocking
  // call (the next communicator, or a send right after a receive) could fail with "invalid usage"
  // while the first was still in progress.
  if (api->getVersion(&api->version) != ncclSuccess || api->version < kNcclOldest) {
    error = "the NCCL library '" + path + "' is version " + ncclVersionName(api->version) +
            "; NCCL " + ncclVersionName(kNcclOldest) +
            " or newer is needed (point PFRT_NCCL_LIBRARY at a newer libnccl.so.2)";
    dlclose(handle);
    return nullptr;
  }
  // The handle stays open for the process's lifetime: communicators may outlive their owner
  // until NCCL's own threads have finished.
  return api;
}

NcclChannels::NcclChannels(std::shared_ptr<const NcclApi> api,
                           const std::vector<std::vector<ChannelKey>> &links,
                           Transport &transport, double timeoutS)
    : api_(std::move(api)), timeoutS_(timeoutS) {
  refuseEnvironment();
  const int me = transport.rank();
  // This rank makes the unique id of every crossing link it sends on; all ranks exchange them.
  // Each part: the hash of the sender's links, then its ids.
  const std::vector<const std::vector<ChannelKey> *> mine = crossing(links, transport, me);
  const uint64_t hash = linksHash(links);
  const size_t head = sizeof(hash);
  std::string blob(head + mine.size() * sizeof(ncclUniqueId), '\0');
  std::memcpy(&blob[0], &hash, head);
  for (size_t i = 0; i < mine.size(); ++i) {
    ncclUniqueId id;
    ncclResult_t r = api_->getUniqueId(&id);
    if (r != ncclSuccess)
      fail(linkName(*mine[i]), nullptr, "ncclGetUniqueId", r);
    std::memcpy(&blob[head + i * sizeof(ncclUniqueId)], &id, sizeof(ncclUniqueId));
  }
  const std::vector<std::string> all = transport.allGather(blob);
  if (static_cast<int>(all.size()) != transport.world())
    throw Error(PFRT_ERROR_INTERNAL, "NCCL setup: the id exchange returned " +
                                         std::to_string(all.size()) + " parts for " +
                                         std::to_string(transport.world()) + " ranks");
  for (size_t r = 0; r < all.size(); ++r) {
    uint64_t theirs = 0;
    if (all[r].size() >= head)
      std::memcpy(&theirs, all[r].data(), head);
    if (all[r].size() < head || theirs != hash)
      throw Error(PFRT_ERROR_INVALID_PROGRAM,
                  "NCCL setup: rank " + std::to_string(r) +
                      " has another list of channels than rank " + std::to_string(me) +
                      " (do all ranks run the same program?)");
  }
  for (int r = 0; r < transport.world(); ++r) {
    const size_t theirs = crossing(links, transport, r).size();
    const std::string &part = all[static_cast<size_t>(r)];
    if (part.size() != head + theirs * sizeof(ncclUniqueId))
      throw Error(PFRT_ERROR_INTERNAL,
                  "NCCL setup: rank " + std::to_string(r) + " sent " +
                      std::to_string(part.size()) + " bytes of ids for " +
                      std::to_string(theirs) + " links (do all ranks run the same program?)");
  }
  // Every communicator of this rank, created nonblocking in one group (NCCL's way to make
  // several from one thread), then polled together.
  ncclResult_t group = api_->groupStart();
  if (group != ncclSuccess)
    fail("(all)", nullptr, "ncclGroupStart (creating the communicators)", group);
  try {
    createCommunicators(links, transport, all, head);
  } catch (...) {
    api_->groupEnd();
    close(true);
    throw;
  }
  group = api_->groupEnd();
  if (group != ncclSuccess && group != ncclInProgress) {
    close(true);
    fail("(all)", nullptr, "ncclGroupEnd (creating the communicators)", group);
  }
  try {
    settleAll("creating the communicator");
  } catch (...) {
    close(true);
    throw;
  }
}

void NcclChannels::createCommunicators(const std::vector<std::vector<ChannelKey>> &links,
                                       Transport &transport, const std::vector<std::string> &all,
                                       size_t head) {
  const int me = transport.rank();
  for (int r = 0; r < transport.world(); ++r) {
    const std::vector<const std::vector<ChannelKey> *> theirs = crossing(links, transport, r);
    const std::string &part = all[static_cast<size_t>(r)];
    for (size_t i = 0; i < theirs.size(); ++i) {
      const std::vector<ChannelKey> &channels = *theirs[i];
      const bool sender = transport.rankOf(channels.front().src) == me;
      if (!sender && transport.rankOf(channels.front().dst) != me)
        continue;
      ncclUniqueId id;
      std::memcpy(&id, &part[head + i * sizeof(ncclUniqueId)], sizeof(id));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t comm = nullptr;
      ncclResult_t res = api_->commInitRankConfig(&comm, 2, id, sender ? 0 : 1, &config);
      if (res != ncclSuccess && res != ncclInProgress) {
        if (comm)
          api_->commAbort(comm); // NCCL may hand back a communicator that failed
        fail(linkName(channels), nullptr, "ncclCommInitRankConfig", res);
      }
      for (const ChannelKey &k : channels)
        linkOf_[k] = links_.size();
      links_.push_back(Link{channels, comm, sender});
    }
  }
}

NcclChannels::~NcclChannels() { close(false); }

void NcclChannels::fail(const std::string &where, ncclComm_t comm, const char *what,
                        ncclResult_t result) {
  std::string detail = api_->getErrorString ? api_->getErrorString(result) : "error";
  if (api_->getLastError) {
    const char *last = api_->getLastError(comm);
    if (last && *last)
      detail += std::string(": ") + last;
  }
  throw Error(PFRT_ERROR_BACKEND,
              "NCCL " + std::string(what) + " on channel " + where + " failed: " + detail);
}

// Nonblocking communicators: a call may return ncclInProgress; the next call on the communicator
// must wait until its state is ncclSuccess.
void NcclChannels::settle(const Link &link, const char *what, const std::string &where) {
  const auto start = std::chrono::steady_clock::now();
  for (int spin = 0;; ++spin) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api_->commGetAsyncError(link.comm, &state);
    if (r != ncclSuccess)
      fail(where, link.comm, what, r);
    if (state == ncclSuccess)
      return;
    if (state != ncclInProgress)
      fail(where, link.comm, what, state);
    if (elapsedS(start) > timeoutS_)
      throw Error(PFRT_ERROR_BACKEND,
                  "NCCL " + std::string(what) + " on channel " + where +
                      " did not complete within " + seconds(timeoutS_) +
                      " s: the peer rank did not join or hung (--peer-timeout sets the limit)");
    backoff(spin);
  }
}

// Every link at once, with one time limit: waiting for each in turn added up to a limit per
// link.
void NcclChannels::settleAll(const char *what) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<bool> ready(links_.size(), false);
  for (int spin = 0;; ++spin) {
    size_t waiting = links_.size();
    for (size_t l = 0; l < links_.size(); ++l) {
      if (ready[l]) {
        --waiting;
        continue;
      }
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = api_->commGetAsyncError(links_[l].comm, &state);
      if (r != ncclSuccess)
        fail(linkName(links_[l].channels), links_[l].comm, what, r);
      if (state != ncclSuccess && state != ncclInProgress)
        fail(linkName(links_[l].channels), links_[l].comm, what, state);
      if (state == ncclSuccess) {
        ready[l] = true;
        --waiting;
      }
    }
    if (waiting == 0)
      return;
    if (elapsedS(start) > timeoutS_) {
      size_t first = 0;
      while (ready[first])
        ++first;
      throw Error(PFRT_ERROR_BACKEND,
                  "NCCL " + std::string(what) + " on channel " + linkName(links_[first].channels) +
                      " did not complete within " + seconds(timeoutS_) +
                      " s: the peer rank did not join or hung (--peer-timeout sets the limit)");
    }
    backoff(spin);
  }
}

void NcclChannels::connect(void *buffer, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (links_.empty())
    return;
  ncclResult_t r = api_->groupStart();
  if (r != ncclSuccess)
    fail(linkName(links_.front().channels), nullptr, "ncclGroupStart", r);
  for (const Link &link : links_) {
    // A link's sender is rank 0 of its communicator (see the constructor).
    const bool sender = link.sender;
    r = sender ? api_->send(buffer, 1, ncclUint8, /*peer=*/1, link.comm, stream)
               : api_->recv(buffer, 1, ncclUint8, /*peer=*/0, link.comm, stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      api_->groupEnd();
      fail(linkName(link.channels), link.comm,
           sender ? "ncclSend (connecting)" : "ncclRecv (connecting)", r);
    }
  }
  r = api_->groupEnd();
  if (r != ncclSuccess && r != ncclInProgress)
    fail(linkName(links_.front().channels), nullptr, "ncclGroupEnd (connecting)", r);
  settleAll("connecting the link");
}

void NcclChannels::waitStream(cudaStream_t stream, const char *what) {
  const auto start = std::chrono::steady_clock::now();
  for (int spin = 0;; ++spin) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return;
    if (e != cudaErrorNotReady)
      throw Error(PFRT_ERROR_BACKEND, std::string("NCCL ") + what + ": " +
                                          cudaGetErrorString(e));
    check();
    if (elapsedS(start) > timeoutS_)
      throw Error(PFRT_ERROR_BACKEND, std::string("NCCL ") + what + " did not complete within " +
                                          seconds(timeoutS_) +
                                          " s: a peer rank hung (--peer-timeout sets the limit)");
    backoff(spin);
  }
}

void NcclChannels::send(const ChannelKey &key, const void *buffer, size_t bytes,
                        cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Link &link = links_[linkOf_.at(key)];
  ncclResult_t r = api_->send(buffer, bytes, ncclUint8, /*peer=*/1, link.comm, stream);
  if (r != ncclSuccess && r != ncclInProgress)
    fail(channelName(key), link.comm, "ncclSend", r);
  settle(link, "ncclSend", channelName(key));
}

void NcclChannels::recv(const ChannelKey &key, void *buffer, size_t bytes, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Link &link = links_[linkOf_.at(key)];
  ncclResult_t r = api_->recv(buffer, bytes, ncclUint8, /*peer=*/0, link.comm, stream);
  if (r != ncclSuccess && r != ncclInProgress)
    fail(channelName(key), link.comm, "ncclRecv", r);
  settle(link, "ncclRecv", channelName(key));
}

void NcclChannels::check() {
  // From any thread: the backend's GPU waits poll it (PeerWait.h) while others send and receive.
  // A thread in send() or recv() holds the lock and checks the communicator itself (settle(),
  // under the time limit); waiting for it here could hold a waiter past its own limit.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock())
    return;
  for (const Link &link : links_) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api_->commGetAsyncError(link.comm, &state);
    if (r != ncclSuccess)
      fail(linkName(link.channels), link.comm, "ncclCommGetAsyncError", r);
    if (state != ncclSuccess && state != ncclInProgress)
      fail(linkName(link.channels), link.comm, "a transfer", state);
  }
}

void NcclChannels::close(bool failed) {
  std::lock_guard<std::mutex> lock(mutex_); // a waiting thread may be in check()
  if (closed_)
    return;
  closed_ = true;
  if (!failed) {
    // Finalize flushes each communicator's outstanding operations (nonblocking: all are
    // finalized, then polled together under one time limit), then destroy frees them. A failure
    // here (a peer gone at the end) falls back to abort.
    for (Link &link : links_) {
      const ncclResult_t r = link.comm ? api_->commFinalize(link.comm) : ncclSuccess;
      failed = failed || (r != ncclSuccess && r != ncclInProgress);
    }
    if (!failed) {
      try {
        settleAll("finalizing the communicator");
      } catch (const Error &) {
        failed = true;
      }
    }
  }
  for (Link &link : links_) {
    if (!link.comm)
      continue;
    if (failed)
      api_->commAbort(link.comm);
    else
      api_->commDestroy(link.comm);
  }
  links_.clear();
  linkOf_.clear();
}

} // namespace pfrt
