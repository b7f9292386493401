//===- Simulate.cpp - Timeline simulation of per-stage instruction lists --===//
//
// Three passes:
//  1. per stage, in list order: field checks, forward/backward pairing and
//     the live-memory timeline (memory depends only on order, not on time);
//  2. send/recv matching per channel (src, dst, payload);
//  3. timing: every stage advances through its list until it reaches a recv
//     whose send has not executed; executing a send wakes its receiver. If
//     no stage can advance before all lists are done, that is a deadlock.
// Cost is linear in the number of instructions (plus a sort per channel
// only when a channel's sends and recvs are not in the same order).
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/Schedule.h"
#include "support/Checked.h"
#include "support/Graph.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>
#include <unordered_map>

namespace pipefill::sched {

using pipefill::satAdd;
using pipefill::satSub;
namespace {

std::string where(int stage, size_t index, const Instr &instr) {
  std::ostringstream os;
  os << "stage " << stage << " instruction " << index << " ("
     << describeInstr(instr) << ")";
  return os.str();
}

bool validKind(InstrKind kind) {
  int k = static_cast<int>(kind);
  return k >= static_cast<int>(InstrKind::Forward) &&
         k <= static_cast<int>(InstrKind::OptimizerStep);
}

/// Map from (microbatch, chunk) to a small per-stage slot: dense when the
/// key range is small (the normal case), hashed otherwise.
class PairSlots {
public:
  void init(const std::vector<Instr> &list) {
    int maxMb = -1, maxChunk = -1;
    for (const Instr &in : list) {
      if (isBackwardFamily(in.kind) || in.kind == InstrKind::Forward) {
        maxMb = std::max(maxMb, in.microbatch);
        maxChunk = std::max(maxChunk, in.chunk);
      }
    }
    chunks = int64_t(maxChunk) + 1;
    int64_t range = (int64_t(maxMb) + 1) * chunks;
    dense = range <= 4 * int64_t(list.size()) + 64;
    if (dense)
      denseSlots.assign(static_cast<size_t>(std::max<int64_t>(range, 0)), -1);
    else
      hashed.reserve(list.size());
  }
  /// Slot index for the key, creating it when `create`; -1 if absent.
  int64_t lookup(int mb, int chunk, bool create) {
    if (dense) {
      int64_t &slot = denseSlots[size_t(int64_t(mb) * chunks + chunk)];
      if (slot < 0 && create)
        slot = next++;
      return slot;
    }
    uint64_t key = (uint64_t(uint32_t(mb)) << 32) | uint32_t(chunk);
    auto it = hashed.find(key);
    if (it != hashed.end())
      return it->second;
    if (!create)
      return -1;
    hashed.emplace(key, next);
    return next++;
  }

private:
  bool dense = true;
  int64_t chunks = 1;
  int64_t next = 0;
  std::vector<int64_t> denseSlots;
  std::unordered_map<uint64_t, int64_t> hashed;
};

enum class PassState : uint8_t { Forwarded, InputDone, Done };
struct Pass {
  int64_t bytes;     // stash allocated by the forward
  int64_t keepBytes; // ZB: still held after BackwardInput
  PassState state;
  size_t forwardIndex;
};

bool checkStage(const PipelineSpec &spec, int p, int s,
                std::vector<Instr> &list, int64_t staticBytes,
                StageTimeline &timeline, std::string &error) {
  PairSlots slots;
  slots.init(list);
  std::vector<Pass> passes;
  int64_t live = staticBytes, peak = staticBytes;
  double busy = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    Instr &in = list[i];
    if (!validKind(in.kind)) {
      std::ostringstream os;
      os << "stage " << s << " instruction " << i
         << " has an unknown instruction kind ("
         << static_cast<int>(in.kind) << ").";
      error = os.str();
      return false;
    }
    auto fail = [&](const std::string &what) {
      error = where(s, i, in) + " " + what;
      return false;
    };
    bool compute = isCompute(in.kind);
    if (compute) {
      if (!std::isfinite(in.durationUs) || in.durationUs < 0)
        return fail("has a duration that is not a finite non-negative "
                    "number of microseconds.");
      busy += in.durationUs;
    } else {
      if (in.payload != Payload::Activation && in.payload != Payload::Gradient)
        return fail("has an unknown payload.");
      if (in.peer < 0 || in.peer >= p)
        return fail("names peer stage " + std::to_string(in.peer) +
                    ", which is not a stage of this " + std::to_string(p) +
                    "-stage pipeline.");
      if (in.peer == s)
        return fail("sends to or receives from its own stage.");
      if (in.bytes < 0)
        return fail("has a negative byte count.");
      if (in.microbatch < 0 || in.chunk < 0)
        return fail("has a negative microbatch or chunk index.");
    }
    if (in.kind == InstrKind::Forward || isBackwardFamily(in.kind)) {
      if (in.microbatch < 0 || in.chunk < 0)
        return fail("has a negative microbatch or chunk index.");
    }
    switch (in.kind) {
    case InstrKind::Forward: {
      if (in.bytes < 0)
        return fail("has a negative stash size.");
      int64_t slot = slots.lookup(in.microbatch, in.chunk, true);
      if (size_t(slot) < passes.size())
        return fail("repeats the forward of instruction " +
                    std::to_string(passes[size_t(slot)].forwardIndex) + ".");
      int64_t keep = static_cast<int64_t>(
          std::floor(double(in.bytes) * spec.weightGradStashFraction));
      keep = std::min(std::max<int64_t>(keep, 0), in.bytes);
      passes.push_back({in.bytes, keep, PassState::Forwarded, i});
      live = satAdd(live, in.bytes);
      peak = std::max(peak, live);
      break;
    }
    case InstrKind::Backward:
    case InstrKind::BackwardInput: {
      int64_t slot = slots.lookup(in.microbatch, in.chunk, false);
      if (slot < 0)
        return fail("has no earlier forward of the same microbatch and "
                    "chunk on this stage.");
      Pass &ps = passes[size_t(slot)];
      if (ps.state != PassState::Forwarded)
        return fail("follows an earlier backward of the same microbatch and "
                    "chunk.");
      if (in.kind == InstrKind::Backward) {
        live = satSub(live, ps.bytes);
        ps.state = PassState::Done;
      } else {
        live = satSub(live, satSub(ps.bytes, ps.keepBytes));
        ps.state = PassState::InputDone;
      }
      break;
    }
    case InstrKind::BackwardWeight: {
      int64_t slot = slots.lookup(in.microbatch, in.chunk, false);
      if (slot < 0 || passes[size_t(slot)].state != PassState::InputDone)
        return fail("has no earlier backward_input of the same microbatch "
                    "and chunk on this stage.");
      Pass &ps = passes[size_t(slot)];
      live = satSub(live, ps.keepBytes);
      ps.state = PassState::Done;
      break;
    }
    default:
      break;
    }
    in.liveBytesAfter = live;
  }
  timeline.busyUs = busy;
  timeline.peakBytes = peak;
  return true;
}

struct Ref {
  int stage;
  int index;
};

bool matchTransfers(const Schedule &schedule,
                    const std::vector<size_t> &offsets,
                    std::vector<Ref> &partner, std::string &error) {
  struct Channel {
    std::vector<Ref> sends, recvs;
    int src, dst;
  };
  std::vector<Channel> channels;
  std::unordered_map<uint64_t, size_t> channelOf;
  // A stage talks to few channels; a tiny per-stage cache in front of the
  // hash map keeps the lookup off the hot path.
  struct CacheEntry {
    uint64_t key;
    size_t index;
  };
  std::vector<CacheEntry> cache;
  auto channel = [&](int src, int dst, Payload payload) -> Channel & {
    uint64_t key = (uint64_t(uint32_t(src)) << 33) |
                   (uint64_t(uint32_t(dst)) << 1) |
                   (payload == Payload::Gradient ? 1u : 0u);
    for (const CacheEntry &e : cache)
      if (e.key == key)
        return channels[e.index];
    size_t index;
    auto it = channelOf.find(key);
    if (it != channelOf.end()) {
      index = it->second;
    } else {
      index = channels.size();
      channelOf.emplace(key, index);
      channels.push_back({{}, {}, src, dst});
    }
    if (cache.size() < 8)
      cache.push_back({key, index});
    return channels[index];
  };
  for (int s = 0; s < static_cast<int>(schedule.size()); ++s) {
    const auto &list = schedule[s];
    cache.clear();
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Instr &in = list[i];
      if (in.kind == InstrKind::Send)
        channel(s, in.peer, in.payload).sends.push_back({s, i});
      else if (in.kind == InstrKind::Recv)
        channel(in.peer, s, in.payload).recvs.push_back({s, i});
    }
  }
  auto instr = [&](Ref r) -> const Instr & {
    return schedule[r.stage][r.index];
  };
  auto flat = [&](Ref r) { return offsets[r.stage] + size_t(r.index); };
  auto pair = [&](Ref send, Ref recv) {
    const Instr &a = instr(send), &b = instr(recv);
    if (a.bytes != b.bytes) {
      std::ostringstream os;
      os << where(send.stage, send.index, a) << " carries " << a.bytes
         << " bytes but the matching " << where(recv.stage, recv.index, b)
         << " expects " << b.bytes << " bytes.";
      error = os.str();
      return false;
    }
    partner[flat(send)] = recv;
    partner[flat(recv)] = send;
    return true;
  };

