//===- Explain.cpp - Why fill jobs or bubble time stay unused -------------===//
//
// Layer 4 of the planner: the reasons reported for jobs no stage takes, and
// the account of every stage's bubble time (filled, useful, overheads, idle
// and why).
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"

#include <limits>

#include <map>
#include <unordered_map>

namespace pipefill::fill::detail {

std::string explainNoFit(const Job &job, const JobInfo &info,
                         const AllBubbles &all, const Config &config) {
  double ctx = config.contextSwitchUs;
  if (all.frontier.empty())
    return "there are no bubbles to fill";
  const int64_t maxMinFree = all.maxMinFree, maxMem = all.maxMem;
  const double maxBudget = all.maxBudget, maxDuration = all.maxDuration;
  auto fits = [&](double time, int64_t bytes) {
    return all.frontier.fits(time, bytes);
  };

  int numOp = numOps(job);
  std::vector<double> minTime(numOp, kInf);
  std::vector<int64_t> minBytes(numOp, std::numeric_limits<int64_t>::max());
  std::vector<const JobConfig *> minTimeCfg(numOp), minBytesCfg(numOp);
  std::vector<char> placeable(numOp, 0);
  int64_t minPersistent = std::numeric_limits<int64_t>::max();
  ChunkBuilder builder;
  for (const JobConfig &cfg : info.configs) {
    minPersistent = std::min(minPersistent, cfg.persistentBytes);
    if (cfg.persistentBytes > maxMinFree)
      continue;
    bool all = true;
    for (int op = 0; op < numOp; ++op) {
      // The op alone, with the activation copies at both ends.
      const OpCost &c = cfg.ops[op];
      double inUs = c.inUs;
      int64_t inBytes = c.inBytes;
      if (op > 0 && cfg.hostActs) {
        inUs += cfg.ops[op - 1].boundaryUs;
        inBytes += cfg.ops[op - 1].boundaryBytes;
      }
      builder.reset();
      builder.push(inUs, c.computeUs, c.outUs, inBytes, c.outBytes,
                   c.workBytes);
      double time = builder.makespan();
      int64_t bytes = builder.transient();
      if (op + 1 < numOp && cfg.hostActs)
        builder.withExtraOut(c.boundaryUs, c.boundaryBytes, time, bytes);
      time += ctx;
      bytes += cfg.persistentBytes;
      if (time < minTime[op]) {
        minTime[op] = time;
        minTimeCfg[op] = &cfg;
      }
      if (bytes < minBytes[op]) {
        minBytes[op] = bytes;
        minBytesCfg[op] = &cfg;
      }
      bool ok = fits(time, bytes);
      placeable[op] = placeable[op] || ok;
      all = all && ok;
    }
    if (all)
      return "";
  }
  bool training = job.kind == JobKind::Training;
  if (info.configs.empty())
    return "no knob setting is usable";
  if (minPersistent > maxMinFree)
    return format("what it must keep on the device across bubbles (%s, "
                  "weights resident: no PCIe bandwidth to stream them) "
                  "exceeds the largest minimum free memory of any stage (%s)",
                  formatBytes(minPersistent).c_str(),
                  formatBytes(std::max<int64_t>(maxMinFree, 0)).c_str());
  for (int op = 0; op < numOp; ++op) {
    if (placeable[op])
      continue;
    bool backward = false;
    const Layer &l = job.layers[opLayer(job, op, &backward)];
    std::string name = format("layer '%s'%s", l.name.c_str(),
                              backward ? " (backward)" : "");
    std::vector<std::string> parts;
    if (minBytes[op] > maxMem)
      parts.push_back(format(
          "%s needs %s (least with %s) but the largest bubble has %s free",
          name.c_str(), formatBytes(minBytes[op]).c_str(),
          describe(minBytesCfg[op]->knobs, training).c_str(),
          formatBytes(std::max<int64_t>(maxMem, 0)).c_str()));
    if (minTime[op] > maxBudget)
      parts.push_back(format(
          "%s takes %s (fastest with %s, incl. %s context switch) but the "
          "longest bubble allows %s (%s less the %g%% margin)",
          parts.empty() ? name.c_str() : "it",
          formatUs(minTime[op]).c_str(),
          describe(minTimeCfg[op]->knobs, training).c_str(),
          formatUs(ctx).c_str(), formatUs(std::max(maxBudget, 0.0)).c_str(),
          formatUs(maxDuration).c_str(), config.safetyMargin * 100));
    if (parts.empty())
      parts.push_back(format(
          "%s needs %s and %s (at best) but no bubble has both that much time "
          "and that much free memory",
          name.c_str(), formatUs(minTime[op]).c_str(),
          formatBytes(minBytes[op]).c_str()));
    std::string s = parts[0];
    for (size_t i = 1; i < parts.size(); ++i)
      s += "; " + parts[i];
    return s;
  }
  return "no single knob setting fits every layer into some bubble";
}

namespace {
/// Dedicated-speed time and kernel launches of ops [begin, end) of a batch.
void opWork(const Job &job, int begin, int end, bool checkpoint,
            double &usefulPerSample, int &launches) {
  usefulPerSample = 0;
  launches = 0;
  for (int op = begin; op < end; ++op) {
    bool backward = false;
    const Layer &l = job.layers[opLayer(job, op, &backward)];
    if (!backward) {
      usefulPerSample += l.forwardUsPerSample;
      launches += 1;
    } else {
      usefulPerSample += l.backwardUsPerSample;
      launches += 1 + (checkpoint ? 1 : 0) +
                  (l.weightBytes || l.gradBytes || l.optimizerBytes ? 1 : 0);
    }
  }
}
} // namespace

ShortChunks shortChunks(const std::vector<JobInfo> &infos, const Config &config) {
  ShortChunks out;
  struct Entry {
    double us;
    int job;
    int64_t persistent, transient;
  };
  std::vector<Entry> entries;
  for (size_t j = 0; j < infos.size(); ++j)
    if (infos[j].reason.empty())
      for (const JobConfig &cfg : infos[j].configs)
        entries.push_back({config.contextSwitchUs + cfg.minOpUs, int(j),
                           cfg.persistentBytes, cfg.minOpTransient});
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry &a, const Entry &b) { return a.us < b.us; });
  for (const Entry &e : entries) {
    out.us.push_back(e.us);
    out.job.push_back(e.job);
    out.persistent.push_back(e.persistent);
    out.transient.push_back(e.transient);
  }
  return out;
}

