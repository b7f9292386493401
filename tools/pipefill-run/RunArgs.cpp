//===- RunArgs.cpp - pipefill-run's command line ---------------------------===//
//
// The usage text, the option parser (one function per group of options) and
// the checks of option combinations.
//
//===----------------------------------------------------------------------===//

#include "tools/pipefill-run/RunArgs.h"
#include "tools/pipefill-run/ArgCursor.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <initializer_list>
#include <string>
#include <unistd.h>

namespace pipefill::run {
namespace {

/// "got 'x'" for a bad value, or what is wrong when there was none (an option last on the line).
std::string got(const std::string &v) {
  return v.empty() ? "but no value was given" : "got '" + v + "'";
}

/// Not an option of the group asked (parse*Option below).
constexpr int kNotMine = -2;


/// How the program runs: backend, iterations, time model, fill policy,
/// placement and rank mode. kContinue, kNotMine or the exit code.
int parseRunOption(ArgCursor &c, pfrt_options &options) {
  const std::string &arg = c.name();
  std::string v;
  unsigned long long n = 0;
  double x = 0;
  if (arg == "--backend") {
    if (!c.next(v))
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
    if (!c.nextUnsigned(100000000ull, v, n) || n == 0)
      return usageError("--iterations expects a positive integer, " + got(v));
    options.iterations = static_cast<uint32_t>(n);
  } else if (arg == "--time-scale") {
    if (!c.nextPositive(v, x) || x < PFRT_MIN_TIME_SCALE || x > PFRT_MAX_TIME_SCALE)
      return usageError("--time-scale expects a number from 0.0001 to 1000, " + got(v));
    options.time_scale = x;
  } else if (arg == "--stage") {
    if (!c.nextUnsigned(1u << 30, v, n))
      return usageError("--stage expects a device index, " + got(v));
    options.stage = static_cast<int32_t>(n);
  } else if (arg == "--max-dim") {
    if (!c.nextUnsigned(1u << 20, v, n))
      return usageError("--max-dim expects a non-negative integer, " + got(v));
    options.max_dim = static_cast<uint32_t>(n);
  } else if (arg == "--time-model") {
    if (!c.nextChoice(v, {"measured", "modelled"}))
      return usageError("--time-model expects measured or modelled, " + got(v));
    options.time_model = v == "measured" ? PFRT_TIME_MEASURED : PFRT_TIME_MODELLED;
  } else if (arg == "--fill-policy") {
    if (!c.nextChoice(v, {"bounded", "whole", "unbounded"}))
      return usageError("--fill-policy expects bounded, whole or unbounded, " + got(v));
    options.fill_policy = v == "bounded" ? PFRT_FILL_BOUNDED
                          : v == "whole" ? PFRT_FILL_BOUNDED_WHOLE
                                         : PFRT_FILL_UNBOUNDED;
  } else if (arg == "--fill-priority") {
    if (!c.nextChoice(v, {"idle", "normal"}))
      return usageError("--fill-priority expects idle or normal, " + got(v));
    options.fill_idle_priority = v == "idle";
  } else if (arg == "--cpu" || arg == "--fill-cpu" || arg == "--device") {
    if (!c.nextUnsigned(1u << 16, v, n))
      return usageError(arg + " expects a non-negative integer, " + got(v));
    // In this tool's words (the runtime's check says pfrt_options.cpu may be -1, not an option).
    const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    if (arg != "--device" && cpus > 0 && n >= static_cast<unsigned long long>(cpus))
      return usageError(arg + " expects a CPU of this machine (0 to " + std::to_string(cpus - 1) +
                        "), got '" + v + "'");
    (arg == "--cpu" ? options.cpu : arg == "--fill-cpu" ? options.fill_cpu : options.gpu) =
        static_cast<int32_t>(n);
  } else if (arg == "--rank" || arg == "--world") {
    if (!c.nextUnsigned(1u << 20, v, n) || (arg == "--world" && n == 0))
      return usageError(arg + (arg == "--rank" ? " expects a rank (0, 1, ...), got '"
                                               : " expects a number of ranks >= 1, got '") +
                        v + "'");
    (arg == "--rank" ? options.rank : options.world) = static_cast<int32_t>(n);
  } else if (arg == "--peer-timeout") {
    if (!c.nextPositive(v, x) || x > 1e6)
      return usageError("--peer-timeout expects seconds > 0 and <= 1000000, " + got(v));
    options.peer_timeout_s = x;
  } else if (arg == "--rank-transfer") {
    if (!c.nextChoice(v, {"auto", "nccl", "modelled"}))
      return usageError("--rank-transfer expects auto, nccl or modelled, " + got(v));
    options.rank_transfer = v == "nccl"       ? PFRT_RANK_TRANSFER_NCCL
                            : v == "modelled" ? PFRT_RANK_TRANSFER_MODELLED
                                              : PFRT_RANK_TRANSFER_AUTO;
  } else if (arg == "--verbose") {
    if (!c.noValue())
      return usageError("--verbose takes no value");
    options.verbose = 1;
  } else {
    return kNotMine;
  }
  return kContinue;
}

/// What the run writes and which mode it is in: report, profile, checkpoint,
/// comparison, merge, progress. kContinue, kNotMine or the exit code.
int parseOutputOption(ArgCursor &c, RunArgs &a) {
  const std::string &arg = c.name();
  pfrt_options &options = a.options;
  if (arg == "--report") {
    if (!c.next(a.reportPath) || a.reportPath.empty())
      return usageError("--report expects a file name");
  } else if (arg == "--trace") {
    if (!c.next(a.tracePath) || a.tracePath.empty())
      return usageError("--trace expects a file name");
  } else if (arg == "--profile-out") {
    if (!c.next(a.profilePath) || a.profilePath.empty())
      return usageError("--profile-out expects a file name");
    options.profile = 1;
    options.enable_fill = 0;
  } else if (arg == "--profile-with-fill") {
    if (!c.noValue())
      return usageError("--profile-with-fill takes no value");
    a.profileWithFill = true;
  } else if (arg == "--no-fill") {
    if (!c.noValue())
      return usageError("--no-fill takes no value");
    a.noFill = true;
    options.enable_fill = 0;
  } else if (arg == "--checkpoint") {
    if (!c.next(a.checkpointPath) || a.checkpointPath.empty())
      return usageError("--checkpoint expects a file name");
  } else if (arg == "--on-bad-checkpoint") {
    std::string v;
    if (!c.next(v))
      return usageError("--on-bad-checkpoint expects fail, previous or restart");
    if (v == "fail")
      options.checkpoint_recovery = PFRT_CHECKPOINT_FAIL;
    else if (v == "previous")
      options.checkpoint_recovery = PFRT_CHECKPOINT_PREVIOUS;
    else if (v == "restart")
      options.checkpoint_recovery = PFRT_CHECKPOINT_RESTART;
    else
      return usageError("--on-bad-checkpoint expects fail, previous or restart, " + got(v));
  } else if (arg == "--compare") {
    std::string v;
    if (!c.nextUnsigned(PFRT_COMPARE_MAX_REPETITIONS, v, a.compare) || a.compare == 0)
      return usageError("--compare expects a number of ABBA blocks (1-1000), " + got(v));
  } else if (arg == "--compare-json") {
    if (!c.next(a.compareJson) || a.compareJson.empty())
      return usageError("--compare-json expects a file name");
  } else if (arg == "--merge") {
    if (!c.noValue())
      return usageError("--merge takes the parts as arguments: --merge a.json b.json");
    a.merge = true;
  } else if (arg == "--quiet") {
    if (!c.noValue())
      return usageError("--quiet takes no value");
    a.quiet = true;
  } else if (arg == "--progress") {
    if (!c.noValue())
      return usageError("--progress takes no value");
    a.progress = true;
  } else {
    return kNotMine;
  }
  return kContinue;
}

// Where rankFromLauncher found the world ("OMPI_COMM_WORLD_SIZE=4"), for runtimeError.
std::string gWorldFromEnv;

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
        gWorldFromEnv = std::string(p[1]) + "=" + w;
      }
      return;
    }
  }
}

} // namespace

