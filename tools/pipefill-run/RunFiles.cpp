//===- RunFiles.cpp - pipefill-run's files, checked before a run ---------===//
//
// Every file a run (or --merge) writes, and the files it reads, are told apart
// before anything is written: no output over an input or another output, in
// rank mode over no rank's checkpoint, history or report part; and each
// output can be written.
//
//===----------------------------------------------------------------------===//
#include "tools/pipefill-run/RunArgs.h"

#include "support/Files.h"

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

} // namespace

// False (printed, with `when` after the reason) if `path` is set and cannot be written.
bool checkWritable(const std::string &path, const char *when) {
  if (path.empty() || writable(path))
    return true;
  std::fprintf(stderr, "pipefill-run: error: %s: cannot be written: %s%s\n", path.c_str(),
               std::strerror(errno), when);
  return false;
}

namespace {

const char kPrevCopy[] = " (its previous copy)";

// "--checkpoint" and "--checkpoint (its previous copy)", or the same of one rank: two names of
// one checkpoint.
bool checkpointAndPrev(const std::string &a, const std::string &b) {
  return a.rfind("--checkpoint", 0) == 0 && b == a + kPrevCopy;
}

// An output at a name the checkpoint writer keeps as one rank's history (CHECKPOINT.rankR.itN,
// CheckpointFile.cpp): the writer would replace it, or read it back as a checkpoint; or at the
// name of one of its temporary files (CHECKPOINT[.rankR].tmp. and six characters, mkstemp's),
// which the next run with that checkpoint removes as left over by a killed run. "" if none.
std::string historyClash(const std::string &output, const std::string &checkpoint, int world) {
  if (output.empty() || checkpoint.empty())
    return "";
  auto isTemp = [&](const std::string &file) {
    const std::string prefix = file + ".tmp.";
    return output.size() == prefix.size() + 6 && output.compare(0, prefix.size(), prefix) == 0;
  };
  const char *temps = "temporary files (the next run with this --checkpoint removes them)";
  if (isTemp(checkpoint))
    return std::string("the checkpoint's ") + temps;
  for (int r = 0; r < world; ++r)
    if (isTemp(checkpoint + ".rank" + std::to_string(r)))
      return "rank " + std::to_string(r) + "'s checkpoint " + temps;
  for (int r = 0; r < world; ++r) {
    const std::string prefix = checkpoint + ".rank" + std::to_string(r) + ".it";
    if (output.size() > prefix.size() && output.compare(0, prefix.size(), prefix) == 0 &&
        output.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
      return "rank " + std::to_string(r) + "'s checkpoint history";
  }
  return "";
}

} // namespace

// No two of `files` (option, path) are one file (an output over an input destroys it; two outputs
// at one path keep the last one written); else prints which and returns false. Files before
// `firstOutput` are inputs, which may repeat (the reader says what is wrong with that). A
// checkpoint and its previous copy are two names by construction, and may be one inode: the
// writer links FILE.prev to FILE before it renames the new FILE in, so a run killed in between
// leaves both names on the last checkpoint.
// Rank mode lists every rank's files: the pairs that share a key (pipefill::pathKeys), not all
// pairs, are compared.
bool distinctFiles(const std::vector<std::pair<std::string, std::string>> &files,
                   size_t firstOutput) {
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
  struct stat st;
  // Each rank writes its part beside the report: beside /dev/stdout that made regular files
  // /dev/stdout.rankR.
  if (args.rankMode() && !args.reportPath.empty() &&
      (args.reportPath == "-" ||
       (::stat(args.reportPath.c_str(), &st) == 0 && !S_ISREG(st.st_mode)))) {
    std::fprintf(stderr,
                 "pipefill-run: error: --report %s is not a regular file: with one process per rank "
                 "each rank writes its part beside the report (%s), so give a file path\n",
                 args.reportPath.c_str(), rankPartPath(args.reportPath, 0).c_str());
    return 2;
  }
  if (args.rankMode() && args.options.rank >= 0 && !args.reportPath.empty() &&
      !checkWritable(rankPartPath(args.reportPath, args.options.rank), when))
    return 1;
  if (!args.checkpointPath.empty() && ::stat(args.checkpointPath.c_str(), &st) == 0 &&
      !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "pipefill-run: error: --checkpoint %s is not a regular file\n",
                 args.checkpointPath.c_str());
    return 1;
  }
  return kContinue;
}

std::string rankPartPath(const std::string &path, int rank) {
  const std::string suffix = ".rank" + std::to_string(rank);
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + suffix + ext;
  return path + suffix;
}

} // namespace pipefill::run
