//===- RunOutputs.cpp - What pipefill-run writes ---------------------------===//
//
// The report, profile and summary of a run, the rank parts of a rank-mode
// run, --merge and the --compare output; output paths are checked before a
// run.
//
//===----------------------------------------------------------------------===//

#include "tools/pipefill-run/RunArgs.h"

#include "support/Files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pipefill::run {
namespace {

// True when `path` can be opened for writing; a file created by the check is removed again. A
// FIFO without a reader fails (ENXIO) instead of blocking the check.
bool writable(const std::string &path) {
  struct stat st;
  bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    return false;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK, 0644);
  if (fd < 0)
    return false;
  ::close(fd);
  if (!existed)
    ::unlink(path.c_str());
  return true;
}

// False (printed, with `when` after the reason) if `path` is set and cannot be written.
bool checkWritable(const std::string &path, const char *when) {
  if (path.empty() || writable(path))
    return true;
  std::fprintf(stderr, "pipefill-run: error: %s: cannot be written: %s%s\n", path.c_str(),
               std::strerror(errno), when);
  return false;
}

// True when the file's first non-blank character is '{' (a rank part; never a program: a text
// StreamProgram starts with a field or a comment, a binary one with a field tag). False when it
// cannot be read, so that the merge names it.
bool startsWithJsonObject(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return true;
  int c;
  while ((c = std::fgetc(f)) != EOF && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
  }
  std::fclose(f);
  return c == '{';
}

const char kPrevCopy[] = " (its previous copy)";

// "--checkpoint" and "--checkpoint (its previous copy)", or the same of one rank: two names of
// one checkpoint.
bool checkpointAndPrev(const std::string &a, const std::string &b) {
  return a.rfind("--checkpoint", 0) == 0 && b == a + kPrevCopy;
}

