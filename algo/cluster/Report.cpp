//===- Report.cpp - JSON, SVG and text reports of cluster runs ------------===//

#include "algo/cluster/Report.h"

#include "support/Json.h"
#include "support/Xml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace pipefill::cluster {
namespace {

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string modelName(const std::vector<std::string> &models, int m) {
  return m >= 0 && size_t(m) < models.size() ? models[size_t(m)] : "?";
}

void percentilesJson(JsonWriter &j, const char *key, const Percentiles &p) {
  j.beginObject(key)
      .value("p50", p.p50)
      .value("p90", p.p90)
      .value("p99", p.p99)
      .value("mean", p.mean)
      .value("max", p.max)
      .endObject();
}

void capacityJson(JsonWriter &j, const char *key, const Capacity &c,
                  const std::vector<std::string> &models) {
  j.beginObject(key)
      .value("gpu_equivalents", c.usefulGpus)
      .value("utilization_gain", c.utilizationGain)
      .value("idle_gpu_equivalents", c.idleGpus)
      .value("filled_fraction", c.filledFraction);
  j.beginArray("model_per_stage");
  for (int m : c.modelPerStage)
    j.value(nullptr, modelName(models, m));
  j.endArray();
  j.endObject();
}

void policyJson(JsonWriter &j, const PolicyResult &r, const ClusterModel *cm) {
  j.beginObject()
      .value("policy", toString(r.policy))
      .value("gpus_per_job", r.gpusPerJob)
      .value("completed", r.completed)
      .value("unschedulable", r.unschedulable)
      .value("horizon_s", r.horizonS)
      .value("makespan_s", r.makespanS)
      .value("useful_gpu_s", r.usefulGpuS)
      .value("main_busy_gpu_s", r.mainBusyGpuS)
      .value("utilization_gain", r.utilizationGain)
      .value("gpu_equivalents", r.gpuEquivalents)
      .value("occupancy", r.occupancy)
      .value("total_useful_gpu_s", r.totalUsefulGpuS)
      .value("total_utilization_gain", r.totalUtilizationGain)
      .value("total_gpu_equivalents", r.totalGpuEquivalents);
  percentilesJson(j, "completion_s", r.completionS);
  percentilesJson(j, "queueing_s", r.queueingS);
  j.beginArray("jobs_per_class");
  for (int n : r.jobsPerClass)
    j.value(nullptr, n);
  j.endArray();
  (void)cm;
  j.endObject();
}

std::string padRight(const std::string &s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}
std::string padLeft(const std::string &s, size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}

/// Text table with a header row; first column left-aligned.
std::string textTable(const std::vector<std::vector<std::string>> &rows) {
  if (rows.empty())
    return "";
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto &r : rows)
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < rows[k].size(); ++i) {
      if (i)
        line += "  ";
      line += i == 0 ? padRight(rows[k][i], width[i])
                     : padLeft(rows[k][i], width[i]);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
    if (k == 0) {
      size_t total = 0;
      for (size_t w : width)
        total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

std::string pct(double v) { return fmt("%.1f%%", 100 * v); }
std::string hours(double s) { return fmt("%.2f h", s / 3600); }


/// A "nice" axis maximum >= v (1, 2, 2.5, 5 x 10^k).
double niceMax(double v) {
  if (!(v > 0))
    return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v * 1.0000001)
      return m * p;
  return 10 * p;
}

std::string shortNum(double v) {
  double a = std::fabs(v);
  if (a >= 100)
    return fmt("%.0f", v);
  if (a >= 10)
    return fmt("%.1f", v);
  return fmt("%.2f", v);
}

const char *kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                         "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"};

} // namespace

//===----------------------------------------------------------------------===//
// SVG
//===----------------------------------------------------------------------===//