  for (Channel &ch : channels) {
    bool inOrder = ch.sends.size() == ch.recvs.size();
    for (size_t k = 0; inOrder && k < ch.sends.size(); ++k) {
      const Instr &a = instr(ch.sends[k]), &b = instr(ch.recvs[k]);
      inOrder = a.microbatch == b.microbatch && a.chunk == b.chunk;
    }
    if (inOrder) {
      for (size_t k = 0; k < ch.sends.size(); ++k)
        if (!pair(ch.sends[k], ch.recvs[k]))
          return false;
      continue;
    }
    // General case: the j-th send of a (microbatch, chunk) on this channel
    // matches the j-th recv of it.
    auto byKey = [&](const Ref &x, const Ref &y) {
      const Instr &a = instr(x), &b = instr(y);
      if (a.microbatch != b.microbatch)
        return a.microbatch < b.microbatch;
      if (a.chunk != b.chunk)
        return a.chunk < b.chunk;
      return x.index < y.index;
    };
    std::vector<Ref> sends = ch.sends, recvs = ch.recvs;
    std::sort(sends.begin(), sends.end(), byKey);
    std::sort(recvs.begin(), recvs.end(), byKey);
    // Collect the unmatched ones; report the earliest in program order.
    std::vector<Ref> lonelySends, lonelyRecvs;
    size_t a = 0, b = 0;
    auto keyLess = [&](Ref x, Ref y) {
      const Instr &u = instr(x), &w = instr(y);
      return u.microbatch != w.microbatch ? u.microbatch < w.microbatch
                                          : u.chunk < w.chunk;
    };
    while (a < sends.size() || b < recvs.size()) {
      if (b == recvs.size() ||
          (a < sends.size() && keyLess(sends[a], recvs[b]))) {
        lonelySends.push_back(sends[a++]);
      } else if (a == sends.size() || keyLess(recvs[b], sends[a])) {
        lonelyRecvs.push_back(recvs[b++]);
      } else {
        if (!pair(sends[a++], recvs[b++]))
          return false;
      }
    }
    auto first = [](std::vector<Ref> &v) {
      return *std::min_element(v.begin(), v.end(), [](Ref x, Ref y) {
        return x.index < y.index;
      });
    };
    if (!lonelyRecvs.empty()) {
      Ref r = first(lonelyRecvs);
      std::ostringstream os;
      os << where(r.stage, r.index, instr(r))
         << " has no matching send on stage " << ch.src << ".";
      error = os.str();
      return false;
    }
    if (!lonelySends.empty()) {
      Ref r = first(lonelySends);
      std::ostringstream os;
      os << where(r.stage, r.index, instr(r))
         << " has no matching recv on stage " << ch.dst << ".";
      error = os.str();
      return false;
    }
  }
  return true;
}

} // namespace

