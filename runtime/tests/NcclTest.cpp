// NCCL rank transfers (runtime/Nccl.h) without GPUs: loading the real library, and the channel
// setup (id exchange, one two-rank communicator per crossing ordered link, nonblocking creation
// with a time limit, errors) driven through a fake NCCL by ranks on threads. The fake matches each
// communicator's sends and receives in issue order, as NCCL does, so a link whose two ends issue
// its messages in different orders shows up as mismatched bytes. The real transfers need two GPUs
// in two processes: pipefill-run.nccl (test/runtime/nccl_test.py) runs them.
#include "runtime/Nccl.h"
#include "runtime/Program.h"
#include "runtime/testing/SamplePrograms.h"
#include "runtime/tests/TestUtil.h"

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

TEST(NcclLibrary, VersionCodesReadAsNcclWritesThem) {
  // ncclGetVersion's codes: major * 10000 + minor * 100 + patch from 2.9 on, major * 1000 + ...
  // before (nccl.h's NCCL_VERSION macro).
  EXPECT_EQ(ncclVersionName(NCCL_VERSION(2, 28, 9)), "2.28.9");
  EXPECT_EQ(ncclVersionName(NCCL_VERSION(2, 8, 4)), "2.8.4");
  EXPECT_EQ(ncclVersionName(kNcclOldest), "2.19.0");
  EXPECT_EQ(ncclVersionName(NCCL_VERSION_CODE),
            std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                std::to_string(NCCL_PATCH));
}

TEST(NcclLibrary, LoadsTheInstalledLibrary) {
  std::string error;
  std::shared_ptr<const NcclApi> api = loadNccl(error);
  if (!api)
    GTEST_SKIP() << "libnccl.so.2 is not installed here: " << error;
  // The library's own version, read through the resolved pointer: 2.19 or newer (the loader
  // refuses older ones).
  EXPECT_GE(api->version, kNcclOldest) << ncclVersionName(api->version);
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
  bool posted = false; // this end has issued a send or receive
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
  // Per communicator id, the bytes of its sends and of its receives in issue order: NCCL pairs
  // the k-th send with the k-th receive.
  std::map<std::string, std::vector<size_t>> sent, received;
  // As NCCL does, a communicator connects its two ends on their first messages, and an end's
  // first send or receive stays in progress until the other end has issued one too.
  bool connectOnFirstMessage = false;
  std::map<std::string, std::set<int>> postedBy; // communicator id -> ends that issued one
  std::atomic<int> groups{0};
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
thread_local int tGroupDepth = 0; // this thread's open ncclGroupStart calls

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
  // Before NCCL 2.19 a thread's second nonblocking init outside a group failed while the first
  // was in progress; NCCL's way to make several communicators from one thread is one group.
  EXPECT_GT(tGroupDepth, 0) << "communicators must be created inside an NCCL group";
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
  const bool joined = gWorld->joined[c->id].size() == 2;
  const bool connecting = gWorld->connectOnFirstMessage && c->posted &&
                          gWorld->postedBy[c->id].size() < 2;
  *state = joined && !connecting ? ncclSuccess : ncclInProgress;
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
  gWorld->sent[c->id].push_back(bytes);
  c->posted = true;
  gWorld->postedBy[c->id].insert(c->rank);
  return gWorld->connectOnFirstMessage ? ncclInProgress : ncclSuccess;
}
ncclResult_t fakeRecv(void *, size_t bytes, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t) {
  auto *c = reinterpret_cast<FakeComm *>(comm);
  EXPECT_EQ(type, ncclUint8);
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(peer, 0);
  std::lock_guard<std::mutex> lock(gWorld->m);
  gWorld->ops.emplace_back(c->id, tRank, bytes, 1);
  gWorld->received[c->id].push_back(bytes);
  c->posted = true;
  gWorld->postedBy[c->id].insert(c->rank);
  return gWorld->connectOnFirstMessage ? ncclInProgress : ncclSuccess;
}
const char *fakeErrorString(ncclResult_t r) {
  return r == ncclSystemError ? "unhandled system error (fake)" : "fake error";
}
const char *fakeLastError(ncclComm_t) { return ""; }
ncclResult_t fakeGroupStart() {
  ++gWorld->groups;
  ++tGroupDepth;
  return ncclSuccess;
}
ncclResult_t fakeGroupEnd() {
  EXPECT_GT(tGroupDepth, 0) << "ncclGroupEnd without ncclGroupStart";
  --tGroupDepth;
  return ncclSuccess;
}

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
  api->groupStart = fakeGroupStart;
  api->groupEnd = fakeGroupEnd;
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

