//===- RunOutputs.cpp - What pipefill-run writes ---------------------------===//
//
// The report, profile and summary of a run, the rank parts of a rank-mode
// run, --merge and the --compare output (the paths are checked before, in
// RunFiles.cpp).
//
//===----------------------------------------------------------------------===//
#include "tools/pipefill-run/RunArgs.h"

#include "support/Files.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace pipefill::run {
namespace {

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

// Writes --report, --profile-out and --trace; 1 if a write failed (printed), else 0.
int writeReportAndProfile(pfrt_report *report, const RunArgs &args) {
  int rc = 0;
  if (!args.tracePath.empty() &&
      pfrt_report_write_trace(report, args.tracePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", runtimeError().c_str());
    rc = 1;
  }
  if (!args.reportPath.empty() &&
      pfrt_report_write_json(report, args.reportPath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", runtimeError().c_str());
    rc = 1;
  }
  if (!args.profilePath.empty() &&
      pfrt_report_write_profile(report, args.profilePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", runtimeError().c_str());
    rc = 1;
  }
  return rc;
}

} // namespace

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
    std::fprintf(stderr, "pipefill-run: error: %s\n", runtimeError().c_str());
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
    std::fprintf(stderr, "pipefill-run: error: --merge: %s\n", runtimeError().c_str());
    return 1;
  }
  int rc = writeOutputs(report, args);
  pfrt_report_destroy(report);
  return rc;
}

void writeRankPart(void *user, int32_t rank, const char *json, size_t size) {
  RunArgs &args = *static_cast<RunArgs *>(user);
  args.partWritten = true;
  const std::string error =
      pipefill::writeFileAtomically(rankPartPath(args.reportPath, rank), std::string(json, size));
  if (!error.empty()) {
    std::fprintf(stderr, "pipefill-run: error: rank %d: %s\n", rank, error.c_str());
    args.partFailed = true;
  }
}

int writeRankOutputs(pfrt_report *report, const RunArgs &args) {
  int32_t rank = -1, world = 0;
  pfrt_report_get_rank(report, &rank, &world);
  int rc = args.partFailed ? 1 : 0;
  if (!args.reportPath.empty() && !args.partWritten) {
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
                 runtimeError().c_str());
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
