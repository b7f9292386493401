//===- ImportTorchTrace.cpp - torch profiler traces -> MeasuredProfile ----===//
//
// `pipefill-translate --torch-trace-to-profile --torch-trace=R0.json,R1.json
// JOB.mlir > profile.pbtxt` reads the Chrome traces torch.profiler wrote for
// the ranks of a torch.distributed.pipelining job and writes the measured
// profile (text MeasuredProfile) that `--pipefill-compile=profile=FILE`
// applies. The module gives the pipeline: its devices, chunks and the torch
// stage of each chunk (`torch_stages` of an imported table, or chunk c of
// device d = stage c*p + d). algo/torch/TorchTrace.h says which events count.
//
//===----------------------------------------------------------------------===//
#include "algo/torch/TorchTrace.h"
#include "codegen/IRQueries.h"
#include "codegen/JsonStream.h"
#include "codegen/TorchPlacement.h"
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/ScheduleIR.h"
#include "proto/profile.pb.h"
#include "support/Files.h"
#include "support/JsonNesting.h"
#include "support/ProtoText.h"

#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/text_format.h>

#include <cerrno>
#include <map>
#include <optional>

using namespace mlir;

namespace pipefill {
namespace {

llvm::cl::list<std::string> &traceOption() {
  static llvm::cl::list<std::string> traces(
      "torch-trace",
      llvm::cl::desc("torch.profiler Chrome trace(s) for --torch-trace-to-profile "
                     "(comma-separated, one per rank or one merged)"),
      llvm::cl::value_desc("file"), llvm::cl::CommaSeparated);
  return traces;
}

/// 1-based lines of increasing byte offsets in `text`: counts only the newlines since the
/// previous offset (counting from the start for every event was quadratic in the trace's size:
/// 24 s for a 15 MB trace).
class LineCounter {
public:
  explicit LineCounter(StringRef text) : text_(text) {}
  int lineOf(size_t offset) {
    offset = std::min(offset, text_.size());
    if (offset < at_) { // not increasing: count from the start
      at_ = 0;
      line_ = 1;
    }
    line_ += (int)text_.substr(at_, offset - at_).count('\n');
    at_ = offset;
    return line_;
  }

private:
  StringRef text_;
  size_t at_ = 0;
  int line_ = 1;
};

bool isActionName(StringRef name) {
  return name.starts_with("PP:") || name.starts_with("Forward ") ||
         name.starts_with("Backward ");
}

/// The TraceEvent of one element of `traceEvents`, or nullopt for an event
/// that does not count (not an object, not complete, no times). An action
/// without a numeric ts/dur is returned with `missing` naming the key.
std::optional<torchsched::TraceEvent> traceEventOf(const llvm::json::Value &value,
                                                   const char *&missing) {
  missing = nullptr;
  const llvm::json::Object *e = value.getAsObject();
  if (!e)
    return std::nullopt;
  auto ph = e->getString("ph");
  if (!ph || *ph != "X")
    return std::nullopt;
  torchsched::TraceEvent ev;
  if (auto name = e->getString("name"))
    ev.name = name->str();
  if (auto cat = e->getString("cat"))
    ev.cat = cat->str();
  auto number = [&](StringRef key, double &to) {
    if (auto d = e->getNumber(key)) {
      to = *d;
      return true;
    }
    return false;
  };
  bool hasTs = number("ts", ev.ts), hasDur = number("dur", ev.dur);
  auto idOf = [&](StringRef key) -> std::string {
    const llvm::json::Value *id = e->get(key);
    if (!id)
      return "";
    if (auto s = id->getAsString())
      return s->str();
    if (auto i = id->getAsInteger())
      return std::to_string(*i);
    return "";
  };
  ev.thread = idOf("pid") + "/" + idOf("tid");
  if (!hasTs || !hasDur) {
    if (!isActionName(ev.name))
      return std::nullopt;
    missing = !hasTs ? "'ts'" : "'dur'";
  }
  return ev;
}

/// Collects a trace's events while streamJson reads it, one event at a time.
/// Problems other than malformed JSON are kept, not reported: the JSON is
/// checked to its end first, as when the file was parsed whole.
class TraceCollector : public pipefill::JsonStreamHandler {
public:
  TraceCollector(StringRef text, torchsched::TraceFile &out)
      : text_(text), lines_(text), out_(out) {}

