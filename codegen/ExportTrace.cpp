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

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/JSON.h"

#include <vector>

using namespace mlir;

namespace pipefill {

static std::string instrName(InstructionOpInterface instr) {
  auto numbered = [&](const char *prefix) {
    int64_t chunk = instr.getChunkIndex();
    return prefix + std::to_string(instr.getMicrobatchIndex()) +
           (chunk ? "." + std::to_string(chunk) : "");
  };
  switch (instr.getInstrKind()) {
  case InstrKind::Forward: return numbered("F");
  case InstrKind::Backward:
  case InstrKind::BackwardInput: return numbered("B");
  case InstrKind::BackwardWeight: return numbered("W");
  case InstrKind::AllReduceGrads: return "allreduce";
  case InstrKind::OptimizerStep: return "optimizer";
  case InstrKind::Send:
  case InstrKind::Recv: break;
  }
  return instr->getName().stripDialect().str();
}

/// A bubble's slice and, nested in it, the fill chunks of the first
/// steady-state iteration.
static void writeBubble(llvm::json::OStream &j, BubbleOp bubble,
                        const SteadyState &steady, int64_t tid) {
  double bubbleStart = bubble.getStartUs();
  j.object([&] {
    j.attributeObject("args", [&] {
      j.attribute("free_bytes", (int64_t)bubble.getFreeBytes());
    });
    j.attribute("cat", "bubble");
    j.attribute("dur", bubble.getDurationUs());
    j.attribute("name", ("bubble (" + stringifyBubbleKind(bubble.getKind()) + ")").str());
    j.attribute("ph", "X");
    j.attribute("pid", 0);
    j.attribute("tid", tid);
    j.attribute("ts", bubbleStart);
  });
  for (const FillChunk &fill : bubble.getFills()) {
    if (!steady.inFirstSteadyIteration(fill))
      continue;
    double t = bubbleStart + fill.offsetUs;
    double d = fill.predictedUs * fill.repeat;
    j.object([&] {
      j.attributeObject("args", [&] {
        j.attribute("batch", (int64_t)fill.batch);
        j.attribute("layers", std::to_string(fill.layerBegin) + "-" +
                                  std::to_string(fill.layerEnd));
        j.attribute("peak_bytes", (int64_t)fill.peakBytes);
        j.attribute("repeat", (int64_t)fill.repeat);
      });
      j.attribute("cat", "fill");
      j.attribute("dur", d);
      j.attribute("name", fill.getJob());
      j.attribute("ph", "X");
      j.attribute("pid", 0);
      j.attribute("tid", tid);
      j.attribute("ts", t);
    });
  }
}

// The trace is streamed (llvm::json::OStream) rather than built as one JSON
// value: a 64 x 512 pipeline has ~10^6 events. Keys are written in sorted
// order, as llvm::json prints objects, so the output is the same text.
LogicalResult exportTrace(ModuleOp module, llvm::raw_ostream &os) {
  PipelineOp pipeline = findSimulatedPipeline(module);
  if (!pipeline)
    return failure();
  int64_t numStages = pipeline.getNumStages();
  int64_t numMb = pipeline.getNumMicrobatches();
  int64_t numChunks = pipeline.getVirtualStages();
  // Transfer key (from, to, payload, mb, chunk) packed into one integer (the
  // verifier has range-checked every index).
  auto pack = [&](int64_t from, int64_t to, int payload, int64_t mb, int64_t chunk) {
    return ((((uint64_t)from * numStages + to) * 2 + payload) * numChunks + chunk) *
               (uint64_t)numMb + mb;
  };
  // Sender's compute-op time and thread, filled while walking.
  llvm::DenseMap<uint64_t, std::pair<double, int64_t>> sendTimes;
  struct PendingFlow {
    uint64_t key;
    int payload;
    int64_t stage;
    double ts;
  };
  std::vector<PendingFlow> recvs; // resolved after the walk
  int64_t flowId = 0;

  llvm::json::OStream j(os);
  j.objectBegin();
  j.attribute("displayTimeUnit", "ms");
  j.attributeBegin("traceEvents");
  j.arrayBegin();
  auto meta = [&](std::optional<int64_t> tid, StringRef name, StringRef argKey,
                  llvm::json::Value argValue) {
    j.object([&] {
      j.attributeObject("args", [&] { j.attribute(argKey, std::move(argValue)); });
      j.attribute("name", name);
      j.attribute("ph", "M");
      j.attribute("pid", 0);
      if (tid)
        j.attribute("tid", *tid);
    });
  };
  meta(std::nullopt, "process_name", "name", ("pipeline " + pipeline.getSymName()).str());

  for (StageOp stage : pipeline.getStages()) {
    int64_t tid = stage.getIndex();
    meta(tid, "thread_name", "name", "stage " + std::to_string(tid));
    meta(tid, "thread_sort_index", "sort_index", tid);
    double lastComputeEnd = 0;
    SteadyState steady(stage);
    // Recvs whose consumer is the next compute op: (key, payload).
    std::vector<std::pair<uint64_t, int>> waiting;
    for (Operation &op : stage.getBody().front()) {
      if (auto bubble = dyn_cast<BubbleOp>(op)) {
        writeBubble(j, bubble, steady, tid);
        continue;
      }
      auto instr = dyn_cast<InstructionOpInterface>(op);
      if (!instr)
        continue;
      const InstrTiming &t = instr.getTiming();
      if (!t.hasStart() || !t.hasEnd())
        continue;
      InstrKind kind = instr.getInstrKind();
      if (kind == InstrKind::Send || kind == InstrKind::Recv) {
        int payload = (int)instr.getTransferPayload();
        int64_t peer = instr.getPeerStage();
        if (kind == InstrKind::Send) {
          // Bind the arrow's tail inside the compute op that produced the data.
          sendTimes[pack(tid, peer, payload, instr.getMicrobatchIndex(),
                         instr.getChunkIndex())] = {std::max(0.0, lastComputeEnd - 1e-3), tid};
        } else {
          waiting.push_back({pack(peer, tid, payload, instr.getMicrobatchIndex(),
                                  instr.getChunkIndex()),
                             payload});
        }
        continue;
      }
      double ts = t.startUs;
      double dur = t.endUs - ts;
      j.object([&] {
        j.attributeObject("args", [&] {
          if (t.hasLive())
            j.attribute("live_bytes", t.liveBytes);
        });
        j.attribute("cat", op.getName().stripDialect());
        j.attribute("dur", dur);
        j.attribute("name", instrName(instr));
        j.attribute("ph", "X");
        j.attribute("pid", 0);
        j.attribute("tid", tid);
        j.attribute("ts", ts);
      });
      for (auto [key, payload] : waiting)
        recvs.push_back({key, payload, tid, ts + 1e-3});
      waiting.clear();
      lastComputeEnd = t.endUs;
    }
  }

  for (const PendingFlow &pending : recvs) {
    auto it = sendTimes.find(pending.key);
    if (it == sendTimes.end())
      continue;
    const char *payload = pending.payload == (int)Payload::Activation ? "activation"
                                                                       : "gradient";
    j.object([&] {
      j.attribute("cat", "p2p");
      j.attribute("id", flowId);
      j.attribute("name", payload);
      j.attribute("ph", "s");
      j.attribute("pid", 0);
      j.attribute("tid", it->second.second);
      j.attribute("ts", it->second.first);
    });
    j.object([&] {
      j.attribute("bp", "e");
      j.attribute("cat", "p2p");
      j.attribute("id", flowId);
      j.attribute("name", payload);
      j.attribute("ph", "f");
      j.attribute("pid", 0);
      j.attribute("tid", pending.stage);
      j.attribute("ts", pending.ts);
    });
    ++flowId;
  }
  j.arrayEnd();
  j.attributeEnd();
  j.objectEnd();
  os << "\n";
  return success();
}

} // namespace pipefill
