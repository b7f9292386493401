//===- ExportReport.cpp - compiled IR -> report JSON and summary ----------===//
//
// The report is computed from the IR alone (simulation results on the
// instructions, bubble ops, fill chunks and the planner's per-job results), so it
// describes exactly what was compiled. Keys follow DESIGN section 8.
//
//===----------------------------------------------------------------------===//
#include "codegen/IRQueries.h"
#include "codegen/Report.h"
#include "codegen/Translate.h"
#include "support/Format.h"

#include "mlir/IR/Threading.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <charconv>
#include <cstring>

using namespace mlir;

namespace pipefill {

namespace {
/// What one stage adds to the pipeline's totals, kept term by term so that
/// the totals are summed in the same order whether stages are read one by
/// one or in parallel (the report's doubles do not depend on the threads).
struct StageTerms {
  std::vector<double> usefulUs; ///< per fill chunk, in IR order
  double overrunUs = 0;
};

ReportStage reportStage(StageOp stage, const FillJobIndex &jobs, double iterationUs,
                        StageTerms &terms) {
  ReportStage rs;
  rs.stage = stage.getIndex();
  rs.busyUs = stage.getBusyUs() ? stage.getBusyUs()->convertToDouble() : 0;
  rs.idleUs = stage.getIdleUs() ? stage.getIdleUs()->convertToDouble() : iterationUs - rs.busyUs;
  rs.peakBytes = stage.getPeakBytes() ? *stage.getPeakBytes() : 0;
  SteadyState steady(stage);
  // Planned fill per job on this stage.
  llvm::DenseMap<StringAttr, double> filledByJob; // by the job symbol's uniqued name
  for (BubbleOp bubble : stage.getBody().front().getOps<BubbleOp>()) {
    ReportBubble rb;
    rb.op = bubble;
    rb.startUs = bubble.getStartUs();
    rb.durationUs = bubble.getDurationUs();
    rb.freeBytes = bubble.getFreeBytes();
    rb.kind = stringifyBubbleKind(bubble.getKind());
    rb.filledUs = 0;
    rb.numFills = 0;
    for (const FillChunk &fill : bubble.getFills()) {
      double weight = steady.weight(fill);
      double filled = weight * fill.predictedUs;
      rb.filledUs += filled;
      filledByJob[fill.job.getAttr()] += filled;
      terms.usefulUs.push_back(weight * jobs.dedicatedUs(fill));
      ++rb.numFills;
    }
    terms.overrunUs += std::max(0.0, worstIterationFillUs(bubble) - rb.durationUs);
    rs.bubbles.push_back(rb);
  }
  for (AssignmentOp a : stageAssignments(stage))
    rs.jobs.push_back({a.getJob().str(), (int64_t)a.getBatch(),
                       a.getSamplesPerIteration().convertToDouble(),
                       filledByJob.lookup(a.getJobAttr().getAttr())});
  // Written by pipefill-plan-fill (passes/FillIR.h, kFillAccountAttr).
  if (auto account = stage->getAttrOfType<DictionaryAttr>("pipefill.fill_account")) {
    ReportFillAccount acc;
    for (NamedAttribute field : account)
      if (auto v = llvm::dyn_cast<FloatAttr>(field.getValue()))
        acc.fields.push_back({field.getName().str(), v.getValueAsDouble()});
    static const char *const kOrder[] = {
        "bubble_us", "filled_us", "useful_us", "switch_us", "launch_us", "other_overhead_us",
        "idle_us", "margin_us", "too_short_us", "memory_us", "granularity_us"};
    auto rank = [&](const std::string &key) {
      return std::find(std::begin(kOrder), std::end(kOrder), key) - std::begin(kOrder);
    };
    std::stable_sort(acc.fields.begin(), acc.fields.end(),
                     [&](const auto &a, const auto &b) { return rank(a.first) < rank(b.first); });
    rs.fillAccount = std::move(acc);
  }
  return rs;
}
} // namespace

std::optional<ReportData> computeReport(ModuleOp module) {
  PipelineOp pipeline = findSimulatedPipeline(module);
  if (!pipeline)
    return std::nullopt;
  ReportData r;
  r.name = pipeline.getSymName().str();
  r.schedule = stringifyScheduleKind(pipeline.getSchedule()).str();
  r.numStages = pipeline.getNumStages();
  r.numMicrobatches = pipeline.getNumMicrobatches();
  r.virtualStages = pipeline.getVirtualStages();
  r.iterationUs = pipeline.getIterationUs()->convertToDouble();
  FillJobIndex jobs(module);

  // Stages are read on MLIR's threads (the IR is only read; FillJobIndex and
  // SteadyState are immutable once built), then summed in stage order.
  llvm::SmallVector<StageOp> stages(pipeline.getStages());
  r.stages.resize(stages.size());
  std::vector<StageTerms> terms(stages.size());
  mlir::parallelFor(module.getContext(), 0, stages.size(), [&](size_t i) {
    r.stages[i] = reportStage(stages[i], jobs, r.iterationUs, terms[i]);
  });
  double idleTotal = 0, overrunMax = 0;
  r.busyUs = r.bubbleUs = r.filledUs = r.usefulUs = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const ReportStage &rs = r.stages[i];
    r.busyUs += rs.busyUs;
    idleTotal += rs.idleUs;
    for (double us : terms[i].usefulUs)
      r.usefulUs += us;
    for (const ReportBubble &rb : rs.bubbles) {
      r.bubbleUs += rb.durationUs;
      r.filledUs += std::min(rb.filledUs, rb.durationUs);
    }
    overrunMax = std::max(overrunMax, terms[i].overrunUs);
  }
  r.bubbleFraction =
      r.iterationUs > 0 ? idleTotal / (r.numStages * r.iterationUs) : 0.0;
  r.filledFraction = r.bubbleUs > 0 ? r.filledUs / r.bubbleUs : 0.0;
  r.usefulFraction = r.bubbleUs > 0 ? r.usefulUs / r.bubbleUs : 0.0;
  r.predictedSlowdown = r.iterationUs > 0 ? overrunMax / r.iterationUs : 0.0;
  r.utilizationGain = r.busyUs > 0 ? r.usefulUs / r.busyUs : 0.0;