std::string barChartSvg(const std::string &title,
                        const std::vector<BarPanel> &panels) {
  const double panelW = 360, panelH = 300, top = 60, left = 20;
  const double plotL = 55, plotR = 15, plotT = 52, plotB = 45;
  double width = left * 2 + panelW * double(std::max<size_t>(1, panels.size()));
  double height = top + panelH + 30;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
    << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " "
    << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" "
    << "font-size=\"15\" font-weight=\"bold\">" << xmlEscape(title)
    << "</text>\n";
  // One legend at the top when every panel has the same series; otherwise
  // each panel with more than one series gets its own under its title.
  bool shared = true;
  for (const BarPanel &p : panels)
    shared &= p.series == panels.front().series;
  auto legend = [&](const BarPanel &p, double x, double y) {
    for (size_t i = 0; i < p.series.size(); ++i) {
      s << "<rect x=\"" << x << "\" y=\"" << y - 10
        << "\" width=\"12\" height=\"12\" fill=\"" << kColors[i % 8]
        << "\"/>";
      s << "<text x=\"" << x + 16 << "\" y=\"" << y << "\">"
        << xmlEscape(p.series[i]) << "</text>\n";
      x += 28 + 7.0 * double(p.series[i].size());
    }
  };
  if (shared && !panels.empty() && panels.front().series.size() > 1)
    legend(panels.front(), left + 10, 44);
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const BarPanel &p = panels[pi];
    double x0 = left + panelW * double(pi), y0 = top;
    double px = x0 + plotL, py = y0 + plotT;
    double pw = panelW - plotL - plotR, ph = panelH - plotT - plotB;
    double vmax = 0;
    for (const auto &row : p.values)
      for (double v : row)
        if (std::isfinite(v))
          vmax = std::max(vmax, v);
    double axis = niceMax(vmax);
    s << "<g>\n<text x=\"" << x0 + panelW / 2 << "\" y=\"" << y0 + 20
      << "\" text-anchor=\"middle\" font-size=\"13\">" << xmlEscape(p.title)
      << "</text>\n";
    if (!shared && p.series.size() > 1)
      legend(p, x0 + plotL, y0 + 36);
    for (int k = 0; k <= 4; ++k) {
      double v = axis * k / 4, y = py + ph - ph * k / 4;
      s << "<line x1=\"" << px << "\" y1=\"" << y << "\" x2=\"" << px + pw
        << "\" y2=\"" << y << "\" stroke=\"#ddd\"/>";
      s << "<text x=\"" << px - 4 << "\" y=\"" << y + 4
        << "\" text-anchor=\"end\">" << shortNum(v) << "</text>\n";
    }
    s << "<line x1=\"" << px << "\" y1=\"" << py + ph << "\" x2=\"" << px + pw
      << "\" y2=\"" << py + ph << "\" stroke=\"#333\"/>\n";
    size_t nc = std::max<size_t>(1, p.categories.size());
    size_t ns = std::max<size_t>(1, p.series.size());
    double groupW = pw / double(nc);
    double barW = groupW * 0.8 / double(ns);
    for (size_t c = 0; c < p.categories.size(); ++c) {
      double gx = px + groupW * double(c) + groupW * 0.1;
      for (size_t si = 0; si < p.series.size(); ++si) {
        double v = si < p.values.size() && c < p.values[si].size()
                       ? p.values[si][c]
                       : 0;
        if (!std::isfinite(v) || v < 0)
          v = 0;
        double h = ph * v / axis, bx = gx + barW * double(si);
        s << "<rect x=\"" << bx << "\" y=\"" << py + ph - h << "\" width=\""
          << barW * 0.92 << "\" height=\"" << h << "\" fill=\""
          << kColors[si % 8] << "\"><title>" << xmlEscape(p.series[si])
          << ", " << xmlEscape(p.categories[c]) << ": " << shortNum(v)
          << xmlEscape(p.unit) << "</title></rect>";
        s << "<text x=\"" << bx + barW * 0.46 << "\" y=\"" << py + ph - h - 3
          << "\" text-anchor=\"middle\" font-size=\"9\">" << shortNum(v)
          << "</text>\n";
      }
      s << "<text x=\"" << gx + groupW * 0.4 << "\" y=\"" << py + ph + 16
        << "\" text-anchor=\"middle\">" << xmlEscape(p.categories[c])
        << "</text>\n";
    }
    s << "<text x=\"" << px + pw / 2 << "\" y=\"" << py + ph + 34
      << "\" text-anchor=\"middle\" fill=\"#555\">" << xmlEscape(p.unit)
      << "</text>\n</g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

//===----------------------------------------------------------------------===//
// One configuration against a trace
//===----------------------------------------------------------------------===//

std::string runJson(const RunReport &r) {
  const PipelineAnalysis &a = *r.analysis;
  const cost::TransformerConfig &c = a.costs.config;
  std::vector<std::string> models;
  for (const fill::Job &j : a.models)
    models.push_back(j.name);
  JsonWriter j;
  j.beginObject()
      .value("name", r.name)
      .value("numbers", "modelled") // a queue simulation over the cost model: nothing was run
      .value("gpus", a.gpus)
      .value("tp", c.tp)
      .value("pp", c.pp)
      .value("dp", c.dp)
      .value("microbatches", a.costs.microbatches)
      .value("schedule", sched::toString(a.setup.schedule))
      .value("recompute", a.recompute)
      .value("gpu", a.costs.gpu.name)
      .value("efficiency", a.costs.hw.efficiency)
      .value("iteration_time_us", a.iterationUs)
      .value("bubble_fraction", a.bubbleFraction)
      .value("mfu", a.mfu)
      .value("planner_calls", a.plannerCalls)
      .value("planner_cache_hits", a.cacheHits);
  j.beginArray("stages");
  for (const StageSummary &st : a.stages) {
    j.beginObject()
        .value("stage", st.stage)
        .value("busy_us", st.busyUs)
        .value("idle_us", st.idleUs)
        .value("bubble_us", st.bubbleUs)
        .value("bubbles", st.bubbles)
        .value("peak_memory_bytes", st.peakBytes)
        .value("min_free_bytes", st.minFreeBytes);
    j.beginArray("fills");
    for (size_t m = 0; m < st.fills.size(); ++m) {
      const StageFill &f = st.fills[m];
      j.beginObject()
          .value("model", models[m])
          .value("samples_per_iteration", f.samplesPerIteration)
          .value("useful_us", f.usefulUs)
          .value("filled_us", f.filledUs)
          .value("efficiency", f.efficiency);
      if (!f.knobs.empty())
        j.value("knobs", f.knobs);
      if (!f.reason.empty())
        j.value("reason", f.reason);
      j.endObject();
    }
    j.endArray().endObject();
  }
  j.endArray();
  j.beginObject("capacity");
  capacityJson(j, "best", saturatedCapacity(a, -1), models);
  j.beginArray("per_model");
  for (size_t m = 0; m < models.size(); ++m) {
    Capacity cap = saturatedCapacity(a, int(m));
    j.beginObject()
        .value("model", models[m])
        .value("gpu_equivalents", cap.usefulGpus)
        .value("utilization_gain", cap.utilizationGain)
        .endObject();
  }
  j.endArray().endObject();
  if (r.trace) {
    j.beginObject("trace")
        .value("file", r.traceFile)
        .value("jobs", uint64_t(r.trace->size()))
        .endObject();
  }
  j.beginArray("policies");
  for (const PolicyResult &p : r.policies)
    policyJson(j, p, nullptr);
  j.endArray();
  if (r.perJob && !r.policies.empty()) {
    j.beginArray("jobs");
    for (size_t i = 0; r.trace && i < r.trace->size(); ++i) {
      const TraceJob &t = (*r.trace)[i];
      j.beginObject()
          .value("job", uint64_t(i))
          .value("model", t.model)
          .value("samples", t.samples)
          .value("arrival_s", t.arrivalS);
      for (const PolicyResult &p : r.policies) {
        const JobOutcome &o = p.jobs[i];
        j.beginObject(toString(p.policy));
        if (o.gpuClass < 0) {
          j.value("scheduled", false);
        } else {
          j.value("stage", o.gpuClass)
              .value("start_s", o.startS)
              .value("end_s", o.endS);
        }
        j.endObject();
      }
      j.endObject();
    }
    j.endArray();
  }
  j.endObject();
  return j.str();
}

std::string runSvg(const RunReport &r) {
  BarPanel eq{"GPU-equivalents recovered", "GPUs", {}, {"window"}, {{}}};
  BarPanel gain{"Utilization gain", "%", {}, {"window"}, {{}}};
  BarPanel jct{"Fill-job completion time", "hours", {}, {"p50", "p90", "p99"},
               {{}, {}, {}}};
  BarPanel wait{"Queueing delay", "hours", {}, {"p50", "p90", "p99"},
                {{}, {}, {}}};
  for (const PolicyResult &p : r.policies) {
    std::string name = toString(p.policy);
    for (BarPanel *panel : {&eq, &gain, &jct, &wait})
      panel->categories.push_back(name);
    eq.values[0].push_back(p.gpuEquivalents);
    gain.values[0].push_back(100 * p.utilizationGain);
    jct.values[0].push_back(p.completionS.p50 / 3600);
    jct.values[1].push_back(p.completionS.p90 / 3600);
    jct.values[2].push_back(p.completionS.p99 / 3600);
    wait.values[0].push_back(p.queueingS.p50 / 3600);
    wait.values[1].push_back(p.queueingS.p90 / 3600);
    wait.values[2].push_back(p.queueingS.p99 / 3600);
  }
  const PipelineAnalysis &a = *r.analysis;
  std::string title = r.name + ": " + std::to_string(a.gpus) + " GPUs, " +
                      sched::toString(a.setup.schedule) + ", " +
                      std::to_string(a.costs.microbatches) +
                      " micro-batches, bubble " + pct(a.bubbleFraction) +
                      (r.trace ? ", " + std::to_string(r.trace->size()) +
                                     " fill jobs"
                               : "");
  return barChartSvg(title, {eq, gain, jct, wait});
}

// Every number pipefill-sim prints is modelled; the text says so once, on top.
const char *const kModelledNote =
    "(modelled: the cost model, the planner's fill rates and a simulated queue; nothing here is "
    "measured)\n";

std::string runTable(const RunReport &r) {
  const PipelineAnalysis &a = *r.analysis;
  const cost::TransformerConfig &c = a.costs.config;
  std::string out = kModelledNote;
  out += r.name + ": " + std::to_string(a.gpus) + " " + a.costs.gpu.name +
         " GPUs = dp " + std::to_string(c.dp) + " x pp " +
         std::to_string(c.pp) + " x tp " + std::to_string(c.tp) + ", " +
         sched::toString(a.setup.schedule) + ", " +
         std::to_string(a.costs.microbatches) + " micro-batches" +
         (a.recompute ? ", recompute" : "") + "\n";
  out += "iteration " + fill::formatUs(a.iterationUs) + ", bubble fraction " +
         pct(a.bubbleFraction) + ", MFU " + pct(a.mfu) + "\n\n";

  std::vector<std::string> models;
  for (const fill::Job &j : a.models)
    models.push_back(j.name);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"stage", "idle"};
  for (const std::string &m : models)
    head.push_back(m);
  rows.push_back(head);
  for (const StageSummary &st : a.stages) {
    std::vector<std::string> row = {std::to_string(st.stage),
                                    pct(a.iterationUs > 0
                                            ? st.idleUs / a.iterationUs
                                            : 0)};
    for (const StageFill &f : st.fills)
      row.push_back(f.samplesPerIteration > 0 ? pct(f.efficiency) : "-");
    rows.push_back(row);
  }
  out += "fill efficiency per stage (useful GPU time / bubble time):\n";
  out += textTable(rows);
  Capacity best = saturatedCapacity(a, -1);
  out += "\nsaturated queue, best model per stage: " +
         shortNum(best.usefulGpus) + " GPU-equivalents, utilization gain " +
         pct(best.utilizationGain) + "\n";

  if (!r.policies.empty()) {
    rows.clear();
    rows.push_back({"policy", "done", "GPU-eq", "util gain", "occupancy",
                    "JCT p50", "JCT p90", "JCT p99", "wait p50", "wait p99",
                    "makespan"});
    for (const PolicyResult &p : r.policies)
      rows.push_back({toString(p.policy),
                      std::to_string(p.completed) + "/" +
                          std::to_string(p.jobs.size()),
                      shortNum(p.gpuEquivalents), pct(p.utilizationGain),
                      pct(p.occupancy), hours(p.completionS.p50),
                      hours(p.completionS.p90), hours(p.completionS.p99),
                      hours(p.queueingS.p50), hours(p.queueingS.p99),
                      hours(p.makespanS)});
    out += "\n" + std::to_string(r.trace ? r.trace->size() : 0) +
           " fill jobs, gangs of " +
           std::to_string(r.policies[0].gpusPerJob) +
           " GPUs, window " + hours(r.policies[0].horizonS) + ":\n";
    out += textTable(rows);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Study
//===----------------------------------------------------------------------===//

std::string studyJson(const StudyReport &r) {
  const cost::TransformerConfig &c = r.base->model;
  JsonWriter j;
  j.beginObject().value("name", r.name);
  j.value("numbers", "modelled"); // a queue simulation over the cost model: nothing was run
  j.beginObject("model")
      .value("layers", c.layers)
      .value("hidden", c.hidden)
      .value("heads", c.heads)
      .value("seq_length", c.seqLength)
      .value("vocab", c.vocab)
      .value("ffn_hidden", c.ffnHidden ? c.ffnHidden : 4 * c.hidden)
      .value("micro_batch_size", c.microBatchSize)
      .value("tp", c.tp)
      .value("pp", c.pp)
      .value("global_batch", c.globalBatch)
      .value("gpu", c.gpu)
      .value("zero_stage", c.zeroStage)
      .value("recompute", toString(r.base->recompute))
      .endObject();
  j.beginArray("fill_models");
  for (const std::string &m : r.models)
    j.value(nullptr, m);
  j.endArray();
  j.beginObject("paper")
      .value("source", "PipeFill, MLSys 2025")
      .value("low_scale_gain", "5-15%")
      .value("gain_8k", 0.63)
      .value("gpu_equivalents_8k", 2600)
      .endObject();
  j.beginArray("points");
  for (const StudyPoint &p : *r.points) {
    j.beginObject()
        .value("gpus", p.gpus)
        .value("dp", p.dp)
        .value("schedule", sched::toString(p.schedule))
        .value("ok", p.ok);
    if (!p.ok) {
      j.value("error", p.error).endObject();
      continue;
    }
    j.value("microbatches", p.microbatches)
        .value("recompute", p.recompute)
        .value("iteration_time_us", p.iterationUs)
        .value("bubble_fraction", p.bubbleFraction)
        .value("mfu", p.mfu)
        .value("idle_gpu_equivalents", p.best.idleGpus)
        .value("gpu_equivalents", p.best.usefulGpus)
        .value("utilization_gain", p.best.utilizationGain)
        .value("filled_fraction", p.best.filledFraction);
    j.beginArray("model_per_stage");
    for (int m : p.best.modelPerStage)
      j.value(nullptr, modelName(r.models, m));
    j.endArray();
    j.beginArray("per_model");
    for (size_t m = 0; m < p.perModel.size(); ++m)
      j.beginObject()
          .value("model", modelName(r.models, int(m)))
          .value("gpu_equivalents", p.perModel[m].usefulGpus)
          .value("utilization_gain", p.perModel[m].utilizationGain)
          .endObject();
    j.endArray();
    if (!p.policies.empty()) {
      j.beginArray("policies");
      for (const PolicyResult &pr : p.policies)
        policyJson(j, pr, nullptr);
      j.endArray();
    }
    j.endObject();
  }
  j.endArray().endObject();
  return j.str();
}

std::string studySvg(const StudyReport &r) {
  std::vector<std::string> cats;
  std::vector<sched::ScheduleKind> kinds;
  for (const StudyPoint &p : *r.points) {
    std::string cat = p.gpus >= 1024 && p.gpus % 1024 == 0
                          ? std::to_string(p.gpus / 1024) + "K"
                          : std::to_string(p.gpus);
    if (std::find(cats.begin(), cats.end(), cat) == cats.end())
      cats.push_back(cat);
    if (std::find(kinds.begin(), kinds.end(), p.schedule) == kinds.end())
      kinds.push_back(p.schedule);
  }
  BarPanel bubble{"Bubble fraction", "% of GPU time", cats, {}, {}};
  BarPanel gain{"Utilization gain", "% over main-job work", cats, {}, {}};
  BarPanel eq{"Work recovered", "GPU-equivalents", cats, {}, {}};
  for (sched::ScheduleKind k : kinds) {
    for (BarPanel *panel : {&bubble, &gain, &eq}) {
      panel->series.push_back(sched::toString(k));
      panel->values.push_back(std::vector<double>(cats.size(), 0));
    }
  }
  for (const StudyPoint &p : *r.points) {
    if (!p.ok)
      continue;
    size_t si = size_t(std::find(kinds.begin(), kinds.end(), p.schedule) -
                       kinds.begin());
    std::string cat = p.gpus >= 1024 && p.gpus % 1024 == 0
                          ? std::to_string(p.gpus / 1024) + "K"
                          : std::to_string(p.gpus);
    size_t ci = size_t(std::find(cats.begin(), cats.end(), cat) - cats.begin());
    bubble.values[si][ci] = 100 * p.bubbleFraction;
    gain.values[si][ci] = 100 * p.best.utilizationGain;
    eq.values[si][ci] = p.best.usefulGpus;
  }
  const cost::TransformerConfig &c = r.base->model;
  std::string title = r.name + " (TP " + std::to_string(c.tp) + " x PP " +
                      std::to_string(c.pp) + ", global batch " +
                      std::to_string(c.globalBatch) + ", " + c.gpu +
                      "): bubbles filled by PipeFill vs GPU count";
  return barChartSvg(title, {bubble, gain, eq});
}

namespace {
/// (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m+p-1) interleaved, -1 else.
double closedFormBubble(sched::ScheduleKind k, int p, int m, int v) {
  if (k == sched::ScheduleKind::GPipe || k == sched::ScheduleKind::OneFOneB)
    return double(p - 1) / double(m + p - 1);
  if (k == sched::ScheduleKind::Interleaved1F1B)
    return double(p - 1) / double(v * m + p - 1);
  return -1;
}

std::vector<std::vector<std::string>>
studyRows(const StudyReport &r) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"GPUs", "DP", "micro-batches", "schedule", "recompute",
                  "iteration", "closed form", "bubble", "idle GPU-eq",
                  "recovered GPU-eq", "utilization gain", "filled"});
  for (const StudyPoint &p : *r.points) {
    if (!p.ok) {
      rows.push_back({std::to_string(p.gpus), p.dp ? std::to_string(p.dp) : "-",
                      "-", sched::toString(p.schedule), "-", "-", "-",
                      "n/a*", "-", "-", "-", "-"});
      continue;
    }
    double closed = closedFormBubble(p.schedule, r.base->model.pp,
                                     p.microbatches,
                                     r.base->virtualStages);
    rows.push_back({std::to_string(p.gpus), std::to_string(p.dp),
                    std::to_string(p.microbatches),
                    sched::toString(p.schedule), p.recompute ? "yes" : "no",
                    fill::formatUs(p.iterationUs),
                    closed >= 0 ? pct(closed) : "-", pct(p.bubbleFraction),
                    fmt("%.0f", p.best.idleGpus),
                    fmt("%.0f", p.best.usefulGpus),
                    pct(p.best.utilizationGain),
                    pct(p.best.filledFraction)});
  }
  return rows;
}
} // namespace

