// One rank's part of a multi-process run (pipefill.rt.RankResult, written as JSON) and the merge
// of every rank's part into the RunResult a single-process run of the same program gives, so the
// merged report has the same keys (docs/runtime.md, "Ranks as processes").
#ifndef PFRT_RANK_RESULT_H
#define PFRT_RANK_RESULT_H

#include "runtime/Executor.h"

#include <string>
#include <vector>

namespace pfrt {

// This rank's devices of `run` (RunResult::local) as compact RankResult JSON; times relative to
// the run's start. Consumes the run's timeline (its slots are released as they are written).
std::string rankResultJson(const Program &program, RunResult &&run, int rank, int world,
                           const std::string &transport);

// The binary StreamProgram a part carries (for merging without the program file).
std::string embeddedProgram(const std::string &part, const std::string &name);

// Merges the parts of ranks 0..world-1 (any order; `names` name them in messages). Throws
// Error(PFRT_ERROR_PARSE) for a part that is not RankResult JSON and
// Error(PFRT_ERROR_INVALID_ARGUMENT) for parts that do not belong together (another program, other
// settings, a rank missing or twice, a device missing). Consumes the parts: each one's text is
// released once parsed, and its op times once merged.
// `programGiven`: false when `program` is the one the first part carries (messages say so).
RunResult mergeRankResults(const Program &program, std::vector<std::string> &&parts,
                           const std::vector<std::string> &names, bool programGiven = true);

} // namespace pfrt

#endif // PFRT_RANK_RESULT_H
