//===- Analysis.cpp - Main job -> bubbles -> per-stage fill rates ---------===//

#include "algo/cluster/Analysis.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

namespace pipefill::cluster {

const char *toString(Recompute r) {
  switch (r) {
  case Recompute::Off:
    return "off";
  case Recompute::On:
    return "on";
  case Recompute::Auto:
    return "auto";
  }
  return "?";
}

bool parseRecompute(const std::string &text, Recompute &out) {
  std::string t;
  for (char c : text)
    t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "off" || t == "false" || t == "no")
    out = Recompute::Off;
  else if (t == "on" || t == "true" || t == "yes")
    out = Recompute::On;
  else if (t == "auto")
    out = Recompute::Auto;
  else
    return false;
  return true;
}

namespace {

/// Costs + schedule + simulation of the main job with a fixed recompute
/// setting. Returns false with `error` for invalid input; sets `fits`.
bool runMainJob(const PipelineSetup &setup, bool recompute,
                PipelineAnalysis &out, bool &fits,
                std::vector<sched::Bubble> &bubbles, std::string &error) {
  cost::TransformerConfig cfg = setup.model;
  cfg.recompute = recompute;
  std::string field;
  if (!cost::computeModelCosts(cfg, setup.schedule, setup.virtualStages,
                               out.costs, error, &field))
    return false;
  sched::PipelineSpec &spec = out.costs.spec;
  const HardwareOverrides &o = setup.hardware;
  if (o.p2pLatencyUs >= 0)
    spec.p2pLatencyUs = o.p2pLatencyUs;
  if (o.p2pBandwidthGBps >= 0)
    spec.p2pBandwidthGBps = o.p2pBandwidthGBps;
  out.gpuMemoryBytes =
      o.gpuMemoryBytes > 0 ? o.gpuMemoryBytes : out.costs.hw.gpuMemoryBytes;
  out.fillHardware.pcieGBps = o.pcieGBps >= 0 ? o.pcieGBps : out.costs.hw.pcieGBps;
  out.fillHardware.hbmGBps = o.hbmGBps >= 0 ? o.hbmGBps : out.costs.hw.hbmGBps;
  out.fillHardware.kernelLaunchUs =
      o.kernelLaunchUs >= 0 ? o.kernelLaunchUs : out.costs.hw.kernelLaunchUs;

  if (!sched::validateSpec(spec, error))
    return false;
  sched::Schedule schedule;
  if (!sched::expandSchedule(spec, schedule, error))
    return false;
  if (!sched::simulate(spec, schedule, out.sim, error))
    return false;
  out.recompute = recompute;
  out.iterationUs = out.sim.iterationUs;
  out.bubbleFraction = sched::bubbleFraction(out.sim);
  out.mfu = cost::modelFlopsUtilization(out.costs, out.iterationUs);
  fits = true;
  int worst = -1;
  for (size_t s = 0; s < out.sim.stages.size(); ++s)
    if (out.sim.stages[s].peakBytes > out.gpuMemoryBytes &&
        (worst < 0 || out.sim.stages[s].peakBytes >
                          out.sim.stages[size_t(worst)].peakBytes))
      worst = int(s);
  if (worst >= 0) {
    fits = false;
    error = "the main job does not fit in GPU memory: stage " +
            std::to_string(worst) + " needs " +
            fill::formatBytes(out.sim.stages[size_t(worst)].peakBytes) +
            " at its peak (" + sched::toString(setup.schedule) + ", " +
            std::to_string(spec.microbatches) + " micro-batches" +
            (recompute ? ", with recompute" : ", no recompute") +
            ") but the GPU has " + fill::formatBytes(out.gpuMemoryBytes) +
            "; enable recompute or zero_stage 1, or raise pp / tp";
  }

  // Bubbles, per stage.
  bubbles = sched::findBubbles(
      spec, schedule, out.sim, out.gpuMemoryBytes, setup.planner.minBubbleUs,
      setup.planner.reserveBytes);
  out.stages.assign(size_t(spec.stages), StageSummary());
  for (int s = 0; s < spec.stages; ++s) {
    StageSummary &st = out.stages[size_t(s)];
    st.stage = s;
    st.busyUs = out.sim.stages[size_t(s)].busyUs;
    st.idleUs = out.sim.stages[size_t(s)].idleUs;
    st.peakBytes = out.sim.stages[size_t(s)].peakBytes;
    st.minFreeBytes = std::max<int64_t>(
        0, out.gpuMemoryBytes - st.peakBytes - setup.planner.reserveBytes);
  }
  for (const sched::Bubble &b : bubbles) {
    StageSummary &st = out.stages[size_t(b.stage)];
    st.bubbleUs += b.durationUs;
    st.bubbles++;
  }
  return true;
}

std::string cacheKey(const fill::StageBubbles &sb, size_t model) {
  std::string key;
  auto put = [&](const void *p, size_t n) {
    key.append(static_cast<const char *>(p), n);
  };
  put(&model, sizeof model);
  put(&sb.iterationUs, sizeof sb.iterationUs);
  put(&sb.minFreeBytes, sizeof sb.minFreeBytes);
  for (const fill::Bubble &b : sb.bubbles) {
    put(&b.durationUs, sizeof b.durationUs);
    put(&b.freeBytes, sizeof b.freeBytes);
  }
  return key;
}

} // namespace