bool checkDeadlockFree(const Schedule &schedule, int &stage, size_t &index,
                       std::string &error) {
  stage = -1;
  index = 0;
  const int p = static_cast<int>(schedule.size());
  std::vector<size_t> offsets(p + 1, 0);
  for (int s = 0; s < p; ++s) {
    if (schedule[s].size() > size_t(INT32_MAX)) {
      error = "stage " + std::to_string(s) + " has too many instructions.";
      return false;
    }
    offsets[s + 1] = offsets[s] + schedule[s].size();
  }
  std::vector<Ref> partner(offsets[p], Ref{-1, -1});
  if (!matchTransfers(schedule, offsets, partner, error))
    return false;
  // Each instruction's successors: the next one of its stage and, for a
  // send, its recv.
  CsrGraph edges;
  edges.first.reserve(offsets[p] + 1);
  edges.targets.reserve(2 * offsets[p]);
  std::vector<Ref> nodes(offsets[p]);
  for (int s = 0; s < p; ++s)
    for (size_t i = 0; i < schedule[s].size(); ++i) {
      size_t v = offsets[s] + i;
      nodes[v] = {s, static_cast<int>(i)};
      edges.beginNode();
      if (i + 1 < schedule[s].size())
        edges.targets.push_back(static_cast<uint32_t>(v + 1));
      if (schedule[s][i].kind == InstrKind::Send && partner[v].stage >= 0)
        edges.targets.push_back(static_cast<uint32_t>(offsets[partner[v].stage] +
                                                      size_t(partner[v].index)));
    }
  edges.finish();
  int64_t blocked = findBlockedNode(edges, [&](uint32_t v) {
    return nodes[v].index > 0 ? int64_t(v) - 1 : int64_t(-1);
  });
  if (blocked < 0)
    return true;
  Ref b = nodes[size_t(blocked)];
  stage = b.stage;
  index = size_t(b.index);
  std::ostringstream os;
  os << where(b.stage, index, schedule[b.stage][index])
     << " can never run: the sends and receives of one iteration wait on "
        "each other in a cycle (deadlock)";
  if (schedule[b.stage][index].kind == InstrKind::Recv &&
      partner[size_t(blocked)].stage >= 0) {
    Ref r = partner[size_t(blocked)];
    os << "; it waits for "
       << where(r.stage, size_t(r.index), schedule[r.stage][r.index]);
  }
  os << '.';
  error = os.str();
  return false;
}

