//===- ExportTrace.cpp - compiled IR -> Chrome trace JSON -----------------===//
//
// One process per pipeline, one thread (track) per stage. Compute
// instructions and bubbles are complete ("X") events; fill chunks are nested
// inside their bubble's slice; each send/recv pair becomes a flow arrow from
// the sender's instruction to the instruction that consumed the data.
// Opens in chrome://tracing and Perfetto.
//
//===----------------------------------------------------------------------===//
#include "codegen/IRQueries.h"
#include "codegen/Translate.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <tuple>

using namespace mlir;

namespace pipefill {

static std::string instrName(Operation &op) {
  return llvm::TypeSwitch<Operation *, std::string>(&op)
      .Case<ForwardOp>([](ForwardOp f) {
        return "F" + std::to_string(f.getMicrobatch()) +
               (f.getChunk() ? "." + std::to_string(f.getChunk()) : "");
      })
      .Case<BackwardOp>([](BackwardOp b) {
        return "B" + std::to_string(b.getMicrobatch()) +
               (b.getChunk() ? "." + std::to_string(b.getChunk()) : "");
      })
      .Case<BackwardInputOp>([](BackwardInputOp b) {
        return "B" + std::to_string(b.getMicrobatch()) +
               (b.getChunk() ? "." + std::to_string(b.getChunk()) : "");
      })
      .Case<BackwardWeightOp>([](BackwardWeightOp w) {
        return "W" + std::to_string(w.getMicrobatch()) +
               (w.getChunk() ? "." + std::to_string(w.getChunk()) : "");
      })
      .Case<AllReduceGradsOp>([](auto) { return std::string("allreduce"); })
      .Case<OptimizerStepOp>([](auto) { return std::string("optimizer"); })
      .Default([](Operation *op) { return op->getName().stripDialect().str(); });
}

LogicalResult exportTrace(ModuleOp module, llvm::raw_ostream &os) {
  PipelineOp pipeline = findSimulatedPipeline(module);
  if (!pipeline)
    return failure();
  llvm::json::Array events;
  events.push_back(llvm::json::Object{
      {"ph", "M"}, {"pid", 0}, {"name", "process_name"},
      {"args", llvm::json::Object{{"name", ("pipeline " + pipeline.getSymName()).str()}}}});

  // Transfer key (from, to, payload, mb, chunk) -> sender's compute op time
  // and thread; filled while walking, consumed at the matching recv.
  using Key = std::tuple<int64_t, int64_t, int, int64_t, int64_t>;
  std::map<Key, std::pair<double, int64_t>> sendTimes;
  struct PendingFlow {
    Key key;
    int64_t stage;
  };
  std::vector<std::pair<PendingFlow, double>> recvs; // resolved after walk
  int64_t flowId = 0;

  for (StageOp stage : pipeline.getStages()) {
    int64_t tid = stage.getIndex();
    events.push_back(llvm::json::Object{
        {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"name", "thread_name"},
        {"args", llvm::json::Object{{"name", "stage " + std::to_string(tid)}}}});
    events.push_back(llvm::json::Object{
        {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"name", "thread_sort_index"},
        {"args", llvm::json::Object{{"sort_index", tid}}}});
    double lastComputeEnd = 0;
    SteadyState steady(stage);
    std::vector<Key> waiting; // recvs whose consumer is the next compute op
    for (Operation &op : stage.getBody().front()) {
      if (auto bubble = dyn_cast<BubbleOp>(op)) {
        events.push_back(llvm::json::Object{
            {"ph", "X"}, {"pid", 0}, {"tid", tid},
            {"name", ("bubble (" + stringifyBubbleKind(bubble.getKind()) + ")").str()},
            {"cat", "bubble"},
            {"ts", bubble.getStartUs().convertToDouble()},
            {"dur", bubble.getDurationUs().convertToDouble()},
            {"args", llvm::json::Object{{"free_bytes", (int64_t)bubble.getFreeBytes()}}}});
        for (FillOp fill : bubble.getBody().front().getOps<FillOp>()) {
          if (!steady.inFirstSteadyIteration(fill))
            continue;
          double t = bubble.getStartUs().convertToDouble() +
                     fill.getOffsetUs().convertToDouble();
          double d = fill.getPredictedUs().convertToDouble() * fill.getRepeat();
          events.push_back(llvm::json::Object{
              {"ph", "X"}, {"pid", 0}, {"tid", tid},
              {"name", fill.getJob().str()}, {"cat", "fill"}, {"ts", t}, {"dur", d},
              {"args", llvm::json::Object{
                           {"layers", std::to_string(fill.getLayerBegin()) + "-" +
                                          std::to_string(fill.getLayerEnd())},
                           {"batch", (int64_t)fill.getBatch()},
                           {"repeat", (int64_t)fill.getRepeat()},
                           {"peak_bytes", (int64_t)fill.getPeakBytes()}}}});
        }
        continue;
      }
      auto start = op.getAttrOfType<FloatAttr>("start_us");
      auto end = op.getAttrOfType<FloatAttr>("end_us");
      if (!start || !end)
        continue;
      if (auto send = dyn_cast<SendOp>(op)) {
        Key key{tid, (int64_t)send.getPeer(), (int)send.getPayload(),
                (int64_t)send.getMicrobatch(), (int64_t)send.getChunk()};
        // Bind the arrow's tail inside the compute op that produced the data.
        sendTimes[key] = {std::max(0.0, lastComputeEnd - 1e-3), tid};
        continue;
      }
      if (auto recv = dyn_cast<RecvOp>(op)) {
        waiting.push_back(Key{(int64_t)recv.getPeer(), tid, (int)recv.getPayload(),
                              (int64_t)recv.getMicrobatch(), (int64_t)recv.getChunk()});
        continue;
      }
      double ts = start.getValueAsDouble();
      double dur = end.getValueAsDouble() - ts;
      llvm::json::Object args;
      if (auto live = op.getAttrOfType<IntegerAttr>("live_bytes"))
        args["live_bytes"] = live.getInt();
      events.push_back(llvm::json::Object{
          {"ph", "X"}, {"pid", 0}, {"tid", tid}, {"name", instrName(op)},
          {"cat", op.getName().stripDialect().str()}, {"ts", ts}, {"dur", dur},
          {"args", std::move(args)}});
      for (const Key &key : waiting)
        recvs.push_back({PendingFlow{key, tid}, ts + 1e-3});
      waiting.clear();
      lastComputeEnd = end.getValueAsDouble();
    }
  }

  for (auto &[pending, ts] : recvs) {
    auto it = sendTimes.find(pending.key);
    if (it == sendTimes.end())
      continue;
    const char *payload = std::get<2>(pending.key) == (int)Payload::Activation
                              ? "activation" : "gradient";
    events.push_back(llvm::json::Object{
        {"ph", "s"}, {"pid", 0}, {"tid", it->second.second}, {"id", flowId},
        {"name", payload}, {"cat", "p2p"}, {"ts", it->second.first}});
    events.push_back(llvm::json::Object{
        {"ph", "f"}, {"bp", "e"}, {"pid", 0}, {"tid", pending.stage},
        {"id", flowId}, {"name", payload}, {"cat", "p2p"}, {"ts", ts}});
    ++flowId;
  }

  llvm::json::Object trace{{"traceEvents", std::move(events)},
                           {"displayTimeUnit", "ms"}};
  os << llvm::json::Value(std::move(trace)) << "\n";
  return success();
}

} // namespace pipefill