std::string runtimeError() {
  std::string error = pfrt_last_error();
  for (auto [field, flag] : {std::pair<const char *, const char *>{
                                 "checkpoint_recovery PFRT_CHECKPOINT_PREVIOUS or "
                                 "PFRT_CHECKPOINT_RESTART",
                                 "--on-bad-checkpoint previous|restart"},
                             {"run with max_dim ", "run with --max-dim "}})
    if (const size_t at = error.find(field); at != std::string::npos)
      error.replace(at, std::strlen(field), flag);
  // Nobody passed --world: a launcher's variable did, perhaps one left in the environment.
  if (!gWorldFromEnv.empty() && error.find(" was asked for but MPI_COMM_WORLD has ") !=
                                    std::string::npos)
    error += " (the world came from " + gWorldFromEnv +
             " in pipefill-run's environment, which a launcher sets; unset it for a run "
             "without mpirun)";
  return error;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "pipefill-run: error: %s\n%s", message.c_str(),
               "run 'pipefill-run --help' for usage\n");
  return 2;
}

int parseRunArgs(int argc, char **argv, RunArgs &args) {
  for (int i = 1; i < argc; ++i) {
    ArgCursor c(argc, argv, i);
    const std::string &arg = c.name();
    if (arg == "--help" || arg == "-h") {
      std::fputs(kRunUsage, stdout);
      return 0;
    }
    int rc = parseRunOption(c, args.options);
    if (rc == kNotMine)
      rc = parseOutputOption(c, args);
    if (rc != kNotMine)
      args.given.push_back(arg);
    if (rc == kNotMine) {
      if (arg.rfind("-", 0) == 0 && arg != "-")
        return usageError("unknown option '" + arg + "'");
      args.positional.push_back(arg);
      rc = kContinue;
    }
    if (rc != kContinue)
      return rc;
  }
  return kContinue;
}