namespace {

/// The spec's own fields against the schedule's shape; false with `error`.
bool checkSpec(const PipelineSpec &spec, int p, std::string &error) {
  if (p == 0) {
    error = "the schedule has no stages.";
    return false;
  }
  if (spec.stages != p) {
    std::ostringstream os;
    os << "the schedule has " << p << " stage lists but the spec says "
       << spec.stages << " stages.";
    error = os.str();
    return false;
  }
  if (!spec.costs.empty() && spec.costs.size() != size_t(p)) {
    std::ostringstream os;
    os << "the spec has " << spec.costs.size() << " cost entries for " << p
       << " stages.";
    error = os.str();
    return false;
  }
  if (!std::isfinite(spec.p2pLatencyUs) || spec.p2pLatencyUs < 0 ||
      !std::isfinite(spec.p2pBandwidthGBps) || spec.p2pBandwidthGBps < 0) {
    error = "p2p latency and bandwidth must be finite and non-negative.";
    return false;
  }
  if (!(spec.weightGradStashFraction >= 0 &&
        spec.weightGradStashFraction <= 1)) {
    error = "the weight-gradient stash fraction must be within [0, 1].";
    return false;
  }
  return true;
}

/// Pass 3, timing: each stage runs its list in order until a recv whose
/// send has not happened yet; a send wakes its receiver. pc[s] is where
/// stage s stopped (its list's size when it finished), clock[s] its time.
void runTiming(const PipelineSpec &spec, Schedule &schedule,
               const std::vector<size_t> &offsets,
               const std::vector<Ref> &partner, std::vector<size_t> &pc,
               std::vector<double> &clock) {
  const int p = static_cast<int>(schedule.size());
  pc.assign(p, 0);
  clock.assign(p, 0.0);
  std::vector<double> arrival(offsets[p], 0.0); // indexed by recv
  std::vector<char> sent(offsets[p], 0);        // indexed by recv
  std::vector<char> waiting(p, 0);
  std::vector<int> runnable;
  runnable.reserve(p);
  for (int s = p - 1; s >= 0; --s)
    runnable.push_back(s);
  while (!runnable.empty()) {
    int s = runnable.back();
    runnable.pop_back();
    waiting[s] = 0;
    std::vector<Instr> &list = schedule[s];
    size_t i = pc[s];
    double t = clock[s];
    for (; i < list.size(); ++i) {
      Instr &in = list[i];
      if (in.kind == InstrKind::Send) {
        in.startUs = in.endUs = t;
        Ref r = partner[offsets[s] + i];
        size_t rf = offsets[r.stage] + size_t(r.index);
        arrival[rf] = t + p2pTransferUs(spec, in.bytes);
        sent[rf] = 1;
        if (waiting[r.stage] && pc[r.stage] == size_t(r.index)) {
          waiting[r.stage] = 0;
          runnable.push_back(r.stage);
        }
      } else if (in.kind == InstrKind::Recv) {
        size_t f = offsets[s] + i;
        if (!sent[f]) {
          waiting[s] = 1;
          break;
        }
        in.startUs = t;
        t = std::max(t, arrival[f]);
        in.endUs = t;
      } else {
        in.startUs = t;
        t += in.durationUs;
        in.endUs = t;
      }
    }
    pc[s] = i;
    clock[s] = t;
  }
}

/// The deadlock among the stages that stopped early (`stuck`, not empty).
/// Every stopped stage waits at a recv whose send sits on another stopped
/// stage (a finished stage has executed all its sends), so following
/// "waits for" from any stopped stage must run into a cycle. Reports it.
std::string describeDeadlock(const Schedule &schedule,
                             const std::vector<size_t> &offsets,
                             const std::vector<Ref> &partner,
                             const std::vector<size_t> &pc,
                             const std::vector<int> &stuck) {
  const int p = static_cast<int>(schedule.size());
  auto target = [&](int s) {
    return partner[offsets[s] + pc[s]].stage;
  };
  std::vector<int> seenAt(p, -1);
  std::vector<int> path;
  int s = stuck.front();
  while (seenAt[s] < 0) {
    seenAt[s] = static_cast<int>(path.size());
    path.push_back(s);
    s = target(s);
  }
  std::vector<int> cycle(path.begin() + seenAt[s], path.end());
  std::ostringstream os;
  os << "deadlock: stages";
  for (int c : cycle)
    os << ' ' << c << " ->";
  os << ' ' << cycle.front() << " wait on each other in a cycle:";
  for (size_t k = 0; k < cycle.size(); ++k) {
    int c = cycle[k];
    size_t i = pc[c];
    Ref r = partner[offsets[c] + i];
    os << (k ? "; " : " ") << where(c, i, schedule[c][i])
       << " waits for "
       << where(r.stage, size_t(r.index), schedule[r.stage][r.index]);
  }
  os << '.';
  if (stuck.size() > cycle.size())
    os << ' ' << stuck.size() - cycle.size()
       << (stuck.size() - cycle.size() == 1 ? " other stage waits"
                                             : " other stages wait")
       << " behind it.";
  return os.str();
}

} // namespace

