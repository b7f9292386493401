// NCCL rank transfers (runtime/Nccl.h) without GPUs: loading the real library, and the channel
// setup (id exchange, one two-rank communicator per crossing channel, nonblocking creation with
// a time limit, errors) driven through a fake NCCL by three ranks on threads. The real transfers
// need two GPUs in two processes: pipefill-run.nccl (test/runtime/nccl_test.py) runs them.
#include "runtime/Nccl.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace pfrt {
namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::string old_;
  bool had_ = false;
};

TEST(NcclLibrary, MissingLibraryIsAClearError) {
  ScopedEnv env("PFRT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  std::string error;
  EXPECT_EQ(loadNccl(error), nullptr);
  EXPECT_NE(error.find("cannot load the NCCL library '/nonexistent/libnccl.so.2'"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("PFRT_NCCL_LIBRARY"), std::string::npos) << error;
}

TEST(NcclLibrary, LibraryWithoutNcclSymbolsIsRefused) {
  // A real shared library that is not NCCL: every entry point is named as missing.
  ScopedEnv env("PFRT_NCCL_LIBRARY", "libm.so.6");
  std::string error;
  EXPECT_EQ(loadNccl(error), nullptr);
  EXPECT_NE(error.find("lacks ncclGetVersion"), std::string::npos) << error;
}

TEST(NcclLibrary, LoadsTheInstalledLibrary) {
  std::string error;
  std::shared_ptr<const NcclApi> api = loadNccl(error);
  if (!api)
    GTEST_SKIP() << "libnccl.so.2 is not installed here: " << error;
  // The library's own version, read through the resolved pointer, against the header we built
  // with: same major version (the loader refuses older ones).
  EXPECT_EQ(api->version / 10000, NCCL_MAJOR);
  int again = 0;
  ASSERT_EQ(api->getVersion(&again), ncclSuccess);
  EXPECT_EQ(again, api->version);
  // A unique id needs no GPU (NCCL's bootstrap picks a network interface): two are different.
  ncclUniqueId a, b;
  ASSERT_EQ(api->getUniqueId(&a), ncclSuccess);
  ASSERT_EQ(api->getUniqueId(&b), ncclSuccess);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
  const std::string text = api->getErrorString(ncclInvalidArgument);
  EXPECT_NE(text.find("invalid argument"), std::string::npos) << text;
}

// --- a fake NCCL and transport: three "ranks" on threads ----------------------------------------

struct FakeComm {
  std::string id;
  int rank = -1;
};

struct FakeWorld {
  std::mutex m;
  std::condition_variable cv;
  // id exchange
  int world = 3, arrived = 0, round = 0;
  std::vector<std::string> parts;
  // rendezvous: unique id -> ranks that joined; ids that never complete
  std::map<std::string, std::set<int>> joined;
  std::set<int> hungRanks;           // ranks whose communicators never get ready
  int failInitOnRank = -1;           // this rank's first init returns ncclSystemError
  std::atomic<int> nextId{1};
  std::vector<std::tuple<std::string, int, size_t, int>> ops; // id, rank, bytes, 0 send / 1 recv
  std::vector<FakeComm *> comms;
  std::atomic<int> finalized{0}, destroyed{0}, aborted{0};
  // Declared before the ranks' channels in each test, so it outlives them.
  ~FakeWorld() {
    for (FakeComm *c : comms)
      delete c;
  }
};

FakeWorld *gWorld = nullptr;
thread_local int tRank = -1;

ncclResult_t fakeGetVersion(int *v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
ncclResult_t fakeGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "id-%d", gWorld->nextId++);
  return ncclSuccess;
}
ncclResult_t fakeInit(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                      ncclConfig_t *config) {
  EXPECT_EQ(nranks, 2);
  EXPECT_EQ(config->blocking, 0) << "communicators must be created nonblocking";
  std::lock_guard<std::mutex> lock(gWorld->m);
  if (gWorld->failInitOnRank == tRank) {
    gWorld->failInitOnRank = -1;
    return ncclSystemError;
  }
  auto *c = new FakeComm{id.internal, rank};
  gWorld->comms.push_back(c);
  if (!gWorld->hungRanks.count(tRank))
    gWorld->joined[c->id].insert(rank);
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclInProgress;
}
ncclResult_t fakeAsyncError(ncclComm_t comm, ncclResult_t *state) {
  auto *c = reinterpret_cast<FakeComm *>(comm);
  std::lock_guard<std::mutex> lock(gWorld->m);
  *state = gWorld->joined[c->id].size() == 2 ? ncclSuccess : ncclInProgress;
  return ncclSuccess;
}
ncclResult_t fakeFinalize(ncclComm_t) {
  ++gWorld->finalized;
  return ncclSuccess;
}
ncclResult_t fakeDestroy(ncclComm_t) {
  ++gWorld->destroyed;
  return ncclSuccess;
}
ncclResult_t fakeAbort(ncclComm_t) {
  ++gWorld->aborted;
  return ncclSuccess;
}
ncclResult_t fakeSend(const void *, size_t bytes, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t) {
  auto *c = reinterpret_cast<FakeComm *>(comm);
  EXPECT_EQ(type, ncclUint8);
  EXPECT_EQ(c->rank, 0) << "the sender is rank 0 of its channel's communicator";
  EXPECT_EQ(peer, 1);
  std::lock_guard<std::mutex> lock(gWorld->m);
  gWorld->ops.emplace_back(c->id, tRank, bytes, 0);
  return ncclSuccess;
}
ncclResult_t fakeRecv(void *, size_t bytes, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t) {
  auto *c = reinterpret_cast<FakeComm *>(comm);
  EXPECT_EQ(type, ncclUint8);
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(peer, 0);
  std::lock_guard<std::mutex> lock(gWorld->m);
  gWorld->ops.emplace_back(c->id, tRank, bytes, 1);
  return ncclSuccess;
}
const char *fakeErrorString(ncclResult_t r) {
  return r == ncclSystemError ? "unhandled system error (fake)" : "fake error";
}
const char *fakeLastError(ncclComm_t) { return ""; }

std::shared_ptr<const NcclApi> fakeApi() {
  auto api = std::make_shared<NcclApi>();
  api->getVersion = fakeGetVersion;
  api->getUniqueId = fakeGetUniqueId;
  api->commInitRankConfig = fakeInit;
  api->commGetAsyncError = fakeAsyncError;
  api->commFinalize = fakeFinalize;
  api->commDestroy = fakeDestroy;
  api->commAbort = fakeAbort;
  api->send = fakeSend;
  api->recv = fakeRecv;
  api->getErrorString = fakeErrorString;
  api->getLastError = fakeLastError;
  api->version = NCCL_VERSION_CODE;
  return api;
}

// A rank is a device, as in pipefill-run's rank mode.
class FakeTransport : public Transport {
public:
  FakeTransport(FakeWorld &w, int rank) : w_(w), rank_(rank) {}
  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int world() const override { return w_.world; }
  int rankOf(uint32_t device) const override { return static_cast<int>(device); }
  void open(const std::vector<ChannelKey> &, int64_t) override {}
  void publish(const ChannelKey &, int64_t, const Message &) override {}
  bool take(const ChannelKey &, int64_t, Message &, const std::atomic<bool> &) override {
    return false;
  }
  void consumed(const ChannelKey &, int64_t) override {}
  bool waitConsumed(const ChannelKey &, int64_t, int64_t, const std::atomic<bool> &) override {
    return true;
  }
  void wakeAll() override {}
  std::vector<std::string> allGather(const std::string &mine) override {
    std::unique_lock<std::mutex> lock(w_.m);
    if (w_.parts.size() != static_cast<size_t>(w_.world))
      w_.parts.assign(static_cast<size_t>(w_.world), "");
    w_.parts[static_cast<size_t>(rank_)] = mine;
    const int round = w_.round;
    if (++w_.arrived == w_.world) {
      w_.arrived = 0;
      ++w_.round;
      w_.cv.notify_all();
    } else {
      w_.cv.wait(lock, [&] { return w_.round != round; });
    }
    return w_.parts;
  }

private:
  FakeWorld &w_;
  int rank_;
};

// A 3-stage pipeline's channels: forward 0->1->2 and backward 2->1->0, plus a second tag 0->1.
const std::vector<ChannelKey> kChannels = {{0, 1, 0}, {0, 1, 5}, {1, 2, 1}, {2, 1, 2}, {1, 0, 3}};

struct RankOutcome {
  std::unique_ptr<NcclChannels> channels;
  std::string error;
};

std::vector<RankOutcome> runRanks(FakeWorld &w, double timeoutS,
                                  const std::function<void(int, NcclChannels &)> &body = {}) {
  gWorld = &w;
  std::vector<RankOutcome> out(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      tRank = r;
      FakeTransport t(w, r);
      try {
        out[r].channels = std::make_unique<NcclChannels>(fakeApi(), kChannels, t, timeoutS);
        if (body)
          body(r, *out[r].channels);
      } catch (const Error &e) {
        out[r].error = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  return out;
}

TEST(NcclChannels, OneCommunicatorPerCrossingChannelWithMatchingIds) {
  FakeWorld w;
  std::vector<RankOutcome> ranks = runRanks(w, 10.0, [](int r, NcclChannels &c) {
    // Each rank sends and receives on the channels its device ends, as the backend would.
    for (const ChannelKey &k : kChannels) {
      if (static_cast<int>(k.src) == r)
        c.send(k, nullptr, 100 + k.tag, nullptr);
      if (static_cast<int>(k.dst) == r)
        c.recv(k, nullptr, 100 + k.tag, nullptr);
    }
  });
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(ranks[r].error, "") << "rank " << r;
  // Which channels each rank holds: exactly those its device ends.
  for (int r = 0; r < 3; ++r)
    for (const ChannelKey &k : kChannels)
      EXPECT_EQ(ranks[r].channels->has(k), static_cast<int>(k.src) == r || static_cast<int>(k.dst) == r)
          << "rank " << r << " " << channelName(k);
  EXPECT_EQ(ranks[0].channels->size(), 3u);
  EXPECT_EQ(ranks[1].channels->size(), 5u);
  EXPECT_EQ(ranks[2].channels->size(), 2u);
  // Every communicator id was joined by exactly its two ends, and each channel's send and receive
  // went through the same communicator with the bytes given: the exchange mapped ids correctly.
  EXPECT_EQ(w.joined.size(), kChannels.size());
  for (const auto &kv : w.joined)
    EXPECT_EQ(kv.second, (std::set<int>{0, 1})) << kv.first;
  std::map<std::string, std::vector<std::tuple<int, size_t, int>>> byId;
  for (const auto &op : w.ops)
    byId[std::get<0>(op)].emplace_back(std::get<1>(op), std::get<2>(op), std::get<3>(op));
  ASSERT_EQ(byId.size(), kChannels.size());
  for (const ChannelKey &k : kChannels) {
    bool found = false;
    for (const auto &kv : byId) {
      std::set<std::tuple<int, size_t, int>> got(kv.second.begin(), kv.second.end());
      std::set<std::tuple<int, size_t, int>> want = {
          {static_cast<int>(k.src), 100 + k.tag, 0}, {static_cast<int>(k.dst), 100 + k.tag, 1}};
      found = found || got == want;
    }
    EXPECT_TRUE(found) << channelName(k) << ": no communicator carried its send and its receive";
  }
  for (RankOutcome &r : ranks)
    r.channels->close(false);
  EXPECT_EQ(w.finalized.load(), 10); // 5 channels x 2 ends
  EXPECT_EQ(w.destroyed.load(), 10);
  EXPECT_EQ(w.aborted.load(), 0);
}

TEST(NcclChannels, APeerThatNeverJoinsIsATimeoutNotAHang) {
  FakeWorld w;
  w.hungRanks = {2}; // rank 2 exchanges ids but its communicators never get ready
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankOutcome> ranks = runRanks(w, 0.3);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Rank 1 shares channels with rank 2: it fails, naming one of them; rank 0 does not depend on
  // rank 2 and succeeds.
  EXPECT_EQ(ranks[0].error, "");
  EXPECT_NE(ranks[1].error.find("creating the communicator on channel device 1 -> device 2 tag 1"),
            std::string::npos)
      << ranks[1].error;
  EXPECT_NE(ranks[1].error.find("the peer rank did not join or hung"), std::string::npos)
      << ranks[1].error;
  EXPECT_NE(ranks[2].error, "");
  EXPECT_LT(s, 10.0) << "the time limit was not applied";
  EXPECT_GT(w.aborted.load(), 0) << "a failed setup must abort its communicators";
}

TEST(NcclChannels, AnInitErrorNamesTheChannelAndNcclsMessage) {
  FakeWorld w;
  w.failInitOnRank = 0;
  std::vector<RankOutcome> ranks = runRanks(w, 0.3);
  EXPECT_NE(ranks[0].error.find("NCCL ncclCommInitRankConfig on channel device 0 -> device 1 tag 0 "
                                "failed: unhandled system error (fake)"),
            std::string::npos)
      << ranks[0].error;
  // Its peer on that channel then times out instead of hanging.
  EXPECT_NE(ranks[1].error.find("did not complete within"), std::string::npos) << ranks[1].error;
}

TEST(NcclChannels, RanksThatDisagreeOnTheProgramAreRefused) {
  // A rank whose program has another channel list contributes the wrong number of ids.
  FakeWorld w;
  gWorld = &w;
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      tRank = r;
      FakeTransport t(w, r);
      std::vector<ChannelKey> channels = kChannels;
      if (r == 0)
        channels.push_back({0, 2, 9});
      try {
        NcclChannels c(fakeApi(), channels, t, 0.3);
      } catch (const Error &e) {
        errors[r] = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[r].find("do all ranks run the same program?"), std::string::npos)
        << "rank " << r << ": " << errors[r];
}

} // namespace
} // namespace pfrt
