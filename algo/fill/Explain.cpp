//===- Explain.cpp - Why fill jobs or bubble time stay unused -------------===//
//
// Layer 4 of the planner: the reasons reported for jobs no stage takes.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"

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

} // namespace pipefill::fill::detail
