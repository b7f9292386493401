//===- ExportSvg.cpp - compiled IR -> SVG pipeline picture ----------------===//
//
// The classic pipeline diagram: one row per stage, time to the right.
// Forward, backward, weight-gradient and tail instructions are coloured boxes
// labelled with their micro-batch; bubbles are dashed outlines, and the fill
// chunks planned into them are drawn inside, coloured by job. A time axis and
// a legend complete the picture; every box has a hover tooltip.
//
//===----------------------------------------------------------------------===//
#include "codegen/IRQueries.h"
#include "codegen/Translate.h"
#include "support/Format.h"
#include "support/Xml.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace pipefill {
namespace {

constexpr double kWidth = 1600, kLeft = 96, kRight = 24, kTop = 64;
constexpr double kRow = 26, kGap = 6;
const char *kFillPalette[] = {"#F58518", "#E45756", "#EECA3B", "#FF9DA6",
                              "#9D755D", "#79706E", "#D67195", "#B6992D"};

struct Style {
  const char *name;
  const char *color;
};
Style styleOf(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward: return {"forward", "#4C78A8"};
  case InstrKind::Backward:
  case InstrKind::BackwardInput: return {"backward", "#54A24B"};
  case InstrKind::BackwardWeight: return {"weight grad", "#B279A2"};
  case InstrKind::AllReduceGrads: return {"all-reduce", "#72B7B2"};
  case InstrKind::OptimizerStep: return {"optimizer", "#2F4B7C"};
  case InstrKind::Send:
  case InstrKind::Recv: break;
  }
  return {nullptr, nullptr};
}

std::string escape(StringRef s) { return pipefill::xmlEscape(std::string_view(s.data(), s.size())); }

/// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` ticks.
double niceStep(double span, int target) {
  double raw = span / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag)
      return m * mag;
  return 10 * mag;
}

std::string timeLabel(double us, bool ms) {
  return ms ? fmtNum(us / 1000.0) + " ms" : fmtNum(us) + " us";
}


/// The picture's geometry and the per-job colours, shared by its parts.
struct Canvas {
  double iteration = 1;   ///< us across the plot
  double plotW = kWidth - kLeft - kRight;
  double axisY = 0, legendY = 0;
  int perRow = 8;         ///< legend items per row
  bool ms = false;        ///< label times in ms
  llvm::StringMap<const char *> jobColor;
  SmallVector<StringRef> jobOrder;
  double x(double us) const { return kLeft + us / iteration * plotW; }
};

/// A bubble's dashed outline and the fill chunks of the first steady-state
/// iteration planned into it, at their planned offsets.
void writeBubble(const Canvas &c, BubbleOp bubble, SteadyState &steady, double y,
                 llvm::raw_ostream &os) {
  const bool ms = c.ms;
  auto x = [&](double us) { return c.x(us); };
  double bx = x(bubble.getStartUs());
  double bw = x(bubble.getEndUs()) - bx;
  os << llvm::formatv(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" "
      "stroke=\"#999\" stroke-dasharray=\"3,2\"><title>{4} bubble: {5} at "
      "{6}, {7} free</title></rect>\n",
      bx, y + 1, bw, kRow - 2, stringifyBubbleKind(bubble.getKind()),
      timeLabel(bubble.getDurationUs(), ms),
      timeLabel(bubble.getStartUs(), ms),
      fmtBytes(bubble.getFreeBytes()));
  // Fill work of the first steady-state iteration, at its planned offset.
  for (const FillChunk &fill : bubble.getFills()) {
    if (!steady.inFirstSteadyIteration(fill))
      continue;
    double t = bubble.getStartUs() +
               fill.offsetUs;
    double d = fill.predictedUs * fill.repeat;
    const char *color = c.jobColor.lookup(fill.getJob());
    os << llvm::formatv(
        "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
        "fill=\"{4}\" fill-opacity=\"0.85\"><title>{5}: passes {6}-{7}, "
        "batch {8}, {9}, {10}</title></rect>\n",
        x(t), y + 5, std::max(0.5, x(t + d) - x(t)), kRow - 10,
        color ? color : "#F58518", escape(fill.getJob()),
        fill.layerBegin, fill.layerEnd, fill.batch,
        timeLabel(d, ms), fmtBytes(fill.peakBytes));
  }
}