// A 3-stage pipeline's links: forward 0->1->2 (two channels 0->1 on one link) and backward
// 2->1->0.
const std::vector<std::vector<ChannelKey>> kLinks = {
    {{0, 1, 0}, {0, 1, 5}}, {{1, 2, 1}}, {{2, 1, 2}}, {{1, 0, 3}}};
std::vector<ChannelKey> allChannels(const std::vector<std::vector<ChannelKey>> &links) {
  std::vector<ChannelKey> out;
  for (const auto &link : links)
    out.insert(out.end(), link.begin(), link.end());
  return out;
}

struct RankOutcome {
  std::unique_ptr<NcclChannels> channels;
  std::string error;
};

std::vector<RankOutcome> runRanks(FakeWorld &w, double timeoutS,
                                  const std::function<void(int, NcclChannels &)> &body = {},
                                  const std::vector<std::vector<ChannelKey>> &links = kLinks) {
  gWorld = &w;
  std::vector<RankOutcome> out(static_cast<size_t>(w.world));
  std::vector<std::thread> threads;
  for (int r = 0; r < w.world; ++r)
    threads.emplace_back([&, r] {
      tRank = r;
      FakeTransport t(w, r);
      try {
        out[r].channels = std::make_unique<NcclChannels>(fakeApi(), links, t, timeoutS);
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

// What the fake NCCL saw: every communicator received exactly what it was sent, in order.
void expectMatchedInOrder(const FakeWorld &w) {
  for (const auto &kv : w.sent) {
    auto it = w.received.find(kv.first);
    ASSERT_NE(it, w.received.end()) << kv.first << ": sends that nothing received";
    EXPECT_EQ(kv.second, it->second) << kv.first << ": the k-th send met another receive";
  }
  EXPECT_EQ(w.sent.size(), w.received.size());
}

TEST(NcclChannels, OneCommunicatorPerCrossingLinkWithMatchingIds) {
  FakeWorld w;
  const std::vector<ChannelKey> channels = allChannels(kLinks);
  std::vector<RankOutcome> ranks = runRanks(w, 10.0, [&](int r, NcclChannels &c) {
    // Each rank sends and receives on the channels its device ends, as the backend would, for two
    // iterations.
    for (int it = 0; it < 2; ++it)
      for (const ChannelKey &k : channels) {
        if (static_cast<int>(k.src) == r)
          c.send(k, nullptr, 100 + k.tag, nullptr);
        if (static_cast<int>(k.dst) == r)
          c.recv(k, nullptr, 100 + k.tag, nullptr);
      }
  });
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(ranks[r].error, "") << "rank " << r;
  // Which channels each rank holds: exactly those its device ends; one communicator per link.
  for (int r = 0; r < 3; ++r)
    for (const ChannelKey &k : channels)
      EXPECT_EQ(ranks[r].channels->has(k), static_cast<int>(k.src) == r || static_cast<int>(k.dst) == r)
          << "rank " << r << " " << channelName(k);
  EXPECT_EQ(ranks[0].channels->size(), 3u);
  EXPECT_EQ(ranks[0].channels->communicators(), 2u);
  EXPECT_EQ(ranks[1].channels->size(), 5u);
  EXPECT_EQ(ranks[1].channels->communicators(), 4u);
  EXPECT_EQ(ranks[2].channels->size(), 2u);
  EXPECT_EQ(ranks[2].channels->communicators(), 2u);
  EXPECT_EQ(ranks[0].channels->linkOf({0, 1, 0}), ranks[0].channels->linkOf({0, 1, 5}));
  EXPECT_NE(ranks[0].channels->linkOf({0, 1, 0}), ranks[0].channels->linkOf({1, 0, 3}));
  // Every communicator id was joined by exactly its two ends, and each link's sends and receives
  // went through the same communicator, in the same order: the exchange mapped ids correctly.
  EXPECT_EQ(w.joined.size(), kLinks.size());
  for (const auto &kv : w.joined)
    EXPECT_EQ(kv.second, (std::set<int>{0, 1})) << kv.first;
  ASSERT_EQ(w.sent.size(), kLinks.size());
  expectMatchedInOrder(w);
  for (const std::vector<ChannelKey> &link : kLinks) {
    std::vector<size_t> want;
    for (int it = 0; it < 2; ++it)
      for (const ChannelKey &k : link)
        want.push_back(100 + k.tag);
    bool found = false;
    for (const auto &kv : w.sent)
      found = found || kv.second == want;
    EXPECT_TRUE(found) << linkName(link) << ": no communicator carried its messages";
  }
  for (RankOutcome &r : ranks)
    r.channels->close(false);
  EXPECT_EQ(w.finalized.load(), 8); // 4 links x 2 ends
  EXPECT_EQ(w.destroyed.load(), 8);
  EXPECT_EQ(w.aborted.load(), 0);
}

// Each rank issues its device's sends and receives stream by stream in program order, for
// `iterations` iterations, as the backend's stream threads do (on threads of their own; the order
// between streams does not matter to the fake, which only pairs messages per communicator).
// Bytes identify the channel.
void issueProgram(const Program &program, int rank, NcclChannels &c, int iterations) {
  const Device &dev = program.devices[static_cast<size_t>(rank)];
  for (int it = 0; it < iterations; ++it)
    for (const Stream &st : dev.streams)
      for (const Op &op : st.ops) {
        const uint32_t me = static_cast<uint32_t>(rank);
        if (op.kind == OpKind::Send && c.has({me, op.peer, op.tag}))
          c.send({me, op.peer, op.tag}, nullptr, 1000 + op.tag, nullptr);
        if (op.kind == OpKind::Recv && c.has({op.peer, me, op.tag}))
          c.recv({op.peer, me, op.tag}, nullptr, 1000 + op.tag, nullptr);
      }
}

TEST(NcclChannels, A1F1BPipelineNeedsOneCommunicatorPerDirectionBetweenNeighbours) {
  samples::PipelineSpec spec;
  spec.stages = 4;
  spec.microbatches = 8;
  spec.fill = false;
  std::string error;
  pfrt_program *built = samples::buildPipeline(spec, &error);
  ASSERT_NE(built, nullptr) << error;
  const Program program = built->program;
  pfrt_program_destroy(built);
  const std::vector<std::vector<ChannelKey>> links = orderedChannelLinks(program);
  FakeWorld w;
  w.world = 4;
  std::vector<RankOutcome> ranks = runRanks(
      w, 10.0, [&](int r, NcclChannels &c) { issueProgram(program, r, c, 3); }, links);
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(ranks[r].error, "") << "rank " << r;
  // 8 microbatches x 2 directions x 3 stage boundaries = 48 channels on 6 communicators.
  EXPECT_EQ(programChannels(program).size(), 48u);
  EXPECT_EQ(w.joined.size(), 6u);
  EXPECT_EQ(ranks[0].channels->communicators(), 2u);
  EXPECT_EQ(ranks[1].channels->communicators(), 4u);
  EXPECT_EQ(ranks[1].channels->size(), 32u);
  ASSERT_EQ(w.sent.size(), 6u);
  for (const auto &kv : w.sent)
    EXPECT_EQ(kv.second.size(), 3u * 8u) << kv.first;
  expectMatchedInOrder(w);
}

TEST(NcclChannels, ChannelsReceivedOutOfSendOrderGetCommunicatorsOfTheirOwn) {
  // Device 0 sends tags 1, 2, 3 in that order; device 1 receives 2, 3, 1. One communicator for
  // all three would pair the send of 1 with the receive of 2; the links split them.
  const Program program = test::twoDeviceSends({1, 2, 3}, {2, 3, 1});
  const std::vector<std::vector<ChannelKey>> links = orderedChannelLinks(program);
  FakeWorld w;
  w.world = 2;
  std::vector<RankOutcome> ranks = runRanks(
      w, 10.0, [&](int r, NcclChannels &c) { issueProgram(program, r, c, 2); }, links);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ranks[r].error, "") << "rank " << r;
  EXPECT_EQ(w.joined.size(), 2u);
  expectMatchedInOrder(w);
  for (RankOutcome &r : ranks)
    r.channels->close(false); // while gWorld is still w
  // The same program on one communicator per device pair: the fake sees the mismatch, so the
  // check above can fail.
  FakeWorld bad;
  bad.world = 2;
  std::vector<RankOutcome> badRanks = runRanks(
      bad, 10.0, [&](int r, NcclChannels &c) { issueProgram(program, r, c, 1); },
      {{{0, 1, 1}, {0, 1, 2}, {0, 1, 3}}});
  for (RankOutcome &r : badRanks)
    if (r.channels)
      r.channels->close(false);
  ASSERT_EQ(bad.sent.size(), 1u);
  EXPECT_NE(bad.sent.begin()->second, bad.received.begin()->second);
}

// The run's first message on a link: the sender's host thread tells the receiver that its send
// is enqueued only once ncclSend has settled (CudaBackend::send publishes after it), and the
// receiver issues ncclRecv only once told. NCCL connects the pair on that first message, which
// needs both ends, so without connecting the links at setup the send never settles.
std::vector<RankOutcome> firstMessage(FakeWorld &w, bool connectFirst) {
  w.world = 2;
  w.connectOnFirstMessage = true;
  std::atomic<bool> told{false};
  const std::vector<std::vector<ChannelKey>> links = {{{0, 1, 4}}};
  return runRanks(
      w, 0.5,
      [&](int r, NcclChannels &c) {
        if (connectFirst)
          c.connect(nullptr, nullptr);
        if (r == 0) {
          c.send({0, 1, 4}, nullptr, 64, nullptr);
          told = true;
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        while (!told && std::chrono::steady_clock::now() - start < std::chrono::seconds(2))
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (told)
          c.recv({0, 1, 4}, nullptr, 64, nullptr);
      },
      links);
}

TEST(NcclChannels, LinksAreConnectedAtSetupSoAFirstSendNeedsNoReceive) {
  FakeWorld w;
  std::vector<RankOutcome> ranks = firstMessage(w, /*connectFirst=*/true);
  EXPECT_EQ(ranks[0].error, "");
  EXPECT_EQ(ranks[1].error, "");
  EXPECT_EQ(w.groups.load(), 4)
      << "each rank creates its communicators in one NCCL group and connects its links in another";
  // The 1-byte connecting messages, then the run's message, paired in order.
  ASSERT_EQ(w.sent.size(), 1u);
  EXPECT_EQ(w.sent.begin()->second, (std::vector<size_t>{1, 64}));
  expectMatchedInOrder(w);
  for (RankOutcome &r : ranks)
    r.channels->close(false);

  // Without the connection at setup the first send waits for its receive: the time limit.
  FakeWorld unconnected;
  ranks = firstMessage(unconnected, /*connectFirst=*/false);
  EXPECT_NE(ranks[0].error.find("NCCL ncclSend on channel device 0 -> device 1 tag 4 did not "
                                "complete within 0.5 s"),
            std::string::npos)
      << ranks[0].error;
  for (RankOutcome &r : ranks)
    if (r.channels)
      r.channels->close(true);
}

TEST(NcclChannels, BlockingCommunicatorsAndOneRendezvousAddressAreRefused) {
  const std::pair<const char *, const char *> settings[] = {{"NCCL_COMM_BLOCKING", "1"},
                                                            {"NCCL_COMM_ID", "10.0.0.1:1234"}};
  for (const auto &[name, value] : settings) {
    ScopedEnv env(name, value);
    FakeWorld w;
    std::vector<RankOutcome> ranks = runRanks(w, 0.3);
    for (const RankOutcome &r : ranks)
      EXPECT_NE(r.error.find(std::string(name) + "="), std::string::npos) << r.error;
    EXPECT_TRUE(w.joined.empty()) << name << ": refused before any communicator is made";
  }
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
  EXPECT_NE(ranks[1].error.find("creating the communicator on channel device 1 -> device 2 tag 1 "),
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
  EXPECT_NE(ranks[0].error.find("NCCL ncclCommInitRankConfig on channel device 0 -> device 1 tags "
                                "0, 5 (2 channels) failed: unhandled system error (fake)"),
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
      std::vector<std::vector<ChannelKey>> links = kLinks;
      if (r == 0)
        links.push_back({{0, 2, 9}});
      try {
        NcclChannels c(fakeApi(), links, t, 0.3);
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