  void arrayBegins(size_t keyOffset) override {
    eventsKeys_.push_back(keyOffset);
    eventsIsArray_ = true;
  }
  void member(StringRef key, llvm::json::Value &&value, size_t keyOffset) override {
    if (key == "traceEvents") {
      eventsKeys_.push_back(keyOffset);
      eventsIsArray_ = false;
    } else if (key == "distributedInfo") { // a repeated key: the last one counts
      rank_.reset();
      if (const llvm::json::Object *info = value.getAsObject())
        if (const llvm::json::Value *rank = info->get("rank"))
          rank_ = *rank;
    }
  }
  void element(llvm::json::Value &&value, size_t begin, size_t end) override {
    if (!missing_.empty())
      return; // refused at an earlier event
    const char *missing = nullptr;
    std::optional<torchsched::TraceEvent> ev = traceEventOf(value, missing);
    if (!ev)
      return;
    if (isActionName(ev->name)) {
      // The line of the action's name in its event's text (the event's first
      // line if the name is written with escapes).
      std::string quoted = "\"" + ev->name + "\"";
      size_t at = text_.take_front(end).find(quoted, std::max(cursor_, begin));
      ev->line = lines_.lineOf(at != StringRef::npos ? at : begin);
      if (at != StringRef::npos)
        cursor_ = at + quoted.size();
      if (missing) {
        missingLine_ = ev->line;
        missing_ = "trace event '" + ev->name + "' has no numeric " + missing;
        return;
      }
    }
    out_.events.push_back(std::move(*ev));
  }

