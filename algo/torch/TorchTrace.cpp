//===- TorchTrace.cpp - measured stage costs from torch profiler traces ---===//
#include "algo/torch/TorchTrace.h"
#include "algo/torch/TorchSchedule.h"
#include "support/Limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

namespace pipefill::torchsched {
namespace {

bool isCommOp(const std::string &name) {
  return name.rfind("c10d::", 0) == 0 || name.find("gloo") != std::string::npos ||
         name.find("nccl") != std::string::npos ||
         name.find("record_param_comms") != std::string::npos;
}

/// A point-to-point receive (`c10d::recv_`, the `gloo:recv` annotation that
/// spans gloo's wait, `nccl:recv`): inside a single-stage schedule's range it
/// is the wait for the range's input.
bool isRecvOp(const std::string &name) {
  return isCommOp(name) && name.find("recv") != std::string::npos;
}

bool isAutogradOp(const std::string &name) {
  return name.rfind("autograd::", 0) == 0;
}

sched::InstrKind instrKind(ActKind k) {
  switch (k) {
  case ActKind::Forward: return sched::InstrKind::Forward;
  case ActKind::FullBackward: return sched::InstrKind::Backward;
  case ActKind::BackwardInput: return sched::InstrKind::BackwardInput;
  default: return sched::InstrKind::BackwardWeight;
  }
}

/// One compute sub-action measured in one range.
struct Sample {
  sched::InstrKind kind;
  int stage, mb;
  double start, end; ///< compute span
  size_t file;
  int line;
};

/// Parses "Forward 3" / "Backward 3"; returns false if it is not one.
bool singleStageLabel(const std::string &name, bool &forward, int &mb) {
  std::string prefix;
  if (name.rfind("Forward ", 0) == 0) {
    forward = true;
    prefix = "Forward ";
  } else if (name.rfind("Backward ", 0) == 0) {
    forward = false;
    prefix = "Backward ";
  } else {
    return false;
  }
  std::string rest = name.substr(prefix.size());
  if (rest.empty() || rest.size() > 7 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  mb = std::stoi(rest);
  return true;
}

bool failAt(TraceDiag &diag, const TraceFile &f, int line, const std::string &msg) {
  diag = {f.path, line, msg};
  return false;
}

/// Operator events of a trace per thread, by start time.
using OpsByThread = std::map<std::string, std::vector<const TraceEvent *>>;

/// What a trace event is: not an action (skip), an action with its compute
/// sub-actions in `subs`, or an error (diag set).
enum class EventActions { Skip, Ok, Error };

EventActions errorAt(TraceDiag &diag, const TraceFile &f, int line,
                     const std::string &msg) {
  failAt(diag, f, line, msg);
  return EventActions::Error;
}

EventActions actionsOf(const TraceFile &f, const TraceEvent &e,
                       const StagePlacement &placement,
                       std::vector<Action> &subs, TraceDiag &diag) {
  const int S = placement.devices * placement.chunks;
  bool single = false, forward = false;
  int mb = -1;
  if (e.name.rfind("PP:", 0) == 0) {
    Action a;
    Diag d;
    if (!parseAction(std::string_view(e.name).substr(3), e.line, 4, a, d))
      return errorAt(diag, f, e.line, "'" + e.name + "' is not a torch pipelining "
                                     "action label: " + d.message);
    if (a.kind == ActKind::OverlapFB)
      subs = a.sub;
    else if (isCompute(a.kind))
      subs.push_back(a);
    else
      return EventActions::Skip; // communication and bookkeeping actions
  } else if (singleStageLabel(e.name, forward, mb)) {
    if (f.rank < 0)
      return errorAt(diag, f, e.line, "'" + e.name + "' (a single-stage schedule's "
                                     "label) needs the trace's rank, and the trace "
                                     "has no distributedInfo.rank");
    if (placement.chunks != 1)
      return errorAt(diag, f, e.line, "'" + e.name + "' comes from a single-stage "
                                     "schedule, but the pipeline has " +
                                         std::to_string(placement.chunks) +
                                         " chunks per stage");
    Action a;
    a.kind = forward ? ActKind::Forward : ActKind::FullBackward;
    a.stage = f.rank;
    a.microbatch = mb;
    subs.push_back(a);
    single = true;
  } else {
    return EventActions::Skip;
  }
  if (!std::isfinite(e.ts) || !std::isfinite(e.dur) || e.dur < 0)
    return errorAt(diag, f, e.line, "'" + e.name + "' has no valid ts and dur");
  // The project's clock limits: times near 1e300 made every mean and gap inf
  // or 0 without a word.
  if (std::fabs(e.ts) > kMaxClockUs || e.dur > kMaxUs) {
    char text[96];
    std::snprintf(text, sizeof text, "ts %g and dur %g", e.ts, e.dur);
    return errorAt(diag, f, e.line,
                   "'" + e.name + "' has " + text + " us; ts must be within +-1e15 us and dur at most 1e9 us");
  }
  for (const Action &a : subs)
    if (a.stage < 0 || a.stage >= S)
      return errorAt(diag, f, e.line,
                    "'" + e.name + "' names stage " + std::to_string(a.stage) +
                        ", but the pipeline has " + std::to_string(S) +
                        " stages (" + std::to_string(placement.devices) +
                        " x " + std::to_string(placement.chunks) + ")" +
                        (single ? " (the stage is the trace's rank)" : ""));
    else if (placement.microbatches > 0 &&
             (a.microbatch < 0 || a.microbatch >= placement.microbatches))
      return errorAt(diag, f, e.line,
                     "'" + e.name + "' names micro-batch " + std::to_string(a.microbatch) +
                         ", but the pipeline has " + std::to_string(placement.microbatches) +
                         " micro-batches");
  return EventActions::Ok;
}

/// The events of `byThread` on `e`'s thread nested in `e`, in start order.
template <class Fn>
void forNested(const TraceEvent &e, const OpsByThread &byThread, Fn &&fn) {
  auto it = byThread.find(e.thread);
  if (it == byThread.end())
    return;
  const auto &list = it->second;
  auto first = std::lower_bound(list.begin(), list.end(), e.ts,
                                [](const TraceEvent *a, double t) { return a->ts < t; });
  for (auto op = first; op != list.end() && (*op)->ts <= e.ts + e.dur; ++op)
    if ((*op)->ts + (*op)->dur <= e.ts + e.dur + 1e-6)
      fn(**op);
}

/// The samples of one action range: the compute span of its nested
/// operators, split between the sub-actions of an OVERLAP_F_B group.
/// Operators that start before the end of the range's last receive
/// (`recvs`) prepare or wait for its input (ScheduleGPipe's ranges hold the
/// receive buffer's allocation, the receive and its wait): not compute.
void addSamples(const TraceEvent &e, const std::vector<Action> &subs,
                const OpsByThread &ops, const OpsByThread &recvs, size_t fi,
                std::vector<Sample> &samples) {
  double inputAt = e.ts;
  forNested(e, recvs, [&](const TraceEvent &r) { inputAt = std::max(inputAt, r.ts + r.dur); });
  // Spans of the nested operators: all, and split for OVERLAP_F_B.
  double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
  forNested(e, ops, [&](const TraceEvent &op) {
    if (op.ts < inputAt)
      return;
    int cls = isAutogradOp(op.name) ? 1 : 0;
    lo[cls] = std::min(lo[cls], op.ts);
    hi[cls] = std::max(hi[cls], op.ts + op.dur);
  });
  bool overlap = subs.size() > 1;
  double allLo = std::min(lo[0], lo[1]), allHi = std::max(hi[0], hi[1]);
  if (!(allHi >= allLo)) { // no nested operators (after the input's arrival)
    allLo = inputAt;
    allHi = e.ts + e.dur;
  }
  // For a group: the sub-actions of each class share that class's span.
  int count[2] = {0, 0};
  for (const Action &a : subs)
    ++count[a.kind == ActKind::Forward ? 0 : 1];
  int seen[2] = {0, 0};
  for (const Action &a : subs) {
    int cls = a.kind == ActKind::Forward ? 0 : 1;
    double s0 = allLo, s1 = allHi;
    if (overlap) {
      if (hi[cls] >= lo[cls]) {
        s0 = lo[cls];
        s1 = hi[cls];
      } else {
        // This class recorded no operators: an equal share of the range.
        s0 = e.ts;
        s1 = e.ts + e.dur / double(subs.size());
      }
      double part = (s1 - s0) / count[cls];
      s0 += part * seen[cls];
      s1 = s0 + part;
      ++seen[cls];
    }
    samples.push_back({instrKind(a.kind), a.stage, a.microbatch, s0, s1, fi,
                       e.line});
  }
}

/// The compute samples of trace file `fi`; false (diag set) on a bad label
/// or a file without actions.
bool samplesOfFile(const std::vector<TraceFile> &files, size_t fi,
                   const StagePlacement &placement,
                   std::vector<Sample> &samples, TraceDiag &diag) {
  const TraceFile &f = files[fi];
  OpsByThread ops, recvs;
  for (const TraceEvent &e : f.events) {
    if (e.cat == "cpu_op" && !isCommOp(e.name))
      ops[e.thread].push_back(&e);
    else if ((e.cat == "cpu_op" || e.cat == "user_annotation") && isRecvOp(e.name))
      recvs[e.thread].push_back(&e);
  }
  for (OpsByThread *byThread : {&ops, &recvs})
    for (auto &[thread, list] : *byThread)
      std::sort(list.begin(), list.end(),
                [](const TraceEvent *a, const TraceEvent *b) { return a->ts < b->ts; });
  size_t before = samples.size();
  for (const TraceEvent &e : f.events) {
    std::vector<Action> subs;
    EventActions kind = actionsOf(f, e, placement, subs, diag);
    if (kind == EventActions::Error)
      return false;
    if (kind == EventActions::Ok)
      addSamples(e, subs, ops, recvs, fi, samples);
  }
  if (samples.size() == before)
    return failAt(diag, f, 0, "the trace has no torch pipelining action events "
                              "(PP:<action> ranges of _PipelineScheduleRuntime and the "
                              "multi-stage schedules, or 'Forward <mb>'/'Backward <mb>' of "
                              "ScheduleGPipe; Schedule1F1B records none: profile it as a "
                              "_PipelineScheduleRuntime that loads its --to-torch-schedule "
                              "table); profile a step of the schedule");
  return true;
}

/// Occurrences: the k-th sample of a (stage, kind, mb) belongs to iteration k.
using SampleKey = std::tuple<int, int, int>; // stage, kind, mb
using SamplesByKey = std::map<SampleKey, std::vector<const Sample *>>;

bool groupSamples(const std::vector<TraceFile> &files,
                  std::vector<Sample> &samples, SamplesByKey &byKey,
                  TraceDiag &diag) {
  std::sort(samples.begin(), samples.end(),
            [](const Sample &a, const Sample &b) { return a.start < b.start; });
  for (const Sample &s : samples) {
    auto &list = byKey[{s.stage, int(s.kind), s.mb}];
    if (!list.empty() && list.front()->file != s.file)
      return failAt(diag, files[s.file], s.line,
                    "stage " + std::to_string(s.stage) + " micro-batch " +
                        std::to_string(s.mb) + " " + sched::toString(s.kind) +
                        " also appears in " + files[list.front()->file].path +
                        " (line " + std::to_string(list.front()->line) +
                        "); each stage runs on one rank");
    list.push_back(&s);
  }
  return true;
}

/// Mean duration and start of every op over the iterations used (the first
/// is left out when there are more), and the mean iteration time.
void measureOps(const SamplesByKey &byKey, const StagePlacement &placement,
                const std::vector<double> &origin, const std::vector<double> &end,
                TraceProfile &out) {
  int iterations = out.iterations;
  int firstUsed = iterations > 1 ? 1 : 0;
  for (auto &[key, list] : byKey) {
    auto [stage, kind, mb] = key;
    MeasuredOp m;
    m.kind = sched::InstrKind(kind);
    m.stage = stage;
    m.device = placement.deviceOfStage[stage];
    m.chunk = placement.chunkOfStage[stage];
    m.microbatch = mb;
    size_t from = list.size() > size_t(firstUsed) ? size_t(firstUsed) : 0;
    for (size_t k = from; k < list.size(); ++k) {
      m.meanUs += list[k]->end - list[k]->start;
      m.meanStartUs += list[k]->start - origin[k];
      ++m.samples;
    }
    m.meanUs /= m.samples;
    m.meanStartUs /= m.samples;
    out.ops.push_back(m);
  }
  std::sort(out.ops.begin(), out.ops.end(), [](const MeasuredOp &a, const MeasuredOp &b) {
    return a.device != b.device ? a.device < b.device : a.meanStartUs < b.meanStartUs;
  });
  int used = 0;
  for (int k = firstUsed; k < iterations; ++k, ++used)
    out.iterationUs += end[k] - origin[k];
  out.iterationUs = used ? out.iterationUs / used : 0;
}

/// Gaps of each device's compute in the last iteration.
void deviceGaps(const SamplesByKey &byKey, const StagePlacement &placement,
                const std::vector<double> &origin, const std::vector<double> &end,
                TraceProfile &out) {
  int last = out.iterations - 1;
  std::vector<std::vector<std::pair<double, double>>> spans(placement.devices);
  for (auto &[key, list] : byKey)
    if (int(list.size()) > last) {
      const Sample *s = list[last];
      spans[placement.deviceOfStage[s->stage]].push_back({s->start, s->end});
    }
  out.deviceIterationUs.assign(placement.devices, 0);
  for (int d = 0; d < placement.devices; ++d) {
    auto &sp = spans[d];
    if (sp.empty())
      continue;
    std::sort(sp.begin(), sp.end());
    double o = origin[last];
    out.deviceIterationUs[d] = sp.back().second - sp.front().first;
    if (sp.front().first > o)
      out.gaps.push_back({d, 0, sp.front().first - o, sched::BubbleKind::Warmup});
    double reach = sp.front().second;
    for (size_t i = 1; i < sp.size(); ++i) {
      if (sp[i].first > reach)
        out.gaps.push_back({d, reach - o, sp[i].first - reach,
                            sched::BubbleKind::Steady});
      reach = std::max(reach, sp[i].second);
    }
    if (end[last] > reach)
      out.gaps.push_back({d, reach - o, end[last] - reach,
                          sched::BubbleKind::Cooldown});
  }
}

} // namespace

bool profileFromTraces(const std::vector<TraceFile> &files,
                       const StagePlacement &placement, TraceProfile &out,
                       TraceDiag &diag) {
  out = TraceProfile();
  std::vector<Sample> samples;
  for (size_t fi = 0; fi < files.size(); ++fi)
    if (!samplesOfFile(files, fi, placement, samples, diag))
      return false;
  SamplesByKey byKey;
  if (!groupSamples(files, samples, byKey, diag))
    return false;
  // The k-th occurrence of every action is iteration k, so every action must
  // occur equally often: otherwise iteration k would mix steps (a trace cut
  // mid-step, or an action missing from one).
  const SamplesByKey::value_type *most = nullptr;
  for (auto &entry : byKey)
    if (!most || entry.second.size() > most->second.size())
      most = &entry;
  int iterations = most ? int(most->second.size()) : 0;
  auto times = [](size_t n) { return n == 1 ? std::string("once") : std::to_string(n) + " times"; };
  auto describe = [](const SampleKey &key) {
    auto [stage, kind, mb] = key;
    return "stage " + std::to_string(stage) + " micro-batch " + std::to_string(mb) + " " +
           sched::toString(sched::InstrKind(kind));
  };
  // A compute that the trace gives no time (a zero-length range with no operators inside) was
  // not timed: refused here, at its line, rather than written as a measured 0 us.
  for (auto &[key, list] : byKey) {
    const size_t from = list.size() > 1 ? 1 : 0; // what measureOps averages
    double total = 0;
    for (size_t k = from; k < list.size(); ++k)
      total += list[k]->end - list[k]->start;
    if (!(total > 0))
      return failAt(diag, files[list[from]->file], list[from]->line,
                    describe(key) + " lasts 0 us in the trace (a zero-length range with no "
                                    "operators after its input arrived): nothing timed it");
  }
  for (auto &[key, list] : byKey)
    if (int(list.size()) != iterations)
      return failAt(diag, files[list.front()->file], list.front()->line,
                    describe(key) + " appears " + times(list.size()) + ", but " +
                        describe(most->first) + " appears " + times(iterations) + " (at line " +
                        std::to_string(most->second.front()->line) + " of " +
                        files[most->second.front()->file].path +
                        "); every action must occur once per profiled step, or the "
                        "steps would mix");
  out.iterations = iterations;
  std::vector<double> origin(iterations, INFINITY), end(iterations, -INFINITY);
  for (auto &[key, list] : byKey)
    for (size_t k = 0; k < list.size(); ++k) {
      origin[k] = std::min(origin[k], list[k]->start);
      end[k] = std::max(end[k], list[k]->end);
    }
  measureOps(byKey, placement, origin, end, out);
  deviceGaps(byKey, placement, origin, end, out);
  return true;
}

} // namespace pipefill::torchsched
