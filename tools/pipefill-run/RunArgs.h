//===- RunArgs.h - pipefill-run's command line and outputs -------*- C++ -*-===//
//
// Private to tools/pipefill-run: RunArgs.cpp parses and checks the command
// line, RunOutputs.cpp writes the report, profile, rank parts and comparison;
// RunUsage.cpp holds the --help text; PipefillRun.cpp is the driver.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_PIPEFILL_RUN_RUNARGS_H
#define PIPEFILL_TOOLS_PIPEFILL_RUN_RUNARGS_H

#include "runtime/pfrt.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace pipefill::run {

/// What the command line asks for.
struct RunArgs {
  std::string programPath, reportPath, profilePath, tracePath, checkpointPath, compareJson;
  pfrt_options options;
  bool quiet = false;
  bool profileWithFill = false;
  bool noFill = false; // --no-fill itself (--profile-out also turns fill off, for the main job's profile)
  bool progress = false;
  bool merge = false;
  unsigned long long compare = 0; // ABBA blocks; 0: no comparison
  std::vector<std::string> positional;
  std::vector<std::string> given; // the options on the command line, by name (--merge's check)
  // Rank mode with --report: this rank's part, written as soon as the run is over (writeRankPart).
  bool partWritten = false, partFailed = false;

  RunArgs() { pfrt_options_init(&options); }
  RunArgs(const RunArgs &) = delete; // options.checkpoint_path points into it
  RunArgs &operator=(const RunArgs &) = delete;

  bool rankMode() const { return options.rank >= 0 || options.world > 0; }
};

/// The --help text (RunUsage.cpp).
extern const char *const kRunUsage;

/// "Keep going" from the functions below that otherwise return an exit code.
constexpr int kContinue = -1;

/// Prints the usage error and returns 2.
int usageError(const std::string &message);

// pfrt_last_error() in pipefill-run's words: the runtime names pfrt_options' fields
// (checkpoint_recovery, max_dim) where the command line has flags.
std::string runtimeError();

/// Reads the options into `args`: kContinue, or the exit code (0 after
/// --help, 2 after a usage error, printed).
int parseRunArgs(int argc, char **argv, RunArgs &args);

/// The checks of a run (not --merge) after parsing: one program, option
/// combinations, rank mode from the launcher. kContinue or the exit code.
int finishRunArgs(RunArgs &args);

/// Rank mode: where rank `rank` writes its part of --report FILE (FILE with
/// .rankR before a .json extension, else FILE.rankR).
std::string rankPartPath(const std::string &path, int rank);

/// False (printed, with `when` after the reason) if `path` is set and cannot
/// be written (RunFiles.cpp).
bool checkWritable(const std::string &path, const char *when);

/// No two of `files` (option, path) are one file; else prints which and returns
/// false. Files before `firstOutput` are inputs, which may repeat (RunFiles.cpp).
bool distinctFiles(const std::vector<std::pair<std::string, std::string>> &files,
                   size_t firstOutput = 0);

/// The output files of a run, checked before it so that a long run's
/// measurements are never lost to a path that cannot be written; 1 (printed)
/// or kContinue.
int checkOutputsWritable(const RunArgs &args);

/// --merge: rank parts into one report. The exit code.
int runMerge(const RunArgs &args);

/// --compare: main-only vs main+fill; prints (and writes --compare-json).
int runCompare(pfrt_program *program, const RunArgs &args);

/// Writes --report and --profile-out and prints the summary (unless --quiet);
/// 1 if a write failed.
int writeOutputs(pfrt_report *report, const RunArgs &args);

/// Rank mode: every rank writes its part next to --report; rank 0 writes the
/// merged report and the profile and prints the summary. The exit code.
int writeRankOutputs(pfrt_report *report, const RunArgs &args);

/// pfrt_rank_part_fn (user: the RunArgs): writes this rank's part next to
/// --report before the parts are gathered and merged, so that a gather or a
/// merge that fails leaves every part for --merge.
void writeRankPart(void *user, int32_t rank, const char *json, size_t size);

} // namespace pipefill::run

#endif // PIPEFILL_TOOLS_PIPEFILL_RUN_RUNARGS_H