/// "* 20 GPUs, gpipe: <error>" lines for the points that could not run.
std::string studyNotes(const StudyReport &r, const char *bullet) {
  std::string out;
  for (const StudyPoint &p : *r.points)
    if (!p.ok)
      out += std::string(bullet) + std::to_string(p.gpus) + " GPUs, " +
             sched::toString(p.schedule) + ": " + p.error + "\n";
  return out.empty() ? out : "\n" + out;
}

std::string studyTable(const StudyReport &r) {
  std::string out = kModelledNote + textTable(studyRows(r)) + studyNotes(r, "* ");
  bool anyPolicies = false;
  for (const StudyPoint &p : *r.points)
    anyPolicies |= !p.policies.empty();
  if (anyPolicies) {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"GPUs", "schedule", "policy", "GPU-eq", "util gain",
                    "JCT p50", "JCT p90", "JCT p99"});
    for (const StudyPoint &p : *r.points)
      for (const PolicyResult &pr : p.policies)
        rows.push_back({std::to_string(p.gpus), sched::toString(p.schedule),
                        toString(pr.policy), shortNum(pr.gpuEquivalents),
                        pct(pr.utilizationGain), hours(pr.completionS.p50),
                        hours(pr.completionS.p90),
                        hours(pr.completionS.p99)});
    out += "\ntrace replayed at every point:\n" + textTable(rows);
  }
  return out;
}

