//===- Bubbles.cpp - Idle gaps of a simulated schedule --------------------===//

#include "algo/schedule/Schedule.h"
#include "support/Checked.h"

#include <algorithm>

namespace pipefill::sched {

void findStageBubbles(const PipelineSpec &spec, const Schedule &schedule, int s,
                      const SimResult &result, int64_t gpuMemoryBytes,
                      double minDurationUs, int64_t reserveBytes,
                      std::vector<Bubble> &bubbles) {
  const double iteration = result.iterationUs;
  if (!(iteration > 0))
    return;
  const std::vector<Instr> &list = schedule[s];
  const int64_t staticBytes =
      size_t(s) < spec.costs.size() ? spec.costs[s].staticBytes : 0;
  long lastForward = -1, lastBackward = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == InstrKind::Forward)
      lastForward = long(i);
    else if (isBackwardFamily(list[i].kind))
      lastBackward = long(i);
  }
  auto kindAfter = [&](long prev) {
    if (prev < 0)
      return BubbleKind::Warmup;
    if (spec.tail && lastBackward >= 0 && prev >= lastBackward)
      return BubbleKind::Tail;
    if (prev >= lastForward)
      return BubbleKind::Cooldown;
    return BubbleKind::Steady;
  };
  auto firstNonSend = [&](long from) {
    size_t j = size_t(from);
    while (j < list.size() && list[j].kind == InstrKind::Send)
      ++j;
    return j;
  };
  auto emit = [&](double start, double end, long prev) {
    double duration = end - start;
    if (!(duration > 0) || duration < minDurationUs)
      return;
    int64_t live = prev < 0 ? staticBytes : list[size_t(prev)].liveBytesAfter;
    int64_t free = satSub(satSub(gpuMemoryBytes, live), reserveBytes);
    Bubble b;
    b.stage = s;
    b.startUs = start;
    b.durationUs = duration;
    b.freeBytes = std::max<int64_t>(0, free);
    b.kind = kindAfter(prev);
    b.insertBefore = firstNonSend(prev + 1);
    bubbles.push_back(b);
  };
  double cursor = 0;
  long prev = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const Instr &in = list[i];
    if (!isCompute(in.kind))
      continue;
    emit(cursor, in.startUs, prev);
    cursor = std::max(cursor, in.endUs);
    prev = long(i);
  }
  emit(cursor, iteration, prev);
}

std::vector<Bubble> findBubbles(const PipelineSpec &spec,
                                const Schedule &schedule,
                                const SimResult &result,
                                int64_t gpuMemoryBytes, double minDurationUs,
                                int64_t reserveBytes) {
  std::vector<Bubble> bubbles;
  for (int s = 0; s < static_cast<int>(schedule.size()); ++s)
    findStageBubbles(spec, schedule, s, result, gpuMemoryBytes, minDurationUs,
                     reserveBytes, bubbles);
  return bubbles;
}

} // namespace pipefill::sched