// An output at a name the checkpoint writer keeps as one rank's history (CHECKPOINT.rankR.itN,
// CheckpointFile.cpp): the writer would replace it, or read it back as a checkpoint. "" if none.
std::string historyClash(const std::string &output, const std::string &checkpoint, int world) {
  if (output.empty() || checkpoint.empty())
    return "";
  for (int r = 0; r < world; ++r) {
    const std::string prefix = checkpoint + ".rank" + std::to_string(r) + ".it";
    if (output.size() > prefix.size() && output.compare(0, prefix.size(), prefix) == 0 &&
        output.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
      return "rank " + std::to_string(r) + "'s checkpoint history";
  }
  return "";
}

// No two of `files` (option, path) are one file (an output over an input destroys it; two outputs
// at one path keep the last one written); else prints which and returns false. Files before
// `firstOutput` are inputs, which may repeat (the reader says what is wrong with that). A
// checkpoint and its previous copy are two names by construction, and may be one inode: the
// writer links FILE.prev to FILE before it renames the new FILE in, so a run killed in between
// leaves both names on the last checkpoint.
// Rank mode lists every rank's files: the pairs that share a key (pipefill::pathKeys), not all
// pairs, are compared.
bool distinctFiles(const std::vector<std::pair<std::string, std::string>> &files,
                   size_t firstOutput = 0) {
  std::map<std::string, std::vector<size_t>> byKey;
  for (size_t i = 0; i < files.size(); ++i)
    for (const std::string &key : pipefill::pathKeys(files[i].second)) {
      std::vector<size_t> &same = byKey[key];
      for (size_t j : same) // j < i
        if (i >= firstOutput && !checkpointAndPrev(files[j].first, files[i].first)) {
          std::fprintf(stderr, "pipefill-run: error: %s and %s are the same file (%s)\n",
                       files[j].first.c_str(), files[i].first.c_str(), files[i].second.c_str());
          return false;
        }
      same.push_back(i);
    }
  return true;
}

// Writes --report, --profile-out and --trace; 1 if a write failed (printed), else 0.
int writeReportAndProfile(pfrt_report *report, const RunArgs &args) {
  int rc = 0;
  if (!args.tracePath.empty() &&
      pfrt_report_write_trace(report, args.tracePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!args.reportPath.empty() &&
      pfrt_report_write_json(report, args.reportPath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!args.profilePath.empty() &&
      pfrt_report_write_profile(report, args.profilePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  return rc;
}

} // namespace

int checkOutputsWritable(const RunArgs &args) {
  const char *when = " (checked before the run)";
  // Every file the run writes, and the program it reads: no two may be one file (a report over
  // the program or the checkpoint destroyed it, a report and a profile at one path kept one).
  std::vector<std::pair<std::string, std::string>> files; // option, path
  auto add = [&](const std::string &option, const std::string &path) {
    if (!path.empty())
      files.push_back({option, path});
  };
  add("PROGRAM", args.programPath);
  add("--report", args.reportPath);
  add("--profile-out", args.profilePath);
  add("--trace", args.tracePath);
  add("--compare-json", args.compareJson);
  add("--checkpoint", args.checkpointPath);
  if (!args.checkpointPath.empty())
    add(std::string("--checkpoint") + kPrevCopy, args.checkpointPath + ".prev");
  // Rank mode: every rank's checkpoint (CHECKPOINT.rankR and its previous copy) and report part;
  // rank 0's outputs (the trace, the merged report) must miss the other ranks' files too.
  const int world = args.rankMode() ? static_cast<int>(args.options.world) : 0;
  for (int r = 0; r < world; ++r) {
    const std::string rank = " (rank " + std::to_string(r) + ")";
    if (!args.checkpointPath.empty()) {
      const std::string cp = args.checkpointPath + ".rank" + std::to_string(r);
      add("--checkpoint" + rank, cp);
      add("--checkpoint" + rank + kPrevCopy, cp + ".prev");
    }
    if (!args.reportPath.empty())
      add("--report" + rank + "'s part", rankPartPath(args.reportPath, r));
  }
  if (world <= 0 && args.rankMode() && args.options.rank >= 0 && !args.reportPath.empty())
    add("--report (this rank's part)", rankPartPath(args.reportPath, args.options.rank));
  if (!distinctFiles(files))
    return 2;
  for (const auto &[option, path] : files) {
    const std::string clash = historyClash(path, args.checkpointPath, world);
    if (!clash.empty() && option.rfind("--checkpoint", 0) != 0) {
      std::fprintf(stderr, "pipefill-run: error: %s (%s) is a name of %s\n", option.c_str(),
                   path.c_str(), clash.c_str());
      return 2;
    }
  }
  for (const std::string *out : {&args.reportPath, &args.profilePath, &args.tracePath,
                                 &args.compareJson})
    if (!checkWritable(*out, when))
      return 1;
  if (args.rankMode() && args.options.rank >= 0 && !args.reportPath.empty() &&
      !checkWritable(rankPartPath(args.reportPath, args.options.rank), when))
    return 1;
  struct stat st;
  if (!args.checkpointPath.empty() && ::stat(args.checkpointPath.c_str(), &st) == 0 &&
      !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "pipefill-run: error: --checkpoint %s is not a regular file\n",
                 args.checkpointPath.c_str());
    return 1;
  }
  return kContinue;
}

int writeOutputs(pfrt_report *report, const RunArgs &args) {
  int rc = writeReportAndProfile(report, args);
  if (!args.quiet)
    std::fputs(pfrt_report_summary(report), stdout);
  return rc;
}

int runMerge(const RunArgs &args) {
  if (args.options.rank >= 0 || args.options.world > 0 || args.compare)
    return usageError("--merge does not run anything: no --rank, --world or --compare");
  // What a merge does not use would be ignored without a word (the parts say how they ran).
  for (const std::string &option : args.given)
    if (option != "--merge" && option != "--report" && option != "--profile-out" &&
        option != "--trace" && option != "--quiet" && option != "--verbose")
      return usageError("--merge takes only the parts, PROGRAM, --report, --profile-out, "
                        "--trace and --quiet; " + option + " is for a run");
  // The parts are JSON objects; a first argument that is not (by its content, not its name: a
  // --report without .json makes parts named run.rank0) is the program they ran.
  std::vector<std::string> parts = args.positional;
  std::string programPath;
  if (!parts.empty() && !startsWithJsonObject(parts[0])) {
    programPath = parts[0];
    parts.erase(parts.begin());
  }
  if (parts.empty())
    return usageError("--merge expects the rank parts to merge (run.rank0.json ...)");
  // The outputs must not overwrite an input (a part may be the only copy of a rank's times).
  std::vector<std::pair<std::string, std::string>> files;
  if (!programPath.empty())
    files.push_back({"PROGRAM", programPath});
  for (const std::string &part : parts)
    files.push_back({"PART", part});
  const size_t firstOutput = files.size();
  for (const auto &[option, path] : {std::pair<const char *, const std::string *>{
                                         "--report", &args.reportPath},
                                     {"--profile-out", &args.profilePath},
                                     {"--trace", &args.tracePath}})
    if (!path->empty())
      files.push_back({option, *path});
  if (!distinctFiles(files, firstOutput))
    return 2;
  for (const std::string *out : {&args.reportPath, &args.profilePath, &args.tracePath})
    if (!checkWritable(*out, ""))
      return 1;
  pfrt_program *program = nullptr;
  if (!programPath.empty() && pfrt_program_load(programPath.c_str(), &program) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    return 1;
  }
  std::vector<const char *> paths;
  for (const std::string &p : parts)
    paths.push_back(p.c_str());
  pfrt_report *report = nullptr;
  pfrt_status status =
      pfrt_report_merge(program, paths.data(), static_cast<uint32_t>(paths.size()), &report);
  pfrt_program_destroy(program);
  if (status != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: --merge: %s\n", pfrt_last_error());
    return 1;
  }
  int rc = writeOutputs(report, args);
  pfrt_report_destroy(report);
  return rc;
}

int writeRankOutputs(pfrt_report *report, const RunArgs &args) {
  int32_t rank = -1, world = 0;
  pfrt_report_get_rank(report, &rank, &world);
  int rc = 0;
  if (!args.reportPath.empty()) {
    const std::string part = rankPartPath(args.reportPath, rank);
    const std::string error = pipefill::writeFileAtomically(part, pfrt_report_rank_json(report));
    if (!error.empty()) {
      std::fprintf(stderr, "pipefill-run: error: rank %d: %s\n", rank, error.c_str());
      rc = 1;
    }
  }
  if (rank != 0)
    return rc;
  if (writeReportAndProfile(report, args))
    rc = 1;
  if (!args.quiet)
    std::printf("ranks: %d processes (one per device), merged on rank 0\n%s", world,
                pfrt_report_summary(report));
  return rc;
}

int runCompare(pfrt_program *program, const RunArgs &args) {
  pfrt_compare_result result;
  if (pfrt_compare(program, &args.options, static_cast<uint32_t>(args.compare), &result) !=
      PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s: %s\n", args.programPath.c_str(),
                 pfrt_last_error());
    return 1;
  }
  if (result.rank > 0)
    return 0; // rank 0 prints the result of the merged runs
  if (!args.quiet)
    std::fputs(pfrt_compare_format(&result, 0), stdout);
  if (args.compareJson.empty())
    return 0;
  const std::string error =
      pipefill::writeFileAtomically(args.compareJson, pfrt_compare_format(&result, 1));
  if (error.empty())
    return 0;
  std::fprintf(stderr, "pipefill-run: error: %s\n", error.c_str());
  return 1;
}

} // namespace pipefill::run