/// One instruction's box, with its micro-batch as the label when it fits.
void writeInstruction(const Canvas &c, PipelineOp pipeline, InstructionOpInterface instr,
                      double y, llvm::raw_ostream &os) {
  const bool ms = c.ms;
  auto x = [&](double us) { return c.x(us); };
  Style style = styleOf(instr.getInstrKind());
  const InstrTiming &t = instr.getTiming();
  if (!style.name || !t.hasStart() || !t.hasEnd())
    return;
  double ox = x(t.startUs);
  double ow = std::max(0.5, x(t.endUs) - ox);
  bool mb = instr.getMicrobatchIndex() >= 0;
  bool chunk = mb;
  std::string label = mb ? std::to_string(instr.getMicrobatchIndex()) : "";
  os << llvm::formatv(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"{4}\" "
      "stroke=\"white\" stroke-width=\"0.5\"><title>{5}{6}{7}: {8} - {9}</title></rect>\n",
      ox, y, ow, kRow, style.color, style.name,
      mb ? " mb " + label : std::string(),
      chunk && pipeline.getVirtualStages() > 1
          ? " chunk " + std::to_string(instr.getChunkIndex())
          : std::string(),
      timeLabel(t.startUs, ms),
      timeLabel(t.endUs, ms));
  if (!label.empty() && ow >= 7.0 * label.size() + 4)
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"11\" "
                        "fill=\"white\" text-anchor=\"middle\">{2}</text>\n",
                        ox + ow / 2, y + kRow / 2 + 4, label);
}

/// One stage's row: its label, background, bubbles (with fill) and instructions.
void writeStage(const Canvas &c, PipelineOp pipeline, StageOp stage, llvm::raw_ostream &os) {
  double y = kTop + stage.getIndex() * (kRow + kGap);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\" "
                      "text-anchor=\"end\">stage {2}</text>\n",
                      kLeft - 8, y + kRow / 2 + 4, stage.getIndex());
  os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                      "fill=\"#FAFAFA\" stroke=\"#EEE\"/>\n",
                      kLeft, y, c.plotW, kRow);
  SteadyState steady(stage);
  for (Operation &op : stage.getBody().front()) {
    if (auto bubble = dyn_cast<BubbleOp>(op))
      writeBubble(c, bubble, steady, y, os);
    else if (auto instr = dyn_cast<InstructionOpInterface>(op))
      writeInstruction(c, pipeline, instr, y, os);
  }
}

/// The time axis with "nice" ticks.
void writeAxis(const Canvas &c, llvm::raw_ostream &os) {
  const double iteration = c.iteration, plotW = c.plotW, axisY = c.axisY;
  const bool ms = c.ms;
  auto x = [&](double us) { return c.x(us); };
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                      "stroke=\"#333\"/>\n",
                      kLeft, axisY, kLeft + plotW);
  double step = niceStep(iteration, 10);
  for (double t = 0; t <= iteration + 1e-9; t += step) {
    os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                        "stroke=\"#333\"/>\n",
                        x(t), axisY, axisY + 5);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"11\" "
                        "text-anchor=\"middle\">{2}</text>\n",
                        x(t), axisY + 18, timeLabel(t, ms));
  }
}

