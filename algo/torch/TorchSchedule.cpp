//===- TorchSchedule.cpp - torch pipelining action tables -----------------===//
#include "algo/torch/TorchSchedule.h"

#include "support/Limits.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace pipefill::torchsched {

const char *toString(ActKind kind) {
  switch (kind) {
  case ActKind::Forward: return "F";
  case ActKind::FullBackward: return "B";
  case ActKind::BackwardInput: return "I";
  case ActKind::BackwardWeight: return "W";
  case ActKind::SendF: return "SEND_F";
  case ActKind::RecvF: return "RECV_F";
  case ActKind::SendB: return "SEND_B";
  case ActKind::RecvB: return "RECV_B";
  case ActKind::WaitSendF: return "WAIT_SEND_F";
  case ActKind::WaitSendB: return "WAIT_SEND_B";
  case ActKind::Unshard: return "UNSHARD";
  case ActKind::Reshard: return "RESHARD";
  case ActKind::ReduceGrad: return "REDUCE_GRAD";
  case ActKind::WaitReduceGrad: return "WAIT_REDUCE_GRAD";
  case ActKind::OverlapFB: return "OVERLAP_F_B";
  }
  return "?";
}

bool isCompute(ActKind kind) {
  return kind == ActKind::Forward || kind == ActKind::FullBackward ||
         kind == ActKind::BackwardInput || kind == ActKind::BackwardWeight;
}

const char *toString(Placement placement) {
  switch (placement) {
  case Placement::Single: return "one stage per rank";
  case Placement::Interleaved: return "interleaved (stage s on rank s mod p)";
  case Placement::VShape: return "V-shape (rank r holds stages r and 2p-1-r)";
  case Placement::Custom: return "custom";
  }
  return "?";
}

namespace {

bool needsMicrobatch(ActKind kind) {
  switch (kind) {
  case ActKind::Unshard:
  case ActKind::Reshard:
  case ActKind::ReduceGrad:
  case ActKind::WaitReduceGrad:
  case ActKind::OverlapFB:
    return false;
  default:
    return true;
  }
}

bool isComm(ActKind kind) {
  return kind == ActKind::SendF || kind == ActKind::RecvF ||
         kind == ActKind::SendB || kind == ActKind::RecvB ||
         kind == ActKind::WaitSendF || kind == ActKind::WaitSendB;
}

std::string name(const Action &a) {
  std::string s;
  if (a.kind == ActKind::OverlapFB) {
    s = "(";
    for (size_t i = 0; i < a.sub.size(); ++i)
      s += (i ? ";" : "") + name(a.sub[i]);
    return s + ")OVERLAP_F_B";
  }
  s = std::to_string(a.stage) + toString(a.kind);
  if (a.microbatch >= 0)
    s += std::to_string(a.microbatch);
  return s;
}

std::string at(Loc loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

// torch's regex tries the alternatives in this order.
const std::pair<const char *, ActKind> kTypes[] = {
    {"WAIT_REDUCE_GRAD", ActKind::WaitReduceGrad},
    {"WAIT_SEND_F", ActKind::WaitSendF},
    {"WAIT_SEND_B", ActKind::WaitSendB},
    {"REDUCE_GRAD", ActKind::ReduceGrad},
    {"UNSHARD", ActKind::Unshard},
    {"RESHARD", ActKind::Reshard},
    {"SEND_F", ActKind::SendF},
    {"RECV_F", ActKind::RecvF},
    {"SEND_B", ActKind::SendB},
    {"RECV_B", ActKind::RecvB},
    {"F", ActKind::Forward},
    {"I", ActKind::BackwardInput},
    {"B", ActKind::FullBackward},
    {"W", ActKind::BackwardWeight},
};

constexpr int kMaxDigits = 7; // indices below 10^7
/// Torch stages of the largest pipeline: support/Limits.h's ranks x stages
/// per rank.
constexpr int64_t kMaxTorchStages = kMaxStages * kMaxVirtualStages;

/// The index written by `digits` (all decimal digits), or false when it has
/// more than kMaxDigits significant ones: leading zeros do not count, as for
/// torch's int() ("0F007" is micro-batch 7).
bool parseIndex(std::string_view digits, int *out) {
  while (digits.size() > 1 && digits.front() == '0')
    digits.remove_prefix(1);
  if (digits.size() > size_t(kMaxDigits))
    return false;
  *out = std::stoi(std::string(digits));
  return true;
}

/// An action's text for a message: at most 48 bytes of it (a 10 MB cell used
/// to make a 20 MB message).
std::string quoted(std::string_view text) {
  constexpr size_t kShown = 48;
  if (text.size() <= kShown)
    return std::string(text);
  return std::string(text.substr(0, kShown)) + "... (" + std::to_string(text.size()) +
         " bytes)";
}

/// Parses `<stage><TYPE>[<mb>]` filling `a`; `col` is the column of text[0].
bool parseSimple(std::string_view text, int line, int col, Action &a,
                 Diag &diag) {
  auto fail = [&](const std::string &msg) {
    diag = {{line, col}, msg};
    return false;
  };
  a = Action();
  a.loc = {line, col};
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    ++i;
  if (i == 0)
    return fail("action '" + quoted(text) +
                "' does not start with a stage index; expected "
                "<stage><type>[<micro-batch>], e.g. 2F0 or 1SEND_B3");
  if (!parseIndex(text.substr(0, i), &a.stage))
    return fail("stage index in '" + quoted(text) + "' is too large");
  // Checked here, before anything is sized by it: the layout check keeps a
  // record per stage up to the largest index (a 10-byte `9999999F0` took
  // 120 MB before it was refused for the stages it skips).
  if (a.stage >= kMaxTorchStages)
    return fail("stage " + std::to_string(a.stage) + " in '" + quoted(text) +
                "' is beyond the " + std::to_string(kMaxTorchStages) +
                " stages a pipeline holds (" + std::to_string(kMaxStages) + " ranks x " +
                std::to_string(kMaxVirtualStages) +
                " stages per rank: pipeline.stages x pipeline.virtual_stages)");
  std::string_view rest = text.substr(i);
  bool found = false;
  for (const auto &[spelling, kind] : kTypes) {
    std::string_view sp(spelling);
    if (rest.substr(0, sp.size()) == sp) {
      a.kind = kind;
      rest = rest.substr(sp.size());
      found = true;
      break;
    }
  }
  if (!found)
    return fail("action '" + quoted(text) +
                "' has an unknown type; expected one of F, I, B, W, SEND_F, "
                "RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, UNSHARD, "
                "RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD");
  size_t j = 0;
  while (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])))
    ++j;
  if (j > 0 && !parseIndex(rest.substr(0, j), &a.microbatch))
    return fail("micro-batch index in '" + quoted(text) + "' is too large");
  if (j != rest.size())
    return fail("action '" + std::string(text) + "' has trailing text '" +
                std::string(rest.substr(j)) + "'");
  if (needsMicrobatch(a.kind) && a.microbatch < 0)
    return fail("action '" + std::string(text) + "' (" + toString(a.kind) +
                ") needs a micro-batch index, e.g. " +
                std::to_string(a.stage) + toString(a.kind) + "0");
  return true;
}

