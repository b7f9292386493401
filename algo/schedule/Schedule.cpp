//===- Schedule.cpp - Names, cost helpers, spec validation ----------------===//

#include "algo/schedule/Schedule.h"

#include <cctype>
#include <cmath>
#include <sstream>

namespace pipefill::sched {

double p2pTransferUs(const PipelineSpec &spec, int64_t bytes) {
  double us = spec.p2pLatencyUs;
  if (spec.p2pBandwidthGBps > 0 && bytes > 0)
    us += static_cast<double>(bytes) / (spec.p2pBandwidthGBps * 1e3);
  return us;
}

double allReduceUs(const PipelineSpec &spec) {
  int d = spec.dataParallel;
  if (d <= 1)
    return 0;
  double steps = 2.0 * (d - 1);
  double us = spec.dpLatencyUs * steps;
  if (spec.dpBandwidthGBps > 0 && spec.gradBytes > 0)
    us += steps / d * static_cast<double>(spec.gradBytes) /
          (spec.dpBandwidthGBps * 1e3);
  return us;
}

Instr transferInstr(InstrKind kind, Payload payload, int mb, int chunk,
                    int peer, int64_t bytes) {
  Instr in;
  in.kind = kind;
  in.payload = payload;
  in.microbatch = mb;
  in.chunk = chunk;
  in.peer = peer;
  in.bytes = bytes;
  return in;
}

void appendIterationTail(const PipelineSpec &spec, std::vector<Instr> &list) {
  if (!spec.tail)
    return;
  if (spec.dataParallel > 1) {
    Instr in;
    in.kind = InstrKind::AllReduceGrads;
    in.bytes = spec.gradBytes;
    in.durationUs = allReduceUs(spec);
    list.push_back(in);
  }
  if (spec.optimizerUs > 0) {
    Instr in;
    in.kind = InstrKind::OptimizerStep;
    in.durationUs = spec.optimizerUs;
    list.push_back(in);
  }
}

double bubbleFraction(const SimResult &result) {
  if (result.stages.empty() || !(result.iterationUs > 0))
    return 0;
  double idle = 0;
  for (const StageTimeline &s : result.stages)
    idle += s.idleUs;
  return idle / (static_cast<double>(result.stages.size()) *
                 result.iterationUs);
}

bool isCompute(InstrKind kind) {
  return kind != InstrKind::Send && kind != InstrKind::Recv;
}

bool isBackwardFamily(InstrKind kind) {
  return kind == InstrKind::Backward || kind == InstrKind::BackwardInput ||
         kind == InstrKind::BackwardWeight;
}

const char *toString(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved1F1B:
    return "interleaved_1f1b";
  case ScheduleKind::ZBH1:
    return "zb_h1";
  }
  return "unknown";
}

const char *toString(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
    return "backward";
  case InstrKind::BackwardInput:
    return "backward_input";
  case InstrKind::BackwardWeight:
    return "backward_weight";
  case InstrKind::Send:
    return "send";
  case InstrKind::Recv:
    return "recv";
  case InstrKind::AllReduceGrads:
    return "allreduce_grads";
  case InstrKind::OptimizerStep:
    return "optimizer_step";
  }
  return "unknown";
}

const char *toString(Payload payload) {
  return payload == Payload::Activation ? "activation" : "gradient";
}

const char *toString(BubbleKind kind) {
  switch (kind) {
  case BubbleKind::Warmup:
    return "warmup";
  case BubbleKind::Steady:
    return "steady";
  case BubbleKind::Cooldown:
    return "cooldown";
  case BubbleKind::Tail:
    return "tail";
  }
  return "unknown";
}

namespace {
/// Lower-case and map '-' to '_' so "ZB-H1", "zb_h1" and "ZB_H1" compare
/// equal.
std::string normalize(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text)
    out.push_back(c == '-' ? '_'
                           : static_cast<char>(std::tolower(
                                 static_cast<unsigned char>(c))));
  return out;
}
} // namespace