/// The legend: instruction kinds, the bubble outline and one entry per fill job.
void writeLegend(const Canvas &c, llvm::raw_ostream &os) {
  const double legendY = c.legendY;
  const int perRow = c.perRow;
  struct Item {
    std::string label;
    std::string color;
    bool dashed;
  };
  std::vector<Item> items = {{"forward", "#4C78A8", false},
                             {"backward", "#54A24B", false},
                             {"weight grad", "#B279A2", false},
                             {"all-reduce", "#72B7B2", false},
                             {"optimizer", "#2F4B7C", false},
                             {"bubble", "none", true}};
  for (StringRef job : c.jobOrder)
    items.push_back({("fill: " + job).str(), c.jobColor.lookup(job), false});
  for (size_t i = 0; i < items.size(); ++i) {
    double lx = kLeft + (i % perRow) * 180;
    double ly = legendY + (i / perRow) * 22;
    os << llvm::formatv(
        "<rect x=\"{0}\" y=\"{1}\" width=\"14\" height=\"14\" fill=\"{2}\"{3}/>\n",
        lx, ly, items[i].color,
        items[i].dashed ? " stroke=\"#999\" stroke-dasharray=\"3,2\"" : "");
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\">{2}</text>\n",
                        lx + 20, ly + 12, escape(items[i].label));
  }
}

} // namespace

LogicalResult exportSvg(ModuleOp module, llvm::raw_ostream &os) {
  PipelineOp pipeline = findSimulatedPipeline(module);
  if (!pipeline)
    return failure();
  Canvas c;
  c.iteration = pipeline.getIterationUs()->convertToDouble();
  if (c.iteration <= 0)
    c.iteration = 1;
  int64_t numStages = pipeline.getNumStages();
  c.axisY = kTop + numStages * (kRow + kGap) + 4;

  // Fill jobs in module order get stable colours.
  for (FillJobOp job : module.getOps<FillJobOp>()) {
    c.jobColor[job.getSymName()] = kFillPalette[c.jobOrder.size() % std::size(kFillPalette)];
    c.jobOrder.push_back(job.getSymName());
  }

  // Totals for the title.
  double idle = 0, bubbleUs = 0, filledUs = 0;
  for (StageOp stage : pipeline.getStages()) {
    idle += stage.getIdleUs() ? stage.getIdleUs()->convertToDouble() : 0;
    SteadyState steady(stage);
    for (BubbleOp b : stage.getBody().front().getOps<BubbleOp>()) {
      bubbleUs += b.getDurationUs();
      for (const FillChunk &f : b.getFills())
        filledUs += steady.weight(f) * f.predictedUs;
    }
  }
  c.ms = c.iteration >= 10000;
  c.legendY = c.axisY + 44;
  int legendItems = 6 + c.jobOrder.size();
  double height = c.legendY + ((legendItems + c.perRow - 1) / c.perRow) * 22 + 16;

  os << llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"Helvetica, Arial, sans-serif\">\n",
      kWidth, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"26\" font-size=\"18\" font-weight=\"bold\">{1}: {2}, "
      "{3} stages x {4} micro-batches{5}</text>\n",
      kLeft, escape(pipeline.getSymName()),
      stringifyScheduleKind(pipeline.getSchedule()), numStages,
      pipeline.getNumMicrobatches(),
      pipeline.getVirtualStages() > 1
          ? " x " + std::to_string(pipeline.getVirtualStages()) + " chunks"
          : std::string());
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"48\" font-size=\"13\" fill=\"#444\">iteration {1}, "
      "bubble fraction {2}%, bubble time planned with fill work {3}%</text>\n",
      kLeft, timeLabel(c.iteration, c.ms),
      fmtNum(std::round(1000 * idle / (numStages * c.iteration)) / 10),
      fmtNum(bubbleUs > 0 ? std::round(1000 * filledUs / bubbleUs) / 10 : 0));
  for (StageOp stage : pipeline.getStages())
    writeStage(c, pipeline, stage, os);
  writeAxis(c, os);
  writeLegend(c, os);
  os << "</svg>\n";
  return success();
}

} // namespace pipefill