  /// After the whole text was read: the first problem, as (line, message),
  /// in the order the whole-tree import found them; line 0 when none.
  std::pair<int, std::string> problem() {
    if (rank_) {
      // Present but not a rank (-1, 0.5, "1", 1e30) is an error, not "no rank".
      std::optional<int64_t> rank = rank_->getAsInteger();
      if (!rank || *rank < 0 || *rank > (1 << 20)) {
        std::string text;
        llvm::raw_string_ostream(text) << *rank_;
        return {1, "the torch trace's distributedInfo.rank is " + text +
                       "; expected a rank, an integer from 0"};
      }
      out_.rank = int(*rank);
    }
    if (eventsKeys_.size() > 1)
      return {lines_.lineOf(eventsKeys_[1]),
              "the torch trace has a second 'traceEvents' (the first at line " +
                  std::to_string(lines_.lineOf(eventsKeys_[0])) +
                  "); expected one event array per trace"};
    if (!eventsIsArray_)
      return {1, "the torch trace has no 'traceEvents' array; expected a Chrome trace written "
                 "by torch.profiler's export_chrome_trace"};
    if (!missing_.empty())
      return {missingLine_, missing_};
    return {0, ""};
  }

private:
  StringRef text_;
  LineCounter lines_;
  torchsched::TraceFile &out_;
  size_t cursor_ = 0; ///< past the previous action's name
  std::vector<size_t> eventsKeys_;
  bool eventsIsArray_ = false;
  std::optional<llvm::json::Value> rank_;
  std::string missing_;
  int missingLine_ = 0;
};

/// Reads one trace file; emits a located error and returns false on failure.
/// The events are streamed: the file's text and one event's llvm::json value
/// are alive at once, not the whole tree (about 60 times the file).
bool readTrace(MLIRContext *ctx, const std::string &path, Location overLimitAt,
               torchsched::TraceFile &out) {
  out.path = path;
  auto fileLoc = [&](int line, int col = 1) {
    return FileLineColLoc::get(ctx, path, std::max(line, 1), std::max(col, 1));
  };
  std::string data;
  const pipefill::ReadStatus read = pipefill::readBoundedFile(path, pipefill::kMaxInputBytes, data);
  if (!read) {
    // At the file itself (it has no line to show), as its other errors are: not "<unknown>:0".
    // An input over the limit at the pipeline: a diagnostic at the file would read it whole to
    // show its first line.
    emitError(read.error == EFBIG ? overLimitAt : Location(fileLoc(1)))
        << "cannot read the torch trace '" << path << "': " << read.message;
    return false;
  }
  StringRef text = data;
  // llvm::json::parse recurses per level, without a limit: refuse deep nesting first.
  if (auto deep = pipefill::findTooDeepJson(std::string_view(text.data(), text.size()))) {
    emitError(fileLoc(int(deep->line), int(deep->column)))
        << "malformed JSON in the torch trace: " << deep->message()
        << " (a torch.profiler trace nests 3)";
    return false;
  }
  TraceCollector collector(text, out);
  pipefill::JsonStreamError malformed;
  if (!pipefill::streamJson(text, "traceEvents", collector, malformed)) {
    emitError(fileLoc(int(malformed.line), int(malformed.column)))
        << "malformed JSON in the torch trace: " << malformed.message;
    return false;
  }
  auto [line, problem] = collector.problem();
  if (line == 0)
    return true;
  emitError(fileLoc(line)) << problem;
  return false;
}

rt::ComputeOp::Kind protoKind(sched::InstrKind k) {
  switch (k) {
  case sched::InstrKind::Forward: return rt::ComputeOp::FORWARD;
  case sched::InstrKind::Backward: return rt::ComputeOp::BACKWARD;
  case sched::InstrKind::BackwardInput: return rt::ComputeOp::BACKWARD_INPUT;
  default: return rt::ComputeOp::BACKWARD_WEIGHT;
  }
}

} // namespace

LogicalResult exportTorchTraceProfile(ModuleOp module, llvm::raw_ostream &os,
                                      ArrayRef<std::string> traces) {
  PipelineOp pipeline = findPipeline(module);
  if (!pipeline)
    return failure();
  if (traces.empty())
    return pipeline.emitError()
           << "--torch-trace-to-profile needs --torch-trace=FILE[,FILE...]";
  for (size_t i = 0; i < traces.size(); ++i)
    if (traces[i].empty())
      return pipeline.emitError() << "--torch-trace lists an empty file name (entry " << i + 1
                                  << " of " << traces.size() << "); expected FILE[,FILE...]";
  MLIRContext *ctx = module.getContext();
  int64_t p = pipeline.getNumStages(), v = pipeline.getVirtualStages();
  torchsched::StagePlacement placement;
  if (failed(readTorchPlacement(pipeline, placement)))
    return failure();

  std::vector<torchsched::TraceFile> files(traces.size());
  for (size_t i = 0; i < traces.size(); ++i)
    if (!readTrace(ctx, traces[i], pipeline.getLoc(), files[i]))
      return failure();
  torchsched::TraceProfile measured;
  torchsched::TraceDiag diag;
  if (!torchsched::profileFromTraces(files, placement, measured, diag)) {
    emitError(FileLineColLoc::get(ctx, diag.path, std::max(diag.line, 1), 1))
        << diag.message;
    return failure();
  }

  // Every compute instruction of an expanded pipeline needs a measurement.
  std::map<std::tuple<int, int, int, int>, const torchsched::MeasuredOp *> byKey;
  for (const torchsched::MeasuredOp &m : measured.ops)
    byKey[{m.device, int(m.kind), m.microbatch, m.chunk}] = &m;
  std::string fileList;
  for (size_t i = 0; i < traces.size(); ++i)
    fileList += (i ? ", " : "") + traces[i];
  for (StageOp stage : pipeline.getStages()) {
    if (stage.getBody().empty())
      continue;
    auto mapping = stage->getAttrOfType<DenseI64ArrayAttr>("torch_stages");
    for (Operation &op : stage.getBody().front()) {
      auto instr = dyn_cast<InstructionOpInterface>(op);
      const bool compute = instr && isComputeKind(toSchedKind(instr.getInstrKind()));
      const sched::InstrKind kind = compute ? toSchedKind(instr.getInstrKind())
                                            : sched::InstrKind::Forward;
      const int64_t mb = compute ? instr.getMicrobatchIndex() : 0;
      const int64_t chunk = compute ? instr.getChunkIndex() : 0;
      if (!compute)
        continue;
      if (byKey.count({(int)stage.getIndex(), int(kind), (int)mb, (int)chunk}))
        continue;
      int64_t s = mapping && (int64_t)mapping.size() == v
                      ? mapping[chunk]
                      : chunk * p + (int64_t)stage.getIndex();
      const char *letter = kind == sched::InstrKind::Forward          ? "F"
                           : kind == sched::InstrKind::Backward       ? "B"
                           : kind == sched::InstrKind::BackwardInput  ? "I"
                                                                      : "W";
      return op.emitOpError() << "has no measurement in the torch trace(s) "
                              << fileList << ": no PP:" << s << letter << mb
                              << " event";
    }
  }

  rt::MeasuredProfile profile;
  profile.set_program(pipeline.getSymName().str());
  profile.set_backend("torch-trace");
  profile.set_iterations(measured.iterations);
  profile.set_iteration_us(measured.iterationUs);
  if (auto planned = pipeline.getIterationUs())
    profile.set_planned_iteration_us(planned->convertToDouble());
  profile.set_replay_device(-1);
  for (int64_t d = 0; d < p; ++d) {
    rt::MeasuredStage *st = profile.add_stages();
    st->set_device(d);
    st->set_stage(d);
    st->set_measured(true);
    st->set_memory_bytes(pipeline.getDeviceMemoryBytes());
    st->set_iteration_us(measured.deviceIterationUs[d]);
    double sum[4] = {0, 0, 0, 0};
    int count[4] = {0, 0, 0, 0};
    uint32_t index = 0;
    for (const torchsched::MeasuredOp &m : measured.ops) {
      if (m.device != d)
        continue;
      rt::MeasuredInstruction *in = st->add_instructions();
      in->set_op_index(index++);
      in->set_kind(protoKind(m.kind));
      in->set_microbatch(m.microbatch);
      in->set_chunk(m.chunk);
      in->set_measured_us(m.meanUs);
      in->set_measured(true); // read from the profiler's clock
      in->set_start_us(m.meanStartUs);
      int k = int(protoKind(m.kind)) - 1;
      sum[k] += m.meanUs;
      ++count[k];
    }
    auto mean = [&](int k) { return count[k] ? sum[k] / count[k] : 0.0; };
    st->set_forward_us(mean(0));
    st->set_backward_us(mean(1));
    st->set_backward_input_us(mean(2));
    st->set_backward_weight_us(mean(3));
    uint32_t id = 0;
    for (const torchsched::MeasuredGap &g : measured.gaps) {
      if (g.device != d)
        continue;
      rt::MeasuredBubble *b = st->add_bubbles();
      b->set_bubble_id(id++);
      b->set_kind(g.kind == sched::BubbleKind::Warmup     ? rt::BubbleOp::WARMUP
                  : g.kind == sched::BubbleKind::Cooldown ? rt::BubbleOp::COOLDOWN
                                                          : rt::BubbleOp::STEADY);
      b->set_measured_us(g.durationUs);
      b->set_measured(true);
      b->set_start_us(g.startUs);
    }
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(profile, &text);
  os << "# Measured profile from torch.profiler trace(s): " << fileList << "\n"
     << "# Times are measured (operator spans on each rank's thread), in us.\n"
     << text;
  return success();
}

void registerTorchTraceImport() {
  traceOption();
  registerFromMLIR("torch-trace-to-profile",
                   "measure a pipeline's instructions from torch profiler traces "
                   "(--torch-trace) and write a text MeasuredProfile",
                   [](ModuleOp module, llvm::raw_ostream &os) {
                     std::vector<std::string> traces(traceOption().begin(), traceOption().end());
                     return exportTorchTraceProfile(module, os, traces);
                   });
}

} // namespace pipefill