bool parseCell(std::string_view text, int line, int col, Action &a,
               Diag &diag) {
  if (text.empty() || text[0] != '(')
    return parseSimple(text, line, col, a, diag);
  size_t close = text.find(')');
  if (close == std::string_view::npos) {
    diag = {{line, col}, "action '" + std::string(text) +
                             "' opens a sub-action group '(' without ')'"};
    return false;
  }
  std::string_view type = text.substr(close + 1);
  if (type != "OVERLAP_F_B") {
    diag = {{line, col + int(close) + 1},
            "a sub-action group must be followed by OVERLAP_F_B (got '" +
                std::string(type) + "')"};
    return false;
  }
  a = Action();
  a.kind = ActKind::OverlapFB;
  a.loc = {line, col};
  std::string_view inner = text.substr(1, close - 1);
  size_t pos = 0;
  while (pos <= inner.size()) {
    size_t semi = inner.find(';', pos);
    size_t end = semi == std::string_view::npos ? inner.size() : semi;
    std::string_view part = inner.substr(pos, end - pos);
    size_t lead = 0;
    while (lead < part.size() && std::isspace(static_cast<unsigned char>(part[lead])))
      ++lead;
    size_t trail = part.size();
    while (trail > lead && std::isspace(static_cast<unsigned char>(part[trail - 1])))
      --trail;
    part = part.substr(lead, trail - lead);
    int subCol = col + 1 + int(pos + lead);
    if (!part.empty()) {
      Action sub;
      if (!parseSimple(part, line, subCol, sub, diag))
        return false;
      if (!isCompute(sub.kind)) {
        diag = {{line, subCol}, "OVERLAP_F_B may group only compute actions "
                                "(F, B, I, W), not " +
                                    name(sub)};
        return false;
      }
      a.sub.push_back(sub);
    }
    if (semi == std::string_view::npos)
      break;
    pos = semi + 1;
  }
  if (a.sub.empty()) {
    diag = {{line, col}, "OVERLAP_F_B group '" + std::string(text) +
                             "' has no sub-actions"};
    return false;
  }
  return true;
}

} // namespace

bool parseAction(std::string_view text, int line, int col, Action &action,
                 Diag &diag) {
  return parseCell(text, line, col, action, diag);
}