bool analyzePipeline(const PipelineSetup &setupIn,
                     const std::vector<fill::Job> &models,
                     PipelineAnalysis &out, std::string &error) {
  out = PipelineAnalysis();
  if (models.empty()) {
    error = "no fill models to plan";
    return false;
  }
  PipelineSetup setup = setupIn;
  // virtualStages means "chunks per device when interleaved".
  if (setup.schedule != sched::ScheduleKind::Interleaved1F1B)
    setup.virtualStages = 1;
  bool fits = false;
  std::vector<sched::Bubble> bubbles;
  bool first = setup.recompute == Recompute::On ? true
                                                : setup.model.recompute &&
                                                      setup.recompute !=
                                                          Recompute::Off;
  if (!runMainJob(setup, first, out, fits, bubbles, error))
    return false;
  if (!fits && setup.recompute == Recompute::Auto && !first) {
    PipelineAnalysis retry;
    std::string retryError;
    bool retryFits = false;
    std::vector<sched::Bubble> retryBubbles;
    if (!runMainJob(setup, true, retry, retryFits, retryBubbles,
                    retryError)) {
      error = retryError;
      return false;
    }
    if (retryFits) {
      out = std::move(retry);
      bubbles = std::move(retryBubbles);
      fits = true;
    } else {
      error = retryError;
    }
  }
  if (!fits)
    return false;
  setup.model.recompute = out.recompute;
  out.setup = setup;
  out.models = models;
  const cost::TransformerConfig &cfg = out.costs.config;
  out.gpusPerStage = cfg.dp * cfg.tp;
  out.gpus = out.gpusPerStage * cfg.pp;

  std::vector<fill::StageBubbles> stageBubbles(out.stages.size());
  for (size_t s = 0; s < out.stages.size(); ++s) {
    stageBubbles[s].stage = 0; // planned alone: index 0 of its own plan
    stageBubbles[s].iterationUs = out.iterationUs;
    stageBubbles[s].minFreeBytes = out.stages[s].minFreeBytes;
  }
  for (const sched::Bubble &b : bubbles) {
    fill::StageBubbles &sb = stageBubbles[size_t(b.stage)];
    fill::Bubble fb;
    fb.id = int(sb.bubbles.size());
    fb.startUs = b.startUs;
    fb.durationUs = b.durationUs;
    fb.freeBytes = b.freeBytes;
    sb.bubbles.push_back(fb);
  }

  fill::Config config = setup.planner.fill;
  config.reserveBytes = 0; // already taken off by findBubbles / minFreeBytes
  std::unordered_map<std::string, StageFill> cache;
  for (size_t s = 0; s < out.stages.size(); ++s) {
    StageSummary &st = out.stages[s];
    st.fills.assign(models.size(), StageFill());
    for (size_t m = 0; m < models.size(); ++m) {
      StageFill &f = st.fills[m];
      if (stageBubbles[s].bubbles.empty()) {
        f.reason = "the stage has no bubbles of at least " +
                   fill::formatUs(setup.planner.minBubbleUs);
        continue;
      }
      std::string key = cacheKey(stageBubbles[s], m);
      auto it = cache.find(key);
      if (it != cache.end()) {
        f = it->second;
        out.cacheHits++;
        continue;
      }
      fill::Job job = models[m];
      job.samples = int64_t(1) << 40; // unbounded: plan the steady state
      fill::Plan plan =
          fill::planFill({stageBubbles[s]}, {job}, out.fillHardware, config);
      out.plannerCalls++;
      if (!plan.errors.empty()) {
        error = "fill planner, stage " + std::to_string(s) + ", model '" +
                models[m].name + "': " + plan.errors.front();
        return false;
      }
      if (!plan.jobs.empty() && plan.jobs[0].samplesPerIteration > 0) {
        f.samplesPerIteration = plan.jobs[0].samplesPerIteration;
        f.usefulUs =
            f.samplesPerIteration * fill::usefulUsPerSample(models[m]);
        f.filledUs = plan.jobs[0].filledUs;
        f.efficiency = st.bubbleUs > 0 ? f.usefulUs / st.bubbleUs : 0;
        for (const fill::Assignment &a : plan.assignments)
          if (a.job == 0) {
            f.batch = a.batch;
            f.knobs = "batch " + std::to_string(a.batch) + ", weights " +
                      fill::toString(a.weights) + ", activations on " +
                      fill::toString(a.acts);
            if (models[m].kind == fill::JobKind::Training)
              f.knobs += std::string(", optimizer on ") +
                         fill::toString(a.optimizer) +
                         (a.checkpoint ? ", checkpointing" : "");
            break;
          }
      } else {
        f.reason = plan.unscheduled.empty() ? "no bubble fits any chunk"
                                            : plan.unscheduled[0].reason;
      }
      cache.emplace(std::move(key), f);
    }
  }
  return true;
}