bool simulate(const PipelineSpec &spec, Schedule &schedule, SimResult &result,
              std::string &error) {
  return simulate(spec, schedule, result, error,
                  [](size_t n, const std::function<void(size_t)> &fn) {
                    for (size_t s = 0; s < n; ++s)
                      fn(s);
                  });
}

bool simulate(const PipelineSpec &spec, Schedule &schedule, SimResult &result,
              std::string &error, const ForEachStage &forEachStage) {
  const int p = static_cast<int>(schedule.size());
  result = SimResult();
  if (!checkSpec(spec, p, error))
    return false;

  // Pass 1: fields, pairing, memory, each stage on its own; the error is
  // the first stage's that has one, as if they ran in order.
  result.stages.assign(p, {});
  std::vector<std::string> errors(p);
  forEachStage(size_t(p), [&](size_t i) {
    const int s = static_cast<int>(i);
    int64_t staticBytes = spec.costs.empty() ? 0 : spec.costs[s].staticBytes;
    if (staticBytes < 0)
      errors[s] = "stage " + std::to_string(s) + " has negative static bytes.";
    else if (schedule[s].size() > size_t(INT32_MAX))
      errors[s] = "stage " + std::to_string(s) + " has too many instructions.";
    else if (!checkStage(spec, p, s, schedule[s], staticBytes, result.stages[s], errors[s]))
      assert(!errors[s].empty() && "checkStage fails with a message");
  });
  std::vector<size_t> offsets(p + 1, 0);
  for (int s = 0; s < p; ++s) {
    if (!errors[s].empty()) {
      error = errors[s];
      return false;
    }
    offsets[s + 1] = offsets[s] + schedule[s].size();
  }

  // Pass 2: send/recv matching.
  std::vector<Ref> partner(offsets[p], Ref{-1, -1});
  if (!matchTransfers(schedule, offsets, partner, error))
    return false;

  // Pass 3: timing.
  std::vector<size_t> pc;
  std::vector<double> clock;
  runTiming(spec, schedule, offsets, partner, pc, clock);
  std::vector<int> stuck;
  for (int s = 0; s < p; ++s)
    if (pc[s] < schedule[s].size())
      stuck.push_back(s);
  if (!stuck.empty()) {
    error = describeDeadlock(schedule, offsets, partner, pc, stuck);
    return false;
  }

  double iteration = 0;
  for (int s = 0; s < p; ++s)
    if (!schedule[s].empty())
      iteration = std::max(iteration, clock[s]);
  result.iterationUs = iteration;
  for (StageTimeline &st : result.stages)
    st.idleUs = iteration - st.busyUs;
  return true;
}

} // namespace pipefill::sched