  for (FillJobOp job : module.getOps<FillJobOp>()) {
    if (auto reason = job.getUnscheduled()) {
      r.unscheduled.push_back({job.getSymName().str(), reason->str()});
      continue;
    }
    if (!job.getSamplesPerIteration())
      continue;
    r.jobs.push_back(
        {job.getSymName().str(), job.getSamplesPerIteration()->convertToDouble(),
         job.getEfficiency() ? job.getEfficiency()->convertToDouble() : 0.0});
  }
  return r;
}

// The report is streamed: the stages' bubble lists (10^5 bubbles and fill
// chunks at 64 x 512) are written as they are read instead of being built as
// one JSON tree. Streamed objects have their keys in sorted order, as
// llvm::json prints a json::Object; the small parts (the fill summary, a
// stage's jobs) are json::Objects.
// llvm::json writes a double as printf("%.17g"). std::to_chars with the
// general format and precision 17 is specified to give the same characters,
// without glibc's multi-precision printf, which was a third of the report's
// time at 64 x 512 (four doubles per bubble and one per fill chunk).

// The bubbles and their fill chunks are most of the report (10^5-10^6
// objects at 64 x 512, 2.6 million chunks at 128 x 4096). Each bubble is
// written on one line, its fill chunks inline, with Python's json.dumps
// separators (", " and ": "):
//   {"duration_us": 1500, "filled_us": 1400, "fills": [{"batch": 32, ...}], ...}
// The rest of the report keeps llvm::json's indent-2 layout. In the indented
// layout the bubbles' whitespace alone was over 40% of the file (1F1B
// 128 x 4096 x 100: 899 MB); one line per bubble also keeps the file
// readable with grep and head. Keys are in llvm::json's sorted order.
namespace {
/// A bubble's line, built in memory and written to the stream at once:
/// raw_ostream's integer output (llvm::write_integer) cost ~150
/// instructions a number, and a 64 x 512 report has ~10^6 of them.
class LineBuffer {
public:
  void text(llvm::StringRef s) { line.append(s.begin(), s.end()); }
  /// `before` (a key with its separators), then the value.
  void i64(llvm::StringRef before, int64_t v) {
    text(before);
    char buf[24];
    std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
    line.append(buf, r.ptr);
  }
  /// printf("%.17g"). Most doubles of a report repeat (a fill chunk's
  /// predicted time is one of a few per job and batch), so the text of
  /// recent values is kept in a small direct-mapped table.
  void f64(llvm::StringRef before, double v) {
    text(before);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Entry &e = table[(bits ^ (bits >> 29) ^ (bits >> 47)) % kEntries];
    if (!e.used || e.bits != bits) {
      std::to_chars_result r =
          std::to_chars(e.text, e.text + sizeof e.text, v, std::chars_format::general, 17);
      e.size = static_cast<uint8_t>(r.ptr - e.text);
      e.bits = bits;
      e.used = true;
    }
    line.append(e.text, e.text + e.size);
  }
  /// A JSON string as llvm::json writes it: plain names directly, anything
  /// that needs escaping through llvm::json itself.
  void string(llvm::StringRef before, llvm::StringRef str) {
    appendString(line, before, str);
  }
  static void appendString(llvm::SmallVectorImpl<char> &line, llvm::StringRef before,
                           llvm::StringRef str) {
    line.append(before.begin(), before.end());
    bool plain = llvm::all_of(str, [](char c) {
      return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    if (!plain) {
      llvm::raw_svector_ostream os(line);
      os << llvm::json::Value(str.str());
      return;
    }
    line.push_back('"');
    line.append(str.begin(), str.end());
    line.push_back('"');
  }
  /// Writes the line and starts the next.
  void flush(llvm::raw_ostream &os) {
    os.write(line.data(), line.size());
    line.clear();
  }

private:
  static constexpr size_t kEntries = 1021;
  struct Entry {
    uint64_t bits = 0;
    bool used = false;
    uint8_t size = 0;
    char text[32]; // %.17g of a double is at most 24 characters
  };
  std::vector<Entry> table = std::vector<Entry>(kEntries);
  llvm::SmallString<4096> line;
};

class BubbleWriter {
public:
  void write(llvm::raw_ostream &os, const ReportBubble &b) {
    out.f64("{\"duration_us\": ", b.durationUs);
    out.f64(", \"filled_us\": ", b.filledUs);
    if (b.numFills > 0) {
      out.text(", \"fills\": [");
      llvm::StringRef open = "{\"batch\": ";
      BubbleOp bubble = b.op; // a handle; its accessors are non-const
      for (const FillChunk &f : bubble.getFills()) {
        out.i64(open, f.batch);
        open = ", {\"batch\": ";
        out.i64(", \"iteration\": ", f.iteration);
        out.text(jobText(f));
        out.i64(", \"layer_begin\": ", f.layerBegin);
        out.i64(", \"layer_end\": ", f.layerEnd);
        out.i64(", \"peak_bytes\": ", f.peakBytes);
        out.f64(", \"predicted_us\": ", f.predictedUs);
        out.i64(", \"repeat\": ", f.repeat);
        out.text("}");
      }
      out.text("]");
    }
    out.i64(", \"free_bytes\": ", b.freeBytes);
    out.string(", \"kind\": ", b.kind);
    out.f64(", \"start_us\": ", b.startUs);
    out.text("}");
    out.flush(os);
  }

private:
  /// `, "job": <name>` of a chunk's job, escaped once per job (by its
  /// symbol's uniqued name) rather than once per chunk (10^5 of them).
  llvm::StringRef jobText(const FillChunk &f) {
    llvm::SmallString<32> &text = jobTexts[f.job.getAttr()];
    if (text.empty())
      LineBuffer::appendString(text, ", \"job\": ", f.getJob());
    return text;
  }

  LineBuffer out;
  llvm::DenseMap<mlir::StringAttr, llvm::SmallString<32>> jobTexts;
};
} // namespace

LogicalResult exportReport(ModuleOp module, llvm::raw_ostream &os) {
  std::optional<ReportData> r = computeReport(module);
  if (!r)
    return failure();
  llvm::json::Array jobs, unscheduled;
  for (const ReportJob &j : r->jobs)
    jobs.push_back(llvm::json::Object{{"name", j.name},
                                      {"samples_per_iteration", j.samplesPerIteration},
                                      {"efficiency", j.efficiency}});
  for (const ReportUnscheduled &u : r->unscheduled)
    unscheduled.push_back(llvm::json::Object{{"name", u.name}, {"reason", u.reason}});
  llvm::json::Object fill{{"filled_fraction", r->filledFraction},
                          {"useful_fraction", r->usefulFraction},
                          {"predicted_slowdown", r->predictedSlowdown},
                          {"utilization_gain", r->utilizationGain},
                          {"jobs", std::move(jobs)},
                          {"unscheduled", std::move(unscheduled)}};

  // Planned per iteration: filled = useful + switches + launches + other
  // overhead; idle = margin + the three reasons.
  auto fillAccountValue = [](const ReportFillAccount &acc) {
    llvm::json::Object account;
    for (const auto &[key, value] : acc.fields)
      account[key] = value;
    llvm::json::Array reasons;
    auto reason = [&](const char *why, const char *key) {
      double us = acc.get(key);
      if (us > 0)
        reasons.push_back(llvm::json::Object{{"reason", why}, {"us", us}});
    };
    reason("safety margin", "margin_us");
    reason("no fill job has a chunk this short", "too_short_us");
    reason("no chunk this short fits the free memory", "memory_us");
    reason("the placed jobs' ops and batches do not add up to the time left",
           "granularity_us");
    account["idle_reasons"] = std::move(reasons);
    return llvm::json::Value(std::move(account));
  };

  BubbleWriter bubbleWriter;
  llvm::json::OStream j(os, 2);
  j.objectBegin();
  j.attribute("bubble_fraction", r->bubbleFraction);
  j.attribute("fill", std::move(fill));
  j.attribute("iteration_time_us", r->iterationUs);
  j.attribute("name", r->name);
  j.attribute("num_microbatches", r->numMicrobatches);
  j.attribute("num_stages", r->numStages);
  // Every number below is the plan's (cost model, schedule, planner): nothing here was run.
  j.attribute("numbers", "planned");
  j.attribute("schedule", r->schedule);
  j.attributeArray("stages", [&] {
    for (const ReportStage &s : r->stages)
      j.object([&] {
        j.attributeArray("bubbles", [&] {
          for (const ReportBubble &b : s.bubbles) {
            bubbleWriter.write(j.rawValueBegin(), b);
            j.rawValueEnd();
          }
        });
        j.attribute("busy_us", s.busyUs);
        if (s.fillAccount)
          j.attribute("fill_account", fillAccountValue(*s.fillAccount));
        llvm::json::Array stageJobs;
        for (const ReportStageJob &sj : s.jobs)
          stageJobs.push_back(llvm::json::Object{{"name", sj.job},
                                                 {"batch", sj.batch},
                                                 {"samples_per_iteration", sj.samplesPerIteration},
                                                 {"filled_us", sj.filledUs}});
        j.attribute("fill_jobs", std::move(stageJobs));
        j.attribute("idle_us", s.idleUs);
        j.attribute("peak_memory_bytes", s.peakBytes);
        j.attribute("stage", s.stage);
      });
  });
  j.attribute("virtual_stages", r->virtualStages);
  j.objectEnd();
  os << "\n";
  return success();
}

LogicalResult exportSummary(ModuleOp module, llvm::raw_ostream &os) {
  std::optional<ReportData> r = computeReport(module);
  if (!r)
    return failure();
  bool ms = r->iterationUs >= 10000;
  auto t = [&](double us) {
    return ms ? llvm::formatv("{0:f2} ms", us / 1000).str()
              : llvm::formatv("{0:f1} us", us).str();
  };
  os << llvm::formatv("pipeline {0}: {1}, {2} stages x {3} micro-batches{4}\n",
                      r->name, r->schedule, r->numStages, r->numMicrobatches,
                      r->virtualStages > 1
                          ? " x " + std::to_string(r->virtualStages) + " chunks"
                          : std::string());
  // Everything in the summary is planned (the compiler's model); the first numbers say so.
  os << llvm::formatv("planned iteration {0}, bubble fraction {1:f1}% of {2} GPU-time\n\n",
                      t(r->iterationUs), 100 * r->bubbleFraction,
                      t(r->iterationUs * r->numStages));
  os << llvm::formatv("{0,5} {1,12} {2,12} {3,8} {4,14} {5,12} {6,8}  {7}\n", "stage",
                      "busy", "idle", "bubbles", "longest bubble",
                      "peak memory", "filled", "fill jobs (samples/iteration)");
  for (const ReportStage &s : r->stages) {
    double longest = 0, bubbleUs = 0, filled = 0;
    for (const ReportBubble &b : s.bubbles) {
      longest = std::max(longest, b.durationUs);
      bubbleUs += b.durationUs;
      filled += std::min(b.filledUs, b.durationUs);
    }
    std::string jobs;
    for (const ReportStageJob &j : s.jobs)
      jobs += (jobs.empty() ? "" : ", ") + j.job + " " +
              llvm::formatv("{0:f1}", j.samplesPerIteration).str();
    os << llvm::formatv("{0,5} {1,12} {2,12} {3,8} {4,14} {5,12} {6,7:f1}%  {7}\n",
                        s.stage, t(s.busyUs), t(s.idleUs), s.bubbles.size(),
                        t(longest), fmtBytes(s.peakBytes),
                        bubbleUs > 0 ? 100 * filled / bubbleUs : 0.0, jobs);
  }
  os << llvm::formatv("\nfill: {0:f1}% of bubble time planned with fill work, "
                      "predicted slowdown {1:f3}, utilization gain {2:f3}\n",
                      100 * r->filledFraction, r->predictedSlowdown,
                      r->utilizationGain);
  // Useful versus filled, and why bubble time stays idle (planned).
  double switches = 0, launches = 0, other = 0, margin = 0, tooShort = 0,
         memory = 0, granularity = 0;
  bool accounted = false;
  for (const ReportStage &s : r->stages)
    if (s.fillAccount) {
      accounted = true;
      switches += s.fillAccount->get("switch_us");
      launches += s.fillAccount->get("launch_us");
      other += s.fillAccount->get("other_overhead_us");
      margin += s.fillAccount->get("margin_us");
      tooShort += s.fillAccount->get("too_short_us");
      memory += s.fillAccount->get("memory_us");
      granularity += s.fillAccount->get("granularity_us");
    }
  if (accounted && r->bubbleUs > 0) {
    auto pct = [&](double us) { return 100 * us / r->bubbleUs; };
    os << llvm::formatv("useful: {0:f1}% of bubble time (filled {1:f1}%: "
                        "switches {2:f1}%, launches {3:f1}%, other overhead "
                        "{4:f1}%)\n",
                        100 * r->usefulFraction, 100 * r->filledFraction,
                        pct(switches), pct(launches), pct(other));
    os << llvm::formatv("idle: {0:f1}% of bubble time (safety margin {1:f1}%, "
                        "no job this short {2:f1}%, memory {3:f1}%, "
                        "granularity {4:f1}%)\n",
                        100 - 100 * r->filledFraction, pct(margin),
                        pct(tooShort), pct(memory), pct(granularity));
  }
  if (!r->jobs.empty()) {
    os << llvm::formatv("{0,-24} {1,20} {2,12}\n", "job", "samples/iteration",
                        "efficiency");
    for (const ReportJob &j : r->jobs)
      os << llvm::formatv("{0,-24} {1,20:f1} {2,12:f3}\n", j.name,
                          j.samplesPerIteration, j.efficiency);
  }
  for (const ReportUnscheduled &u : r->unscheduled)
    os << "unscheduled " << u.name << ": " << u.reason << "\n";
  return success();
}

} // namespace pipefill
