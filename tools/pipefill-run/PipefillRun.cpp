// pipefill-run: loads a StreamProgram (binary or text protobuf), runs it on the host or CUDA
// backend through the runtime's C API and writes the run report / measured profile.
#include "runtime/pfrt.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// True when `path` can be opened for writing; a file created by the check is removed again.
bool writable(const std::string &path) {
  struct stat st;
  bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    return false;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0)
    return false;
  ::close(fd);
  if (!existed)
    ::unlink(path.c_str());
  return true;
}

// --- Progress line and clean stop (SIGINT/SIGTERM) -------------------------------------------

struct Progress {
  bool tty = false;       // stderr is a terminal: one line rewritten in place
  double lastPrintS = -1; // elapsed seconds of the last line printed
};

// "12.3 s", "4 min 05 s", "3 h 20 min", "41 d 7 h" (a run of years still reads sensibly).
std::string formatSeconds(double s) {
  char buf[64];
  if (!(s < 1e12))
    return "unknown";
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%d min %02d s", int(s / 60), int(s) % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%d h %02d min", int(s / 3600), int(s / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%.0f d %d h", std::floor(s / 86400), int(s / 3600) % 24);
  return buf;
}

// pfrt_progress_fn: at most one line a second, plus the last iteration's.
void printProgress(void *user, uint32_t done, uint32_t total, double elapsedS) {
  Progress &p = *static_cast<Progress *>(user);
  if (done < total && p.lastPrintS >= 0 && elapsedS - p.lastPrintS < 1.0)
    return;
  p.lastPrintS = elapsedS;
  std::string eta = done ? formatSeconds(elapsedS / done * (total - done)) : "unknown";
  std::fprintf(stderr, "%spipefill-run: iteration %u/%u, elapsed %s, ETA %s%s", p.tty ? "\r" : "",
               done, total, formatSeconds(elapsedS).c_str(), eta.c_str(),
               p.tty ? (done == total ? "\n" : "\033[K") : "\n");
  std::fflush(stderr);
}

volatile std::sig_atomic_t gStopSignal = 0;

void onStopSignal(int sig) {
  gStopSignal = sig;
  pfrt_request_stop();
  const char msg[] = "\npipefill-run: stopping at the next iteration boundary (again to kill)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}

// SIGINT/SIGTERM ask the runtime to stop cleanly; a second one kills (SA_RESETHAND).
void installStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// After the run: exit code 128 + signal when a stop signal cut the run short, else 0.
int stopExitCode(const pfrt_report *report, const std::string &checkpointPath) {
  if (!pfrt_report_incomplete(report))
    return 0;
  pfrt_report_stats stats;
  pfrt_report_get_stats(report, &stats);
  int sig = gStopSignal ? static_cast<int>(gStopSignal) : SIGTERM;
  std::fprintf(stderr,
               "pipefill-run: stopped by %s after %u iteration(s) (through iteration %u); the "
               "report is marked incomplete%s\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", stats.iterations,
               stats.first_iteration + stats.iterations,
               checkpointPath.empty() ? "" : "; the checkpoint is written: rerun to resume");
  return 128 + sig;
}

const char *kUsage =
    "usage: pipefill-run PROGRAM [options]\n"
    "\n"
    "Runs a pipefill StreamProgram (binary .pb or text .pbtxt) and reports planned vs measured.\n"
    "\n"
    "options:\n"
    "  --backend host|cuda|auto  backend (default auto: cuda if a GPU is present, else host)\n"
    "  --iterations N            loop count (default: the program's, else 1)\n"
    "  --report FILE             write the run report JSON\n"
    "  --profile-out FILE        profile mode: run the main job without fill and write a\n"
    "                            pipefill.rt.MeasuredProfile (text format for .pbtxt)\n"
    "  --profile-with-fill       with --profile-out: run with fill too, so the profile also\n"
    "                            records measured fill-layer costs (closed loop for fill)\n"
    "  --no-fill                 run the main job only\n"
    "  --checkpoint FILE         save fill progress after every iteration; resume from it\n"
    "  --on-bad-checkpoint M     when FILE is truncated, corrupted, of another program or of the\n"
    "                            wrong shape: fail (default), previous (resume from FILE.prev,\n"
    "                            the last good one) or restart (move it to FILE.bad, start clean)\n"
    "  --time-scale X            host backend: real us per planned us (default 1.0)\n"
    "  --time-model measured|modelled\n"
    "                            host backend: real main compute calibrated to the plan and\n"
    "                            timed (default), or the fast model where everything but the\n"
    "                            fill kernels lasts its planned time (printed as MODELLED)\n"
    "  --fill-policy bounded|unbounded\n"
    "                            bounded (default): a fill chunk starts only if its predicted\n"
    "                            time fits the rest of its bubble, else it is deferred\n"
    "  --fill-priority idle|normal\n"
    "                            host: fill threads at SCHED_IDLE (default) or main's priority\n"
    "  --stage K                 run device K for real; emulate the others at planned times\n"
    "                            (host, measured time: device 0 by default when the pipeline\n"
    "                            has more devices than the machine has cores)\n"
    "  --cpu N                   host: pin the real device's threads to CPU N\n"
    "  --device N                CUDA: GPU ordinal (default: local rank, else 0)\n"
    "  --compare N               slowdown: N ABBA blocks of main-only (A) vs main+fill (B)\n"
    "                            runs after an A/A pair; prints slowdown with its noise floor,\n"
    "                            switch latency p50/p99, fill throughput measured vs planned\n"
    "  --compare-json FILE       also write the comparison as JSON\n"
    "  --max-dim N               cap fill-workload dimensions (default: host 128, cuda none)\n"
    "  --rank R --world P        one process per rank: run device R of a P-device program and\n"
    "                            reach the other ranks over MPI (under mpirun both default to the\n"
    "                            launcher's; P must equal the program's device count). --report\n"
    "                            FILE: every rank writes its part to FILE with .rankR before the\n"
    "                            extension (run.json -> run.rank1.json); rank 0 also writes the\n"
    "                            merged report to FILE and prints the summary\n"
    "  --peer-timeout S          rank mode: fail when a peer's message, the start or the final\n"
    "                            gather takes longer than S seconds (default 120)\n"
    "  --merge PART...           merge rank parts (run.rank0.json ...) into one report (--report\n"
    "                            FILE, summary on stdout); PROGRAM is optional (the parts carry it)\n"
    "  --quiet                   no summary table (and no progress line on a terminal)\n"
    "  --progress                progress line on stderr (iteration k/N, elapsed, ETA), at most\n"
    "                            one a second; the default when stderr is a terminal\n"
    "  --verbose                 runtime details on stderr\n"
    "  --help                    this text\n"
    "\n"
    "SIGINT (Ctrl-C) or SIGTERM stops the run at the next iteration boundary: the checkpoint is\n"
    "written, the report and profile are written marked incomplete, and the exit code is 130\n"
    "(SIGINT) or 143 (SIGTERM). A second signal kills at once. Other exit codes: 0 done, 1 error,\n"
    "2 usage.\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "pipefill-run: error: %s\n%s", message.c_str(),
               "run 'pipefill-run --help' for usage\n");
  return 2;
}

