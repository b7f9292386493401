// The in-process transport (every device in one process) and the launcher-environment helper.
#include "runtime/Transport.h"

#include <algorithm>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace pfrt {

void Transport::postVote(int64_t, bool) {
  throw Error(PFRT_ERROR_INTERNAL, "the " + name() + " transport runs one process: no stop votes");
}

bool Transport::voteResult(int64_t, bool &, const std::atomic<bool> &) {
  throw Error(PFRT_ERROR_INTERNAL, "the " + name() + " transport runs one process: no stop votes");
}

namespace {

class InProcessTransport : public Transport {
public:
  std::string name() const override { return "in-process"; }

  void open(const std::vector<ChannelKey> &channels, int64_t firstGen) override {
    channels_.clear();
    for (const ChannelKey &k : channels) {
      auto c = std::make_unique<Channel>();
      c->consumed = firstGen;
      channels_[k] = std::move(c);
    }
  }
  void publish(const ChannelKey &key, int64_t gen, const Message &message) override {
    Channel &c = channel(key);
    {
      std::lock_guard<std::mutex> lock(c.m);
      c.messages[gen] = message;
    }
    c.cv.notify_all();
  }
  bool take(const ChannelKey &key, int64_t gen, Message &out,
            const std::atomic<bool> &abort) override {
    Channel &c = channel(key);
    std::unique_lock<std::mutex> lock(c.m);
    c.cv.wait(lock, [&] { return c.messages.count(gen) || abort.load(); });
    if (abort)
      return false;
    out = c.messages[gen];
    c.messages.erase(gen);
    return true;
  }
  void consumed(const ChannelKey &key, int64_t gen) override {
    Channel &c = channel(key);
    {
      std::lock_guard<std::mutex> lock(c.m);
      c.consumed = std::max(c.consumed, gen + 1);
    }
    c.cv.notify_all();
  }
  bool waitConsumed(const ChannelKey &key, int64_t gen, int64_t ring,
                    const std::atomic<bool> &abort) override {
    if (gen < ring)
      return true;
    Channel &c = channel(key);
    std::unique_lock<std::mutex> lock(c.m);
    c.cv.wait(lock, [&] { return c.consumed >= gen - ring + 1 || abort.load(); });
    return !abort;
  }
  void wakeAll() override {
    for (auto &c : channels_) {
      std::lock_guard<std::mutex> lock(c.second->m);
      c.second->cv.notify_all();
    }
  }

private:
  struct Channel {
    std::mutex m;
    std::condition_variable cv;
    std::map<int64_t, Message> messages; // by generation
    int64_t consumed = 0; // generations whose receive the backend has enqueued
  };
  Channel &channel(const ChannelKey &key) {
    auto it = channels_.find(key);
    if (it == channels_.end())
      throw Error(PFRT_ERROR_INTERNAL, "no channel from device " + std::to_string(key.src) +
                                           " to device " + std::to_string(key.dst) + " tag " +
                                           std::to_string(key.tag));
    return *it->second;
  }
  std::map<ChannelKey, std::unique_ptr<Channel>> channels_;
};

bool envInt(const char *name, int &out) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return false;
  char *end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < 0 || x > (1 << 30))
    return false;
  out = static_cast<int>(x);
  return true;
}

} // namespace

std::unique_ptr<Transport> createInProcessTransport() {
  return std::make_unique<InProcessTransport>();
}

bool launcherRank(int &rank, int &world) {
  const char *pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE"}};
  for (auto &p : pairs) {
    int r = 0, w = 0;
    if (envInt(p[0], r) && envInt(p[1], w)) {
      rank = r;
      world = w;
      return true;
    }
  }
  return false;
}

std::vector<ChannelKey> programChannels(const Program &program) {
  std::vector<ChannelKey> keys;
  std::set<ChannelKey> seen; // a plan may have millions of channels: no linear search
  for (uint32_t d = 0; d < program.devices.size(); ++d)
    for (const Stream &st : program.devices[d].streams)
      for (const Op &op : st.ops)
        if (op.kind == OpKind::Send) {
          ChannelKey key{d, op.peer, op.tag};
          if (seen.insert(key).second)
            keys.push_back(key);
        }
  return keys;
}

std::vector<std::vector<ChannelKey>> orderedChannelLinks(const Program &program) {
  // Where each channel's send and receive sit: (stream, op index) on their devices.
  struct Ends {
    uint32_t sendStream = 0, recvStream = 0;
    size_t sendOp = 0, recvOp = 0;
  };
  std::map<ChannelKey, Ends> ends;
  for (uint32_t d = 0; d < program.devices.size(); ++d) {
    const std::vector<Stream> &streams = program.devices[d].streams;
    for (uint32_t s = 0; s < streams.size(); ++s)
      for (size_t i = 0; i < streams[s].ops.size(); ++i) {
        const Op &op = streams[s].ops[i];
        if (op.kind == OpKind::Send) {
          Ends &e = ends[ChannelKey{d, op.peer, op.tag}];
          e.sendStream = s;
          e.sendOp = i;
        } else if (op.kind == OpKind::Recv) {
          Ends &e = ends[ChannelKey{op.peer, d, op.tag}];
          e.recvStream = s;
          e.recvOp = i;
        }
      }
  }
  // Sets of channels between the same two streams, each in send order.
  using Streams = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>; // src, dst, their streams
  std::map<Streams, std::vector<ChannelKey>> sets;
  const std::vector<ChannelKey> order = programChannels(program);
  for (const ChannelKey &key : order) {
    const Ends &e = ends[key];
    sets[Streams{key.src, key.dst, e.sendStream, e.recvStream}].push_back(key);
  }
  std::vector<std::vector<ChannelKey>> links;
  for (auto &kv : sets) {
    std::vector<ChannelKey> &set = kv.second;
    std::sort(set.begin(), set.end(), [&](const ChannelKey &a, const ChannelKey &b) {
      return ends[a].sendOp < ends[b].sendOp;
    });
    // Patience sorting: each channel joins the chain whose last receive is the latest one before
    // its own, else starts a chain. This gives the fewest chains with increasing receives. The
    // chains' last receives stay in decreasing order (a new chain's is below all others; a chain
    // that grows stays between its neighbours), so the chain is found by binary search.
    std::vector<std::vector<ChannelKey>> chains;
    std::vector<size_t> lastRecv;
    for (const ChannelKey &key : set) {
      const size_t r = ends[key].recvOp;
      const size_t best = static_cast<size_t>(
          std::partition_point(lastRecv.begin(), lastRecv.end(), [&](size_t t) { return t > r; }) -
          lastRecv.begin());
      if (best == chains.size()) {
        chains.emplace_back();
        lastRecv.push_back(r);
      }
      chains[best].push_back(key);
      lastRecv[best] = r;
    }
    for (std::vector<ChannelKey> &chain : chains)
      links.push_back(std::move(chain));
  }
  // The order of programChannels for the links themselves, by their first channel.
  std::map<ChannelKey, size_t> place;
  for (size_t i = 0; i < order.size(); ++i)
    place[order[i]] = i;
  std::sort(links.begin(), links.end(),
            [&](const std::vector<ChannelKey> &a, const std::vector<ChannelKey> &b) {
              return place[a.front()] < place[b.front()];
            });
  return links;
}

} // namespace pfrt