bool parseTable(std::string_view text, Table &table, Diag &diag) {
  table = Table();
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view l = text.substr(pos, end - pos);
    if (!l.empty() && l.back() == '\r')
      l.remove_suffix(1);
    lines.push_back(l);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  while (!lines.empty() &&
         lines.back().find_first_not_of(" \t") == std::string_view::npos)
    lines.pop_back();
  if (lines.empty()) {
    diag = {{1, 1}, "the schedule table is empty; expected one row of "
                    "actions per pipeline rank"};
    return false;
  }
  for (size_t ln = 0; ln < lines.size(); ++ln) {
    std::string_view l = lines[ln];
    int line = int(ln) + 1;
    std::vector<Action> row;
    // A UTF-8 byte-order mark (editors on Windows write one) is skipped like
    // blank space, so columns stay those of the file.
    size_t i = ln == 0 && l.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    while (true) {
      // One cell starts at i.
      size_t start = i;
      std::string cell;
      int cellCol;
      while (i < l.size() && (l[i] == ' ' || l[i] == '\t'))
        ++i;
      if (i < l.size() && l[i] == '"') {
        cellCol = int(i) + 2;
        ++i;
        bool closed = false;
        while (i < l.size()) {
          if (l[i] == '"') {
            if (i + 1 < l.size() && l[i + 1] == '"') {
              cell += '"';
              i += 2;
              continue;
            }
            closed = true;
            ++i;
            break;
          }
          cell += l[i++];
        }
        if (!closed) {
          diag = {{line, int(start) + 1}, "unterminated quoted cell"};
          return false;
        }
        while (i < l.size() && (l[i] == ' ' || l[i] == '\t'))
          ++i;
        if (i < l.size() && l[i] != ',') {
          diag = {{line, int(i) + 1},
                  "unexpected text after a quoted cell; expected ','"};
          return false;
        }
      } else {
        cellCol = int(i) + 1;
        size_t comma = l.find(',', i);
        size_t end = comma == std::string_view::npos ? l.size() : comma;
        cell = std::string(l.substr(i, end - i));
        i = end;
      }
      while (!cell.empty() && std::isspace(static_cast<unsigned char>(cell.back())))
        cell.pop_back();
      size_t lead = 0;
      while (lead < cell.size() && std::isspace(static_cast<unsigned char>(cell[lead])))
        ++lead;
      cell.erase(0, lead);
      cellCol += int(lead);
      if (!cell.empty()) {
        Action a;
        if (!parseCell(cell, line, cellCol, a, diag))
          return false;
        if (isComm(a.kind))
          table.hasComms = true;
        row.push_back(std::move(a));
      }
      if (i >= l.size())
        break;
      ++i; // the comma
    }
    table.ranks.push_back(std::move(row));
    table.rowLine.push_back(line);
  }
  return true;
}

namespace {

/// Dense per-(stage, micro-batch) record of where something happened.
struct Slot {
  int rank = -1;
  int pos = -1; ///< index of the step on its rank
  Loc loc;
};

class Checker {
public:
  Checker(const Table &table, Imported &out, Diag &diag)
      : table(table), out(out), diag(diag) {}
  bool runShape();
  bool runOrder();

private:
  bool fail(Loc loc, const std::string &msg) {
    diag = {loc, msg};
    return false;
  }
  Loc rowLoc(int rank) const { return {table.rowLine[rank], 0}; }
  size_t key(int stage, int mb) const { return size_t(stage) * m + mb; }
  bool layout();
  bool sizes();
  bool pairing();
  bool comms();
  bool simulate();
  std::vector<std::vector<int>> rankNeighbours() const;
  std::string alsoBlocked(const std::vector<size_t> &pc, int r) const;