bool parseUnsigned(const std::string &s, unsigned long long max, unsigned long long &out) {
  if (s.empty() || s[0] == '-' || s[0] == '+')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end || v > max)
    return false;
  out = v;
  return true;
}

bool parseDouble(const std::string &s, double &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

// Rank mode: where rank `rank` writes its part of --report FILE (FILE with .rankR before a .json
// extension, else FILE.rankR).
std::string rankPartPath(const std::string &path, int rank) {
  const std::string suffix = ".rank" + std::to_string(rank);
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + suffix + ext;
  return path + suffix;
}

// Rank mode from the launcher's environment when neither --rank nor --world was given: a world
// of one is a plain single-process run.
void rankFromLauncher(pfrt_options &options) {
  if (options.rank >= 0 || options.world > 0)
    return;
  const char *pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"}};
  for (auto &p : pairs) {
    const char *r = std::getenv(p[0]), *w = std::getenv(p[1]);
    unsigned long long rank = 0, world = 0;
    if (r && w && parseUnsigned(r, 1u << 30, rank) && parseUnsigned(w, 1u << 30, world)) {
      if (world > 1) {
        options.rank = static_cast<int32_t>(rank);
        options.world = static_cast<int32_t>(world);
      }
      return;
    }
  }
}

// Writes --report and --profile-out and prints the summary (unless --quiet); 1 if a write failed.
int writeOutputs(pfrt_report *report, const std::string &reportPath,
                 const std::string &profilePath, bool quiet) {
  int rc = 0;
  if (!reportPath.empty() && pfrt_report_write_json(report, reportPath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!profilePath.empty() && pfrt_report_write_profile(report, profilePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!quiet)
    std::fputs(pfrt_report_summary(report), stdout);
  return rc;
}

// --merge: rank parts into one report.
int runMerge(const std::string &programPath, const std::vector<std::string> &parts,
             const std::string &reportPath, const std::string &profilePath, bool quiet) {
  if (parts.empty())
    return usageError("--merge expects the rank parts to merge (run.rank0.json ...)");
  for (const std::string *out : {&reportPath, &profilePath})
    if (!out->empty() && !writable(*out)) {
      std::fprintf(stderr, "pipefill-run: error: %s: cannot be written: %s\n", out->c_str(),
                   std::strerror(errno));
      return 1;
    }
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
  int rc = writeOutputs(report, reportPath, profilePath, quiet);
  pfrt_report_destroy(report);
  return rc;
}

// Rank mode: every rank writes its part next to --report; rank 0 writes the merged report and
// the profile and prints the summary. Returns the exit code.
int writeRankOutputs(pfrt_report *report, const std::string &reportPath,
                     const std::string &profilePath, bool quiet) {
  int32_t rank = -1, world = 0;
  pfrt_report_get_rank(report, &rank, &world);
  int rc = 0;
  if (!reportPath.empty()) {
    const std::string part = rankPartPath(reportPath, rank);
    FILE *f = std::fopen(part.c_str(), "w");
    bool ok = f && std::fputs(pfrt_report_rank_json(report), f) >= 0;
    if (f && std::fclose(f) != 0)
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "pipefill-run: error: rank %d: cannot write %s\n", rank, part.c_str());
      rc = 1;
    }
  }
  if (rank != 0)
    return rc;
  if (!reportPath.empty() && pfrt_report_write_json(report, reportPath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!profilePath.empty() && pfrt_report_write_profile(report, profilePath.c_str()) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    rc = 1;
  }
  if (!quiet)
    std::printf("ranks: %d processes (one per device), merged on rank 0\n%s", world,
                pfrt_report_summary(report));
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  std::string programPath, reportPath, profilePath, checkpointPath;
  pfrt_options options;
  pfrt_options_init(&options);
  bool quiet = false;
  bool profileWithFill = false;
  bool progress = false;
  unsigned long long compare = 0;
  std::string compareJson;
  bool merge = false;
  std::vector<std::string> positional;

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasInlineValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasInlineValue = true;
      }
    }
    auto next = [&](std::string &v) -> bool {
      if (hasInlineValue) {
        v = value;
        return true;
      }
      if (i + 1 >= argc)
        return false;
      v = argv[++i];
      return true;
    };
    auto flagNoValue = [&]() { return !hasInlineValue; };

    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--backend") {
      std::string v;
      if (!next(v))
        return usageError("--backend expects host, cuda or auto");
      if (v == "host")
        options.backend = PFRT_BACKEND_HOST;
      else if (v == "cuda")
        options.backend = PFRT_BACKEND_CUDA;
      else if (v == "auto")
        options.backend = PFRT_BACKEND_AUTO;
      else
        return usageError("unknown backend '" + v + "' (expected host, cuda or auto)");
    } else if (arg == "--iterations") {
      std::string v;
      unsigned long long n = 0;
      if (!next(v) || !parseUnsigned(v, 100000000ull, n) || n == 0)
        return usageError("--iterations expects a positive integer, got '" + v + "'");
      options.iterations = static_cast<uint32_t>(n);
    } else if (arg == "--report") {
      if (!next(reportPath) || reportPath.empty())
        return usageError("--report expects a file name");
    } else if (arg == "--profile-out") {
      if (!next(profilePath) || profilePath.empty())
        return usageError("--profile-out expects a file name");
      options.profile = 1;
      options.enable_fill = 0;
    } else if (arg == "--profile-with-fill") {
      profileWithFill = true;
    } else if (arg == "--no-fill") {
      if (!flagNoValue())
        return usageError("--no-fill takes no value");
      options.enable_fill = 0;
    } else if (arg == "--checkpoint") {
      if (!next(checkpointPath) || checkpointPath.empty())
        return usageError("--checkpoint expects a file name");
    } else if (arg == "--on-bad-checkpoint") {
      std::string v;
      if (!next(v))
        return usageError("--on-bad-checkpoint expects fail, previous or restart");
      if (v == "fail")
        options.checkpoint_recovery = PFRT_CHECKPOINT_FAIL;
      else if (v == "previous")
        options.checkpoint_recovery = PFRT_CHECKPOINT_PREVIOUS;
      else if (v == "restart")
        options.checkpoint_recovery = PFRT_CHECKPOINT_RESTART;
      else
        return usageError("--on-bad-checkpoint expects fail, previous or restart, got '" + v + "'");
    } else if (arg == "--time-scale") {
      std::string v;
      double x = 0;
      if (!next(v) || !parseDouble(v, x) || !(x > 0))
        return usageError("--time-scale expects a number > 0, got '" + v + "'");
      options.time_scale = x;
    } else if (arg == "--stage") {
      std::string v;
      unsigned long long n = 0;
      if (!next(v) || !parseUnsigned(v, 1u << 30, n))
        return usageError("--stage expects a device index, got '" + v + "'");
      options.stage = static_cast<int32_t>(n);
    } else if (arg == "--max-dim") {
      std::string v;
      unsigned long long n = 0;
      if (!next(v) || !parseUnsigned(v, 1u << 20, n))
        return usageError("--max-dim expects a non-negative integer, got '" + v + "'");
      options.max_dim = static_cast<uint32_t>(n);
    } else if (arg == "--time-model") {
      std::string v;
      if (!next(v) || (v != "measured" && v != "modelled"))
        return usageError("--time-model expects measured or modelled, got '" + v + "'");
      options.time_model = v == "measured" ? PFRT_TIME_MEASURED : PFRT_TIME_MODELLED;
    } else if (arg == "--fill-policy") {
      std::string v;
      if (!next(v) || (v != "bounded" && v != "unbounded"))
        return usageError("--fill-policy expects bounded or unbounded, got '" + v + "'");
      options.fill_policy = v == "bounded" ? PFRT_FILL_BOUNDED : PFRT_FILL_UNBOUNDED;
    } else if (arg == "--fill-priority") {
      std::string v;
      if (!next(v) || (v != "idle" && v != "normal"))
        return usageError("--fill-priority expects idle or normal, got '" + v + "'");
      options.fill_idle_priority = v == "idle";
    } else if (arg == "--cpu" || arg == "--device") {
      std::string v;
      unsigned long long n = 0;
      if (!next(v) || !parseUnsigned(v, 1u << 16, n))
        return usageError(arg + " expects a non-negative integer, got '" + v + "'");
      (arg == "--cpu" ? options.cpu : options.gpu) = static_cast<int32_t>(n);
    } else if (arg == "--compare") {
      std::string v;
      if (!next(v) || !parseUnsigned(v, 1000, compare) || compare == 0)
        return usageError("--compare expects a number of ABBA blocks (1-1000), got '" + v + "'");
    } else if (arg == "--compare-json") {
      if (!next(compareJson) || compareJson.empty())
        return usageError("--compare-json expects a file name");
    } else if (arg == "--rank" || arg == "--world") {
      std::string v;
      unsigned long long n = 0;
      if (!next(v) || !parseUnsigned(v, 1u << 20, n) || (arg == "--world" && n == 0))
        return usageError(arg + (arg == "--rank" ? " expects a rank (0, 1, ...), got '"
                                                 : " expects a number of ranks >= 1, got '") +
                          v + "'");
      (arg == "--rank" ? options.rank : options.world) = static_cast<int32_t>(n);
    } else if (arg == "--peer-timeout") {
      std::string v;
      double x = 0;
      if (!next(v) || !parseDouble(v, x) || !(x > 0))
        return usageError("--peer-timeout expects seconds > 0, got '" + v + "'");
      options.peer_timeout_s = x;
    } else if (arg == "--merge") {
      if (!flagNoValue())
        return usageError("--merge takes the parts as arguments: --merge a.json b.json");
      merge = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--progress") {
      if (!flagNoValue())
        return usageError("--progress takes no value");
      progress = true;
    } else if (arg == "--verbose") {
      options.verbose = 1;
    } else if (arg.rfind("-", 0) == 0 && arg != "-") {
      return usageError("unknown option '" + arg + "'");
    } else {
      positional.push_back(arg);
    }
  }
  if (merge) {
    if (options.rank >= 0 || options.world > 0 || compare)
      return usageError("--merge does not run anything: no --rank, --world or --compare");
    // The parts are JSON; a first argument that is not is the program they ran.
    std::string program;
    if (!positional.empty() && positional[0].size() > 5 &&
        positional[0].compare(positional[0].size() - 5, 5, ".json") != 0) {
      program = positional[0];
      positional.erase(positional.begin());
    }
    return runMerge(program, positional, reportPath, profilePath, quiet);
  }
  if (positional.size() > 1)
    return usageError("more than one program given ('" + positional[0] + "' and '" +
                      positional[1] + "')");
  if (!positional.empty())
    programPath = positional[0];
  if (programPath.empty())
    return usageError("no PROGRAM given");
  rankFromLauncher(options);
  const bool rankMode = options.rank >= 0 || options.world > 0;
  if (rankMode && compare)
    return usageError("--compare runs in one process; it does not take --rank/--world or mpirun");
  if (profileWithFill) {
    if (profilePath.empty())
      return usageError("--profile-with-fill needs --profile-out FILE");
    options.profile = 0;
    options.enable_fill = 1;
  }
  if (compare && (!reportPath.empty() || !profilePath.empty() || !checkpointPath.empty() ||
                  !options.enable_fill))
    return usageError("--compare runs the program many times with and without fill; it does not "
                      "take --report, --profile-out, --checkpoint or --no-fill");
  if (!compareJson.empty() && !compare)
    return usageError("--compare-json needs --compare N");
  if (!checkpointPath.empty())
    options.checkpoint_path = checkpointPath.c_str();

  // Output files are checked before the run, so a long run's measurements are never lost to a
  // path that cannot be written.
  for (const std::string *out : {&reportPath, &profilePath})
    if (!out->empty() && !writable(*out)) {
      std::fprintf(stderr, "pipefill-run: error: %s: cannot be written: %s (checked before the run)\n",
                   out->c_str(), std::strerror(errno));
      return 1;
    }
  if (rankMode && options.rank >= 0 && !reportPath.empty()) {
    const std::string part = rankPartPath(reportPath, options.rank);
    if (!writable(part)) {
      std::fprintf(stderr, "pipefill-run: error: %s: cannot be written: %s (checked before the run)\n",
                   part.c_str(), std::strerror(errno));
      return 1;
    }
  }

  pfrt_program *program = nullptr;
  if (pfrt_program_load(programPath.c_str(), &program) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", pfrt_last_error());
    return 1;
  }
  if (compare) {
    pfrt_compare_result result;
    if (pfrt_compare(program, &options, static_cast<uint32_t>(compare), &result) != PFRT_OK) {
      std::fprintf(stderr, "pipefill-run: error: %s: %s\n", programPath.c_str(), pfrt_last_error());
      pfrt_program_destroy(program);
      return 1;
    }
    std::fputs(pfrt_compare_format(&result, 0), stdout);
    int rc = 0;
    if (!compareJson.empty()) {
      if (FILE *f = std::fopen(compareJson.c_str(), "w")) {
        std::fputs(pfrt_compare_format(&result, 1), f);
        rc = std::fclose(f) == 0 ? 0 : 1;
      } else {
        rc = 1;
      }
      if (rc)
        std::fprintf(stderr, "pipefill-run: error: cannot write %s\n", compareJson.c_str());
    }
    pfrt_program_destroy(program);
    return rc;
  }
  Progress progressState;
  progressState.tty = ::isatty(2) != 0;
  if (progress || (progressState.tty && !quiet)) {
    options.progress = printProgress;
    options.progress_user = &progressState;
  }
  if (!rankMode) // the ranks of a run would stop at different iterations
    installStopHandlers();
  pfrt_report *report = nullptr;
  pfrt_status status = pfrt_run(program, &options, &report);
  if (status != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s: %s\n", programPath.c_str(), pfrt_last_error());
    pfrt_program_destroy(program);
    return 1;
  }
  if (rankMode) {
    int rc = writeRankOutputs(report, reportPath, profilePath, quiet);
    pfrt_report_destroy(report);
    pfrt_program_destroy(program);
    return rc;
  }
  int rc = writeOutputs(report, reportPath, profilePath, quiet);
  if (int stopRc = stopExitCode(report, checkpointPath))
    rc = rc ? rc : stopRc;
  pfrt_report_destroy(report);
  pfrt_program_destroy(program);
  return rc;
}