std::string studyMarkdown(const StudyReport &r) {
  std::vector<std::vector<std::string>> rows = studyRows(r);
  const cost::TransformerConfig &c = r.base->model;
  std::string out = "## " + r.name + ": PipeFill scale study\n\n";
  out += "Main job: " + std::to_string(c.layers) + " layers, hidden " +
         std::to_string(c.hidden) + ", " + std::to_string(c.heads) +
         " heads, sequence " + std::to_string(c.seqLength) + ", vocabulary " +
         std::to_string(c.vocab) + "; TP " + std::to_string(c.tp) + " x PP " +
         std::to_string(c.pp) + ", micro-batch " +
         std::to_string(c.microBatchSize) + ", fixed global batch " +
         std::to_string(c.globalBatch) + " sequences; " + c.gpu +
         ", ZeRO stage " + std::to_string(c.zeroStage) + ", recompute " +
         toString(r.base->recompute) + ". Fill models:";
  for (size_t i = 0; i < r.models.size(); ++i)
    out += (i ? ", " : " ") + r.models[i];
  out += ". Recovered work assumes an endless queue and runs the most "
         "efficient model on each stage. Every figure is modelled (the cost "
         "model, the planner's fill rates and a simulated queue), none "
         "measured.\n\n";
  for (size_t k = 0; k < rows.size(); ++k) {
    out += "|";
    for (const std::string &cell : rows[k])
      out += " " + cell + " |";
    out += "\n";
    if (k == 0) {
      out += "|";
      for (size_t i = 0; i < rows[k].size(); ++i)
        out += i < 1 ? " --- |" : " ---: |";
      out += "\n";
    }
  }
  out += studyNotes(r, "\\* ");
  bool anyPolicies = false;
  for (const StudyPoint &p : *r.points)
    anyPolicies |= !p.policies.empty();
  if (anyPolicies) {
    out += "\n| GPUs | schedule | policy | GPU-eq | utilization gain | JCT "
           "p50 | JCT p90 | JCT p99 |\n| --- | --- | --- | ---: | ---: | ---: "
           "| ---: | ---: |\n";
    for (const StudyPoint &p : *r.points)
      for (const PolicyResult &pr : p.policies)
        out += "| " + std::to_string(p.gpus) + " | " +
               sched::toString(p.schedule) + " | " + toString(pr.policy) +
               " | " + shortNum(pr.gpuEquivalents) + " | " +
               pct(pr.utilizationGain) + " | " + hours(pr.completionS.p50) +
               " | " + hours(pr.completionS.p90) + " | " +
               hours(pr.completionS.p99) + " |\n";
  }
  return out;
}

} // namespace pipefill::cluster