  const Table &table;
  Imported &out;
  Diag &diag;
  int p = 0, S = 0, m = 0;
  Loc lastMicrobatch; // a cell of micro-batch m - 1
  // Compute records.
  std::vector<Slot> fwd, bwd, inp, wgt; // bwd: B; inp: I; wgt: W
  // Comm records (on the rank that posts them).
  std::vector<Slot> sendF, recvF, sendB, recvB;
};

bool Checker::layout() {
  p = int(table.ranks.size());
  S = 0;
  m = 0;
  std::vector<Loc> firstSeen;
  std::vector<int> owner;
  auto own = [&](const Action &a, int r) {
    if (a.microbatch + 1 > m) {
      m = a.microbatch + 1;
      lastMicrobatch = a.loc;
    }
    if (a.stage >= int(owner.size())) {
      owner.resize(size_t(a.stage) + 1, -1);
      firstSeen.resize(size_t(a.stage) + 1);
    }
    if (owner[a.stage] < 0) {
      owner[a.stage] = r;
      firstSeen[a.stage] = a.loc;
      return true;
    }
    if (owner[a.stage] != r)
      return fail(a.loc, "stage " + std::to_string(a.stage) + " runs on rank " +
                             std::to_string(owner[a.stage]) + " (" +
                             at(firstSeen[a.stage]) + ") and on rank " +
                             std::to_string(r) +
                             "; a stage must live on exactly one rank");
    return true;
  };
  // Compute actions define where stages live.
  for (int r = 0; r < p; ++r) {
    if (table.ranks[r].empty())
      return fail(rowLoc(r), "rank " + std::to_string(r) +
                                 " (row " + std::to_string(r + 1) +
                                 ") has no actions");
    for (const Action &a : table.ranks[r]) {
      if (a.kind == ActKind::OverlapFB) {
        for (const Action &s : a.sub)
          if (!own(s, r))
            return false;
      } else if (isCompute(a.kind)) {
        if (!own(a, r))
          return false;
      }
    }
  }
  S = int(owner.size());
  if (S == 0)
    return fail({table.rowLine[0], 1},
                "the table has no compute actions (F, B, I, W)");
  for (int s = 0; s < S; ++s)
    if (owner[s] < 0) {
      // Point at the first action of the next stage that does exist.
      int t = s + 1;
      while (owner[t] < 0)
        ++t;
      return fail(firstSeen[t], "stage " + std::to_string(s) +
                                    " never runs, but stage " +
                                    std::to_string(t) +
                                    " does; stages must be numbered 0.." +
                                    std::to_string(S - 1) + " densely");
    }
  // Every other action must name a stage of its own rank.
  for (int r = 0; r < p; ++r)
    for (const Action &a : table.ranks[r]) {
      if (a.kind == ActKind::OverlapFB || isCompute(a.kind))
        continue;
      if (a.stage >= S)
        return fail(a.loc, name(a) + " names stage " + std::to_string(a.stage) +
                               ", but the table's compute actions use stages "
                               "0.." + std::to_string(S - 1));
      if (owner[a.stage] != r)
        return fail(a.loc, name(a) + " on rank " + std::to_string(r) +
                               " names stage " + std::to_string(a.stage) +
                               ", which runs on rank " +
                               std::to_string(owner[a.stage]));
    }
  out.ranks = p;
  out.stages = S;
  out.microbatches = m;
  out.rankOfStage = owner;
  out.stagesOfRank.assign(p, {});
  for (int s = 0; s < S; ++s)
    out.stagesOfRank[owner[s]].push_back(s);
  int v = int(out.stagesOfRank[0].size());
  for (int r = 0; r < p; ++r)
    if (int(out.stagesOfRank[r].size()) != v)
      return fail(rowLoc(r), "rank " + std::to_string(r) + " runs " +
                                 std::to_string(out.stagesOfRank[r].size()) +
                                 " stage(s) but rank 0 runs " +
                                 std::to_string(v) +
                                 "; every rank must hold the same number of "
                                 "stages");
  out.chunksPerRank = v;
  out.chunkOfStage.assign(S, 0);
  for (int r = 0; r < p; ++r)
    for (int c = 0; c < v; ++c)
      out.chunkOfStage[out.stagesOfRank[r][c]] = c;
  bool single = v == 1, inter = true, vshape = v == 2;
  for (int s = 0; s < S; ++s) {
    single &= owner[s] == s;
    inter &= owner[s] == s % p;
    vshape &= owner[s] == (s < p ? s : 2 * p - 1 - s);
  }
  out.placement = single   ? Placement::Single
                  : inter  ? Placement::Interleaved
                  : vshape ? Placement::VShape
                           : Placement::Custom;
  return true;
}

/// The pipeline limits of support/Limits.h, before pairing() sizes its
/// records by stages x micro-batches.
bool Checker::sizes() {
  if (out.chunksPerRank > kMaxVirtualStages)
    return fail(rowLoc(0), "every rank runs " + std::to_string(out.chunksPerRank) +
                               " stages; a rank holds at most " +
                               std::to_string(kMaxVirtualStages) +
                               " (pipeline.virtual_stages)");
  if (m > kMaxMicrobatches)
    return fail(lastMicrobatch, "micro-batch " + std::to_string(m - 1) +
                                    " is beyond the " + std::to_string(kMaxMicrobatches) +
                                    " micro-batches a pipeline runs (pipeline.microbatches)");
  if (int64_t(S) * m > kMaxPipelineChunks)
    return fail(rowLoc(0), "the table's " + std::to_string(S) + " stages x " +
                               std::to_string(m) + " micro-batches exceed the " +
                               std::to_string(kMaxPipelineChunks) +
                               " micro-batch chunks a pipeline may expand to");
  return true;
}

bool Checker::pairing() {
  size_t n = size_t(S) * m;
  fwd.assign(n, {});
  bwd.assign(n, {});
  inp.assign(n, {});
  wgt.assign(n, {});
  out.order.assign(p, {});
  auto what = [](int s, int mb) {
    return "stage " + std::to_string(s) + " micro-batch " + std::to_string(mb);
  };
  for (int r = 0; r < p; ++r) {
    int pos = 0;
    int group = 0;
    for (const Action &top : table.ranks[r]) {
      std::vector<const Action *> computes;
      int g = -1;
      if (top.kind == ActKind::OverlapFB) {
        g = group++;
        for (const Action &s : top.sub)
          computes.push_back(&s);
      } else if (isCompute(top.kind)) {
        computes.push_back(&top);
      }
      for (const Action *a : computes) {
        size_t k = key(a->stage, a->microbatch);
        Slot here{r, pos, a->loc};
        ComputeOp op;
        op.stage = a->stage;
        op.chunk = out.chunkOfStage[a->stage];
        op.microbatch = a->microbatch;
        op.overlapGroup = g;
        op.loc = a->loc;
        switch (a->kind) {
        case ActKind::Forward:
          if (fwd[k].rank >= 0)
            return fail(a->loc, name(*a) + " repeats the forward of " +
                                    what(a->stage, a->microbatch) +
                                    " (first at " + at(fwd[k].loc) + ")");
          fwd[k] = here;
          op.kind = sched::InstrKind::Forward;
          break;
        case ActKind::FullBackward:
        case ActKind::BackwardInput: {
          bool full = a->kind == ActKind::FullBackward;
          if (fwd[k].rank < 0)
            return fail(a->loc, name(*a) + " runs the " +
                                    (full ? "backward" : "input gradient") +
                                    " of " + what(a->stage, a->microbatch) +
                                    " before its forward (F)");
          const Slot &prior = bwd[k].rank >= 0 ? bwd[k] : inp[k];
          if (prior.rank >= 0)
            return fail(a->loc, name(*a) + " repeats the backward of " +
                                    what(a->stage, a->microbatch) +
                                    " (first at " + at(prior.loc) +
                                    "); each micro-batch needs one B, or one "
                                    "I and one W");
          (full ? bwd[k] : inp[k]) = here;
          op.kind = full ? sched::InstrKind::Backward
                         : sched::InstrKind::BackwardInput;
          if (!full)
            out.splitBackward = true;
          break;
        }
        case ActKind::BackwardWeight:
          if (wgt[k].rank >= 0)
            return fail(a->loc, name(*a) + " repeats the weight gradient of " +
                                    what(a->stage, a->microbatch) +
                                    " (first at " + at(wgt[k].loc) + ")");
          if (inp[k].rank < 0)
            return fail(a->loc,
                        name(*a) + " runs the weight gradient of " +
                            what(a->stage, a->microbatch) +
                            (bwd[k].rank >= 0
                                 ? ", which already ran a full backward (B) "
                                   "at " + at(bwd[k].loc)
                                 : " before its input gradient (I)"));
          wgt[k] = here;
          op.kind = sched::InstrKind::BackwardWeight;
          break;
        default:
          break;
        }
        out.order[r].push_back(op);
      }
      ++pos;
    }
  }
  for (int s = 0; s < S; ++s)
    for (int mb = 0; mb < m; ++mb) {
      size_t k = key(s, mb);
      Loc row = rowLoc(out.rankOfStage[s]);
      std::string onRank = " on rank " + std::to_string(out.rankOfStage[s]);
      if (fwd[k].rank < 0)
        return fail(row, what(s, mb) + " has no forward (" +
                             std::to_string(s) + "F" + std::to_string(mb) +
                             ")" + onRank + "; micro-batches 0.." +
                             std::to_string(m - 1) + " appear in the table");
      if (bwd[k].rank < 0 && inp[k].rank < 0)
        return fail(row, what(s, mb) + " has no backward (" +
                             std::to_string(s) + "B" + std::to_string(mb) +
                             ", or " + std::to_string(s) + "I" +
                             std::to_string(mb) + " and " + std::to_string(s) +
                             "W" + std::to_string(mb) + ")" + onRank);
      if (inp[k].rank >= 0 && wgt[k].rank < 0)
        return fail(inp[k].loc, what(s, mb) + " has an input gradient (" +
                                    std::to_string(s) + "I" +
                                    std::to_string(mb) +
                                    ") but no weight gradient (" +
                                    std::to_string(s) + "W" +
                                    std::to_string(mb) + ")");
    }
  return true;
}

bool Checker::comms() {
  size_t n = size_t(S) * m;
  sendF.assign(n, {});
  recvF.assign(n, {});
  sendB.assign(n, {});
  recvB.assign(n, {});
  auto cross = [&](int a, int b) {
    return b >= 0 && b < S && out.rankOfStage[a] != out.rankOfStage[b];
  };
  for (int r = 0; r < p; ++r) {
    int pos = 0;
    for (const Action &a : table.ranks[r]) {
      std::vector<Slot> *table_ = nullptr;
      int peer = -1;
      switch (a.kind) {
      case ActKind::SendF: table_ = &sendF; peer = a.stage + 1; break;
      case ActKind::RecvF: table_ = &recvF; peer = a.stage - 1; break;
      case ActKind::SendB: table_ = &sendB; peer = a.stage - 1; break;
      case ActKind::RecvB: table_ = &recvB; peer = a.stage + 1; break;
      default: break;
      }
      if (table_) {
        if (a.microbatch >= m)
          return fail(a.loc, name(a) + " names micro-batch " +
                                 std::to_string(a.microbatch) +
                                 ", but the compute actions use 0.." +
                                 std::to_string(m - 1));
        if (!cross(a.stage, peer))
          return fail(a.loc, name(a) + " has no peer: stage " +
                                 std::to_string(peer) +
                                 (peer < 0 || peer >= S
                                      ? " does not exist"
                                      : " is on the same rank"));
        Slot &slot = (*table_)[key(a.stage, a.microbatch)];
        if (slot.rank >= 0)
          return fail(a.loc, name(a) + " repeats the transfer at " +
                                 at(slot.loc));
        slot = {r, pos, a.loc};
      }
      ++pos;
    }
  }
  // Each cross-rank dependency needs its SEND after the producer and its
  // RECV before the consumer.
  auto need = [&](const Slot &have, const Slot &compute, bool after,
                  const std::string &action, const std::string &role) {
    if (have.rank < 0)
      return fail(compute.loc, role + " needs " + action + (after ? " after" : " before") +
                                   " it on rank " + std::to_string(compute.rank) +
                                   ", and the table has none");
    if (after ? have.pos <= compute.pos : have.pos >= compute.pos)
      return fail(have.loc, action + " must come " +
                                (after ? "after" : "before") + " " + role +
                                " (at " + at(compute.loc) + ")");
    return true;
  };
  for (int s = 0; s < S; ++s)
    for (int mb = 0; mb < m; ++mb) {
      std::string smb = std::to_string(mb);
      size_t k = key(s, mb);
      const Slot &back = bwd[k].rank >= 0 ? bwd[k] : inp[k];
      std::string backName =
          std::to_string(s) + (bwd[k].rank >= 0 ? "B" : "I") + smb;
      if (cross(s, s + 1)) {
        if (!need(sendF[k], fwd[k], true, std::to_string(s) + "SEND_F" + smb,
                  "forward " + std::to_string(s) + "F" + smb) ||
            !need(recvB[k], back, false, std::to_string(s) + "RECV_B" + smb,
                  "backward " + backName))
          return false;
      }
      if (cross(s, s - 1)) {
        if (!need(recvF[k], fwd[k], false, std::to_string(s) + "RECV_F" + smb,
                  "forward " + std::to_string(s) + "F" + smb) ||
            !need(sendB[k], back, true, std::to_string(s) + "SEND_B" + smb,
                  "backward " + backName))
          return false;
      }
    }
  // A WAIT_SEND follows its SEND and waits for it once; a table that waits
  // for its sends waits for every one. torch's runtime refuses a table that
  // waits twice or not at all (_validate_send_waits, torch 2.15); a table
  // with no WAIT_SEND (the comms format of earlier releases) is accepted.
  std::vector<const Action *> waitF(n, nullptr), waitB(n, nullptr);
  bool anyWait = false;
  for (int r = 0; r < p; ++r) {
    int pos = 0;
    for (const Action &a : table.ranks[r]) {
      if (a.kind == ActKind::WaitSendF || a.kind == ActKind::WaitSendB) {
        bool f = a.kind == ActKind::WaitSendF;
        const Slot *send = nullptr;
        if (a.microbatch < m && a.stage < S)
          send = &(f ? sendF : sendB)[key(a.stage, a.microbatch)];
        if (!send || send->rank < 0 || send->pos >= pos)
          return fail(a.loc, name(a) + " waits for " +
                                 std::to_string(a.stage) +
                                 (f ? "SEND_F" : "SEND_B") +
                                 std::to_string(a.microbatch) +
                                 ", which does not come before it on rank " +
                                 std::to_string(r));
        const Action *&first = (f ? waitF : waitB)[key(a.stage, a.microbatch)];
        if (first)
          return fail(a.loc, name(a) + " waits for the same send again (first at " +
                                 at(first->loc) + ")");
        first = &a;
        anyWait = true;
      }
      ++pos;
    }
  }
  for (int s = 0; anyWait && s < S; ++s)
    for (int mb = 0; mb < m; ++mb)
      for (bool f : {true, false}) {
        const Slot &send = (f ? sendF : sendB)[key(s, mb)];
        if (send.rank >= 0 && !(f ? waitF : waitB)[key(s, mb)])
          return fail(send.loc, std::to_string(s) + (f ? "SEND_F" : "SEND_B") +
                                    std::to_string(mb) + " has no " + std::to_string(s) +
                                    (f ? "WAIT_SEND_F" : "WAIT_SEND_B") + std::to_string(mb) +
                                    " after it on rank " + std::to_string(send.rank) +
                                    " (torch's runtime needs one wait per send)");
      }
  return true;
}

/// For each rank, the other ranks owning a stage next to one of its own: every dependency of an
/// action is on an adjacent stage (s - 1 or s + 1), so only they can unblock it.
std::vector<std::vector<int>> Checker::rankNeighbours() const {
  std::vector<std::vector<int>> neighbours(p);
  for (int s = 0; s < S; ++s)
    for (int t : {s - 1, s + 1})
      if (t >= 0 && t < S && out.rankOfStage[t] != out.rankOfStage[s])
        neighbours[out.rankOfStage[s]].push_back(out.rankOfStage[t]);
  for (std::vector<int> &ns : neighbours) {
    std::sort(ns.begin(), ns.end());
    ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
  }
  return neighbours;
}

/// " (also blocked: rank q at ACTION (LOCATION), ...)" for the unfinished ranks but `r`.
std::string Checker::alsoBlocked(const std::vector<size_t> &pc, int r) const {
  std::string list;
  for (int q = 0; q < p; ++q) {
    if (q == r || pc[q] >= table.ranks[q].size())
      continue;
    const Action &h = table.ranks[q][pc[q]];
    list += (list.empty() ? " (also blocked: " : ", ") + std::string("rank ") +
            std::to_string(q) + " at " + name(h) + " (" + at(h.loc) + ")";
  }
  return list.empty() ? list : list + ")";
}

/// Runs the ranks' rows in order until all finish or none can move.
bool Checker::simulate() {
  const bool withComms = table.hasComms;
  size_t n = size_t(S) * m;
  // What has happened so far.
  std::vector<char> fDone(n, 0), bDone(n, 0), iDone(n, 0), sendFDone(n, 0),
      sendBDone(n, 0), recvFDone(n, 0), recvBDone(n, 0);
  auto cross = [&](int a, int b) {
    return b >= 0 && b < S && out.rankOfStage[a] != out.rankOfStage[b];
  };
  // Why `a` cannot run yet, or empty if it can. Dependencies inside an
  // OVERLAP_F_B group see its earlier sub-actions (they run in order).
  auto blocker = [&](const Action &a) -> std::string {
    int s = a.stage, mb = a.microbatch;
    std::string smb = std::to_string(mb);
    switch (a.kind) {
    case ActKind::Forward:
      if (s == 0)
        return "";
      if (withComms && cross(s, s - 1))
        return sendFDone[key(s - 1, mb)]
                   ? ""
                   : std::to_string(s - 1) + "SEND_F" + smb + " on rank " +
                         std::to_string(out.rankOfStage[s - 1]);
      return fDone[key(s - 1, mb)] ? ""
                                   : std::to_string(s - 1) + "F" + smb +
                                         " on rank " +
                                         std::to_string(out.rankOfStage[s - 1]);
    case ActKind::FullBackward:
    case ActKind::BackwardInput:
      if (s == S - 1)
        return "";
      if (withComms && cross(s, s + 1))
        return sendBDone[key(s + 1, mb)]
                   ? ""
                   : std::to_string(s + 1) + "SEND_B" + smb + " on rank " +
                         std::to_string(out.rankOfStage[s + 1]);
      return bDone[key(s + 1, mb)] || iDone[key(s + 1, mb)]
                 ? ""
                 : "the backward of stage " + std::to_string(s + 1) +
                       " micro-batch " + smb + " (" + std::to_string(s + 1) +
                       "B" + smb + " or " + std::to_string(s + 1) + "I" + smb +
                       ") on rank " + std::to_string(out.rankOfStage[s + 1]);
    case ActKind::WaitSendF:
      return recvFDone[key(s + 1, mb)]
                 ? ""
                 : std::to_string(s + 1) + "RECV_F" + smb + " on rank " +
                       std::to_string(out.rankOfStage[s + 1]);
    case ActKind::WaitSendB:
      return recvBDone[key(s - 1, mb)]
                 ? ""
                 : std::to_string(s - 1) + "RECV_B" + smb + " on rank " +
                       std::to_string(out.rankOfStage[s - 1]);
    default:
      return "";
    }
  };
  auto execute = [&](const Action &a) {
    if (a.microbatch < 0 || a.stage < 0 || a.stage >= S || a.microbatch >= m)
      return;
    size_t k = key(a.stage, a.microbatch);
    switch (a.kind) {
    case ActKind::Forward: fDone[k] = 1; break;
    case ActKind::FullBackward: bDone[k] = 1; break;
    case ActKind::BackwardInput: iDone[k] = 1; break;
    case ActKind::SendF: sendFDone[k] = 1; break;
    case ActKind::SendB: sendBDone[k] = 1; break;
    case ActKind::RecvF: recvFDone[k] = 1; break;
    case ActKind::RecvB: recvBDone[k] = 1; break;
    default: break;
    }
  };
  // Returns the blocking reason of the step's first blocked sub-action.
  auto tryStep = [&](const Action &step, const Action *&blockedAt) {
    if (step.kind != ActKind::OverlapFB) {
      std::string why = blocker(step);
      if (!why.empty()) {
        blockedAt = &step;
        return why;
      }
      execute(step);
      return std::string();
    }
    // A group starts only when all of its sub-actions can run in order.
    for (const Action &sub : step.sub) {
      std::string why = blocker(sub);
      if (!why.empty()) {
        // Roll back the sub-actions executed for this check.
        for (const Action &done : step.sub) {
          if (&done == &sub)
            break;
          size_t k = key(done.stage, done.microbatch);
          if (done.kind == ActKind::Forward) fDone[k] = 0;
          if (done.kind == ActKind::FullBackward) bDone[k] = 0;
          if (done.kind == ActKind::BackwardInput) iDone[k] = 0;
        }
        blockedAt = &sub;
        return why;
      }
      execute(sub);
    }
    return std::string();
  };
  // A worklist of the ranks that may move (rankNeighbours), not a sweep of every rank per step
  // (a serial table of 1024 ranks took minutes: micro-batches x ranks^2).
  const std::vector<std::vector<int>> neighbours = rankNeighbours();
  std::vector<size_t> pc(p, 0);
  std::vector<int> work;
  std::vector<char> queued(p, 1);
  for (int r = p - 1; r >= 0; --r)
    work.push_back(r);
  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    queued[r] = 0;
    const auto &row = table.ranks[r];
    bool moved = false;
    while (pc[r] < row.size()) {
      const Action *blockedAt = nullptr;
      if (!tryStep(row[pc[r]], blockedAt).empty())
        break;
      ++pc[r];
      moved = true;
    }
    if (moved)
      for (int q : neighbours[r])
        if (!queued[q] && pc[q] < table.ranks[q].size()) {
          queued[q] = 1;
          work.push_back(q);
        }
  }
  for (int r = 0; r < p; ++r) {
    const auto &row = table.ranks[r];
    if (pc[r] >= row.size())
      continue;
    const Action *blockedAt = nullptr;
    std::string why = tryStep(row[pc[r]], blockedAt);
    std::ostringstream os;
    os << "deadlock: rank " << r << " blocks at " << name(*blockedAt)
       << ", which waits for " << why << ", and no rank can proceed" << alsoBlocked(pc, r);
    return fail(blockedAt->loc, os.str());
  }
  return true;
}