bool parseScheduleKind(const std::string &text, ScheduleKind &out) {
  std::string t = normalize(text);
  if (t == "gpipe")
    out = ScheduleKind::GPipe;
  else if (t == "1f1b" || t == "one_f_one_b" || t == "onefoneb")
    out = ScheduleKind::OneFOneB;
  else if (t == "interleaved_1f1b" || t == "interleaved" ||
           t == "interleaved1f1b")
    out = ScheduleKind::Interleaved1F1B;
  else if (t == "zb_h1" || t == "zbh1")
    out = ScheduleKind::ZBH1;
  else
    return false;
  return true;
}

bool parseInstrKind(const std::string &text, InstrKind &out) {
  std::string t = normalize(text);
  static const InstrKind all[] = {
      InstrKind::Forward,        InstrKind::Backward,
      InstrKind::BackwardInput,  InstrKind::BackwardWeight,
      InstrKind::Send,           InstrKind::Recv,
      InstrKind::AllReduceGrads, InstrKind::OptimizerStep};
  for (InstrKind k : all) {
    if (t == toString(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

bool parsePayload(const std::string &text, Payload &out) {
  std::string t = normalize(text);
  if (t == "activation")
    out = Payload::Activation;
  else if (t == "gradient")
    out = Payload::Gradient;
  else
    return false;
  return true;
}

bool parseBubbleKind(const std::string &text, BubbleKind &out) {
  std::string t = normalize(text);
  static const BubbleKind all[] = {BubbleKind::Warmup, BubbleKind::Steady,
                                   BubbleKind::Cooldown, BubbleKind::Tail};
  for (BubbleKind k : all) {
    if (t == toString(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

std::string describeInstr(const Instr &instr) {
  std::ostringstream os;
  os << toString(instr.kind);
  switch (instr.kind) {
  case InstrKind::Send:
  case InstrKind::Recv:
    os << ' ' << toString(instr.payload) << " mb " << instr.microbatch
       << " chunk " << instr.chunk
       << (instr.kind == InstrKind::Send ? " to stage " : " from stage ")
       << instr.peer;
    break;
  case InstrKind::AllReduceGrads:
  case InstrKind::OptimizerStep:
    break;
  default:
    os << " mb " << instr.microbatch << " chunk " << instr.chunk;
    break;
  }
  return os.str();
}

namespace {
bool finiteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

bool checkTime(double value, const std::string &what, std::string &error) {
  if (finiteNonNegative(value))
    return true;
  std::ostringstream os;
  os << what << " must be a finite non-negative number of microseconds (got "
     << value << ").";
  error = os.str();
  return false;
}

bool checkBytes(int64_t value, const std::string &what, std::string &error) {
  if (value >= 0)
    return true;
  std::ostringstream os;
  os << what << " must not be negative (got " << value << ").";
  error = os.str();
  return false;
}

// Keeps expansion and simulation far from integer overflow and from
// multi-gigabyte schedules: p * m * v compute slots per iteration.
constexpr int64_t kMaxComputeSlots = int64_t(1) << 24;
constexpr int kMaxStages = 1 << 16;
} // namespace

bool validateSpec(const PipelineSpec &spec, std::string &error) {
  std::ostringstream os;
  if (spec.stages < 1 || spec.stages > kMaxStages) {
    os << "the pipeline needs between 1 and " << kMaxStages
       << " stages (got " << spec.stages << ").";
    error = os.str();
    return false;
  }
  if (spec.microbatches < 1) {
    os << "the pipeline needs at least 1 microbatch (got "
       << spec.microbatches << ").";
    error = os.str();
    return false;
  }
  if (spec.virtualStages < 1) {
    os << "virtual stages must be at least 1 (got " << spec.virtualStages
       << ").";
    error = os.str();
    return false;
  }
  bool interleaved = spec.schedule == ScheduleKind::Interleaved1F1B;
  if (!interleaved && spec.virtualStages != 1) {
    os << "virtual stages > 1 (got " << spec.virtualStages
       << ") are only valid for the interleaved 1F1B schedule, not "
       << toString(spec.schedule) << ".";
    error = os.str();
    return false;
  }
  if (interleaved) {
    if (spec.virtualStages < 2) {
      os << "the interleaved 1F1B schedule needs at least 2 virtual stages "
            "per device (got "
         << spec.virtualStages << ").";
      error = os.str();
      return false;
    }
    if (spec.microbatches % spec.stages != 0) {
      os << "the interleaved 1F1B schedule needs the microbatch count ("
         << spec.microbatches << ") to be a multiple of the stage count ("
         << spec.stages << ").";
      error = os.str();
      return false;
    }
  }
  int64_t slots = int64_t(spec.stages) * spec.microbatches *
                  int64_t(spec.virtualStages);
  if (slots > kMaxComputeSlots) {
    os << "the schedule is too large: stages x microbatches x virtual stages "
          "= "
       << slots << " exceeds the limit of " << kMaxComputeSlots << ".";
    error = os.str();
    return false;
  }
  if (spec.costs.size() != static_cast<size_t>(spec.stages)) {
    os << "expected one cost entry per stage (" << spec.stages
       << ") but got " << spec.costs.size() << ".";
    error = os.str();
    return false;
  }
  for (int s = 0; s < spec.stages; ++s) {
    const StageCost &c = spec.costs[s];
    std::string at = "stage " + std::to_string(s) + " ";
    if (!checkTime(c.forwardUs, at + "forward time", error) ||
        !checkTime(c.backwardUs, at + "backward time", error) ||
        !checkTime(c.backwardWeightUs, at + "backward weight time", error) ||
        !checkBytes(c.activationBytes, at + "activation bytes", error) ||
        !checkBytes(c.stashBytes, at + "stash bytes", error) ||
        !checkBytes(c.staticBytes, at + "static bytes", error))
      return false;
    if (spec.schedule == ScheduleKind::ZBH1 &&
        c.backwardWeightUs > c.backwardUs) {
      os << "stage " << s << " backward weight time (" << c.backwardWeightUs
         << " us) exceeds its whole backward time (" << c.backwardUs
         << " us); under ZB-H1 the backward time includes the weight "
            "gradient.";
      error = os.str();
      return false;
    }
  }
  if (!checkTime(spec.p2pLatencyUs, "p2p latency", error))
    return false;
  if (!std::isfinite(spec.p2pBandwidthGBps) || spec.p2pBandwidthGBps < 0) {
    os << "p2p bandwidth must be a finite non-negative number of GB/s (got "
       << spec.p2pBandwidthGBps << ").";
    error = os.str();
    return false;
  }
  if (!(spec.weightGradStashFraction >= 0 &&
        spec.weightGradStashFraction <= 1)) {
    os << "the weight-gradient stash fraction must be within [0, 1] (got "
       << spec.weightGradStashFraction << ").";
    error = os.str();
    return false;
  }
  if (spec.tail) {
    if (spec.dataParallel < 1) {
      os << "the data-parallel degree must be at least 1 (got "
         << spec.dataParallel << ").";
      error = os.str();
      return false;
    }
    if (!checkBytes(spec.gradBytes, "gradient bytes", error) ||
        !checkTime(spec.dpLatencyUs, "data-parallel latency", error) ||
        !checkTime(spec.optimizerUs, "optimizer step time", error))
      return false;
    if (!std::isfinite(spec.dpBandwidthGBps) || spec.dpBandwidthGBps < 0) {
      os << "data-parallel bandwidth must be a finite non-negative number of "
            "GB/s (got "
         << spec.dpBandwidthGBps << ").";
      error = os.str();
      return false;
    }
  }
  return true;
}

} // namespace pipefill::sched