ClusterModel clusterModelFrom(const PipelineAnalysis &a) {
  ClusterModel cm;
  for (const fill::Job &j : a.models) {
    cm.models.push_back(j.name);
    cm.usefulSPerSample.push_back(fill::usefulUsPerSample(j) * 1e-6);
  }
  for (const StageSummary &st : a.stages) {
    GpuClass c;
    c.name = "stage " + std::to_string(st.stage);
    c.gpus = a.gpusPerStage;
    c.busyFraction = a.iterationUs > 0 ? st.busyUs / a.iterationUs : 0;
    cm.classes.push_back(c);
    std::vector<double> rate, eff;
    for (const StageFill &f : st.fills) {
      rate.push_back(a.iterationUs > 0
                         ? f.samplesPerIteration / a.iterationUs * 1e6
                         : 0);
      eff.push_back(f.efficiency);
    }
    cm.samplesPerS.push_back(rate);
    cm.efficiency.push_back(eff);
  }
  return cm;
}

Capacity saturatedCapacity(const PipelineAnalysis &a, int model) {
  Capacity cap;
  if (!(a.iterationUs > 0))
    return cap;
  double busy = 0, bubble = 0, filled = 0;
  for (const StageSummary &st : a.stages) {
    int m = model;
    if (m < 0) {
      m = 0;
      for (size_t k = 1; k < st.fills.size(); ++k)
        if (st.fills[k].efficiency > st.fills[size_t(m)].efficiency)
          m = int(k);
    }
    cap.modelPerStage.push_back(m);
    double g = a.gpusPerStage;
    const StageFill *f =
        size_t(m) < st.fills.size() ? &st.fills[size_t(m)] : nullptr;
    if (f) {
      cap.usefulGpus += g * f->usefulUs / a.iterationUs;
      filled += f->filledUs;
    }
    busy += g * st.busyUs / a.iterationUs;
    cap.idleGpus += g * st.idleUs / a.iterationUs;
    bubble += st.bubbleUs;
  }
  cap.utilizationGain = busy > 0 ? cap.usefulGpus / busy : 0;
  cap.filledFraction = bubble > 0 ? filled / bubble : 0;
  return cap;
}

bool runStudy(const PipelineSetup &base, const std::vector<fill::Job> &models,
              const StudyOptions &opts, std::vector<StudyPoint> &out,
              std::string &error) {
  out.clear();
  if (models.empty()) {
    error = "the study needs at least one fill model";
    return false;
  }
  if (opts.gpus.empty() || opts.schedules.empty()) {
    error = "the study needs at least one GPU count and one schedule";
    return false;
  }
  const int perReplica = base.model.tp * base.model.pp;
  if (perReplica < 1) {
    error = "model.tp and model.pp must be positive";
    return false;
  }
  for (sched::ScheduleKind kind : opts.schedules) {
    for (int n : opts.gpus) {
      StudyPoint pt;
      pt.gpus = n;
      pt.schedule = kind;
      if (n < perReplica || n % perReplica != 0) {
        pt.error = std::to_string(n) + " GPUs is not a multiple of tp x pp = " +
                   std::to_string(perReplica);
        out.push_back(pt);
        continue;
      }
      PipelineSetup setup = base;
      setup.schedule = kind;
      setup.model.dp = n / perReplica;
      pt.dp = setup.model.dp;
      PipelineAnalysis a;
      std::string pointError;
      if (!analyzePipeline(setup, models, a, pointError)) {
        pt.error = pointError;
        out.push_back(pt);
        continue;
      }
      pt.ok = true;
      pt.microbatches = a.costs.microbatches;
      pt.recompute = a.recompute;
      pt.iterationUs = a.iterationUs;
      pt.bubbleFraction = a.bubbleFraction;
      pt.mfu = a.mfu;
      pt.best = saturatedCapacity(a, -1);
      for (size_t m = 0; m < models.size(); ++m)
        pt.perModel.push_back(saturatedCapacity(a, int(m)));
      if (opts.trace) {
        ClusterModel cm = clusterModelFrom(a);
        for (Policy p : opts.policies) {
          SimOptions so;
          so.policy = p;
          so.gpusPerJob = opts.gpusPerJob > 0 ? opts.gpusPerJob
                                              : setup.model.tp;
          so.horizonS = opts.horizonS;
          so.agingS = opts.agingS;
          so.efficiencyTolerance = opts.efficiencyTolerance;
          PolicyResult r;
          if (!simulateQueue(cm, *opts.trace, so, r, error))
            return false;
          pt.policies.push_back(std::move(r));
        }
      }
      out.push_back(std::move(pt));
    }
  }
  return true;
}

} // namespace pipefill::cluster