int finishRunArgs(RunArgs &args) {
  const std::vector<std::string> &positional = args.positional;
  pfrt_options &options = args.options;
  if (positional.size() > 1)
    return usageError("more than one program given ('" + positional[0] + "' and '" +
                      positional[1] + "')");
  if (!positional.empty())
    args.programPath = positional[0];
  if (args.programPath.empty())
    return usageError("no PROGRAM given");
  rankFromLauncher(options);
  if (args.profileWithFill) {
    if (args.profilePath.empty())
      return usageError("--profile-with-fill needs --profile-out FILE");
    if (args.noFill)
      return usageError("--profile-with-fill runs with fill; it does not take --no-fill");
    options.profile = 0;
    options.enable_fill = 1;
  }
  if (args.compare && (!args.reportPath.empty() || !args.profilePath.empty() ||
                       !args.tracePath.empty() || !args.checkpointPath.empty() ||
                       !options.enable_fill))
    return usageError("--compare runs the program many times with and without fill; it does not "
                      "take --report, --profile-out, --trace, --checkpoint or --no-fill");
  if (!args.compareJson.empty() && !args.compare)
    return usageError("--compare-json needs --compare N");
  // Caught by the runtime too, as errors of the run (exit 1) in pfrt_options' words; these are
  // the command line's.
  if (args.compare && options.fill_cpu >= 0)
    return usageError("--compare measures main and fill contending for one core: it does not "
                      "take --fill-cpu");
  if (args.rankMode() && options.stage >= 0)
    return usageError("--stage replays one device in one process; with ranks every process "
                      "runs its own device: not both");
  if (options.checkpoint_recovery != PFRT_CHECKPOINT_FAIL && args.checkpointPath.empty())
    return usageError("--on-bad-checkpoint says what to do with a bad --checkpoint FILE; no "
                      "--checkpoint was given");
  if (!args.checkpointPath.empty())
    options.checkpoint_path = args.checkpointPath.c_str();
  return kContinue;
}

} // namespace pipefill::run