bool Checker::runShape() {
  out = Imported();
  out.hadComms = table.hasComms;
  if (table.ranks.empty())
    return fail({1, 1}, "the schedule table is empty");
  if (table.ranks.size() > size_t(kMaxStages))
    return fail(rowLoc(int(kMaxStages)),
                "the table has " + std::to_string(table.ranks.size()) +
                    " rank rows; a pipeline has at most " + std::to_string(kMaxStages) +
                    " ranks (pipeline.stages)");
  return layout() && sizes();
}

bool Checker::runOrder() {
  p = out.ranks;
  S = out.stages;
  m = out.microbatches;
  return pairing() && (!table.hasComms || comms()) && simulate();
}

} // namespace

bool checkTableShape(const Table &table, Imported &out, Diag &diag) {
  return Checker(table, out, diag).runShape();
}

bool checkTableOrder(const Table &table, Imported &out, Diag &diag) {
  return Checker(table, out, diag).runOrder();
}

bool checkTable(const Table &table, Imported &out, Diag &diag) {
  return checkTableShape(table, out, diag) && checkTableOrder(table, out, diag);
}

void toPipefill(const Imported &imp, const sched::PipelineSpec &spec,
                sched::Schedule &out) {
  const int p = imp.ranks, S = imp.stages, v = imp.chunksPerRank;
  out.assign(p, {});
  auto rankOf = [&](int s) { return imp.rankOfStage[s]; };
  for (int d = 0; d < p; ++d) {
    const sched::StageCost &c = spec.costs[d];
    std::vector<sched::Instr> &list = out[d];
    list.reserve(imp.order[d].size() * 2 + 2);
    auto comm = [&](sched::InstrKind kind, sched::Payload payload, int mb,
                    int chunk, int peer, int64_t bytes) {
      list.push_back(sched::transferInstr(kind, payload, mb, chunk, peer, bytes));
    };
    for (const ComputeOp &op : imp.order[d]) {
      int s = op.stage;
      bool hasPrev = s > 0 && rankOf(s - 1) != d;
      bool hasNext = s < S - 1 && rankOf(s + 1) != d;
      sched::Instr in;
      in.kind = op.kind;
      in.microbatch = op.microbatch;
      in.chunk = op.chunk;
      switch (op.kind) {
      case sched::InstrKind::Forward:
        if (hasPrev)
          comm(sched::InstrKind::Recv, sched::Payload::Activation,
               op.microbatch, imp.chunkOfStage[s - 1], rankOf(s - 1),
               spec.costs[rankOf(s - 1)].activationBytes);
        in.durationUs = c.forwardUs / v;
        in.bytes = c.stashBytes / v;
        list.push_back(in);
        if (hasNext)
          comm(sched::InstrKind::Send, sched::Payload::Activation,
               op.microbatch, op.chunk, rankOf(s + 1), c.activationBytes);
        break;
      case sched::InstrKind::Backward:
      case sched::InstrKind::BackwardInput:
        if (hasNext)
          comm(sched::InstrKind::Recv, sched::Payload::Gradient, op.microbatch,
               imp.chunkOfStage[s + 1], rankOf(s + 1), c.activationBytes);
        in.durationUs = op.kind == sched::InstrKind::Backward
                            ? c.backwardUs / v
                            : (c.backwardUs - c.backwardWeightUs) / v;
        list.push_back(in);
        if (hasPrev)
          comm(sched::InstrKind::Send, sched::Payload::Gradient, op.microbatch,
               op.chunk, rankOf(s - 1),
               spec.costs[rankOf(s - 1)].activationBytes);
        break;
      case sched::InstrKind::BackwardWeight:
        in.durationUs = c.backwardWeightUs / v;
        list.push_back(in);
        break;
      default:
        break;
      }
    }
    sched::appendIterationTail(spec, list);
  }
}

std::string formatTable(const std::vector<std::vector<ExportOp>> &ranks) {
  auto cell = [](const ExportOp &op) {
    const char *k = op.kind == sched::InstrKind::Forward          ? "F"
                    : op.kind == sched::InstrKind::Backward       ? "B"
                    : op.kind == sched::InstrKind::BackwardInput  ? "I"
                                                                  : "W";
    return std::to_string(op.stage) + k + std::to_string(op.microbatch);
  };
  std::string out;
  for (const auto &row : ranks) {
    for (size_t i = 0; i < row.size();) {
      if (i)
        out += ',';
      size_t j = i + 1;
      if (row[i].overlapGroup >= 0)
        while (j < row.size() && row[j].overlapGroup == row[i].overlapGroup)
          ++j;
      if (row[i].overlapGroup >= 0) {
        out += '(';
        for (size_t k = i; k < j; ++k)
          out += (k > i ? ";" : "") + cell(row[k]);
        out += ")OVERLAP_F_B";
      } else {
        out += cell(row[i]);
      }
      i = j;
    }
    out += '\n';
  }
  return out;
}

} // namespace pipefill::torchsched