StageAccount accountStage(const StageInfo &info, const StageBubbles &sb,
                          const std::vector<Job> &jobs, const std::vector<JobInfo> &infos,
                          const Hardware &hw, const Config &config,
                          const ShortChunks &shortChunks, const Plan &part) {
  const double ctx = config.contextSwitchUs;
  const double shortest = shortChunks.shortest();
  // The stage's assignments by job.
  std::map<int, const Assignment *> assignment;
  for (const Assignment &a : part.assignments)
    if (a.stage == sb.stage)
      assignment[a.job] = &a;
  StageAccount acc;
  acc.stage = sb.stage;
  size_t nb = info.budget.size();
  std::unordered_map<int, size_t> index;
  index.reserve(nb);
  for (size_t k = 0; k < nb; ++k)
    index[info.bubbleIds[k]] = k;
  std::vector<double> used(nb, 0);
  int64_t persistent = 0;
  for (const Assignment &a : part.assignments)
    if (a.stage == sb.stage)
      persistent += a.persistentBytes;
  for (const Chunk &c : part.chunks) {
    if (c.stage != sb.stage)
      continue;
    const Assignment &a = *assignment.at(c.job);
    if (c.iteration < a.prefixIterations)
      continue; // steady state only
    double w = double(c.repeat) / a.periodIterations;
    double usefulPerSample = 0;
    int launches = 0;
    opWork(jobs[c.job], c.layerBegin, c.layerEnd, c.checkpoint, usefulPerSample, launches);
    used[index[c.bubbleId]] += w * c.predictedUs;
    acc.filledUs += w * c.predictedUs;
    acc.usefulUs += w * c.batch * usefulPerSample;
    acc.switchUs += w * ctx;
    acc.launchUs += w * launches * hw.kernelLaunchUs;
  }
  acc.otherOverheadUs =
      std::max(0.0, acc.filledUs - acc.usefulUs - acc.switchUs - acc.launchUs);
  // The settings that may run on the stage, by their shortest chunk (the
  // table is sorted once for all stages), with the running least bytes that
  // chunk needs here with what the stage keeps: some chunk fits (time,
  // bytes) iff the least bytes among those no longer than time is within
  // bytes. A setting the stage's memory cannot keep counts for nothing.
  const size_t ns = shortChunks.us.size();
  std::vector<char> on(infos.size(), 0);
  for (const auto &[job, a] : assignment)
    on[job] = 1;
  std::vector<int64_t> leastBytes(ns);
  std::vector<size_t> counted(ns); // settings counted up to here
  int64_t least = std::numeric_limits<int64_t>::max();
  size_t count = 0;
  for (size_t i = 0; i < ns; ++i) {
    int64_t keep = persistent + (on[shortChunks.job[i]] ? 0 : shortChunks.persistent[i]);
    if (keep <= info.minFree) {
      least = std::min(least, keep + shortChunks.transient[i]);
      ++count;
    }
    leastBytes[i] = least;
    counted[i] = count;
  }
  for (size_t k = 0; k < nb; ++k) {
    const Bubble &b = sb.bubbles[k];
    acc.bubbleUs += b.durationUs;
    acc.marginUs += b.durationUs - info.budget[k];
    double left = std::max(0.0, info.budget[k] - used[k]);
    if (left <= 1e-9)
      continue;
    if (left < shortest) {
      acc.tooShortUs += left;
      continue;
    }
    // A chunk that short exists: does one also fit the memory?
    size_t n = std::upper_bound(shortChunks.us.begin(), shortChunks.us.end(), left) -
               shortChunks.us.begin();
    bool fits = n > 0 && counted[n - 1] > 0 && leastBytes[n - 1] <= info.mem[k];
    (fits ? acc.granularityUs : acc.memoryUs) += left;
  }
  acc.idleUs = std::max(0.0, acc.bubbleUs - acc.filledUs);
  return acc;
}

} // namespace pipefill::fill::detail
