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
#include <cstdio>
#include <map>

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

/// Reads one trace file; emits a located error and returns false on failure.
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
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    std::string message;
    unsigned line = 1, col = 1, offset = 0;
    llvm::handleAllErrors(parsed.takeError(), [&](const llvm::ErrorInfoBase &e) {
      message = e.message();
    });
    // ParseError prints "[line:col, byte=offset]: message".
    char rest[512] = {0};
    if (std::sscanf(message.c_str(), "[%u:%u, byte=%u]: %511[^\n]", &line, &col,
                    &offset, rest) == 4)
      message = rest;
    emitError(fileLoc(line, col)) << "malformed JSON in the torch trace: "
                                  << message;
    return false;
  }
  const llvm::json::Array *events = parsed->getAsArray();
  if (const llvm::json::Object *top = parsed->getAsObject()) {
    events = top->getArray("traceEvents");
    if (const llvm::json::Object *info = top->getObject("distributedInfo"))
      if (const llvm::json::Value *value = info->get("rank")) {
        // Present but not a rank (-1, 0.5, "1", 1e30) is an error, not "no rank".
        std::optional<int64_t> rank = value->getAsInteger();
        if (!rank || *rank < 0 || *rank > (1 << 20)) {
          std::string text;
          llvm::raw_string_ostream(text) << *value;
          emitError(fileLoc(1)) << "the torch trace's distributedInfo.rank is " << text
                                << "; expected a rank, an integer from 0";
          return false;
        }
        out.rank = int(*rank);
      }
  }
  if (!events) {
    emitError(fileLoc(1)) << "the torch trace has no 'traceEvents' array; "
                             "expected a Chrome trace written by "
                             "torch.profiler's export_chrome_trace";
    return false;
  }
  // Locate the action events in the text: they appear in array order, so
  // each is found after the previous one.
  size_t cursor = 0;
  LineCounter lines(text);
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    if (!e)
      continue;
    auto ph = e->getString("ph");
    if (!ph || *ph != "X")
      continue;
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
    if (isActionName(ev.name)) {
      std::string quoted = "\"" + ev.name + "\"";
      size_t at = text.find(quoted, cursor);
      if (at != StringRef::npos) {
        ev.line = lines.lineOf(at);
        cursor = at + quoted.size();
      }
      if (!hasTs || !hasDur) {
        emitError(fileLoc(ev.line))
            << "trace event '" << ev.name << "' has no numeric "
            << (!hasTs ? "'ts'" : "'dur'");
        return false;
      }
    } else if (!hasTs || !hasDur) {
      continue;
    }
    out.events.push_back(std::move(ev));
  }
  return true;
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
