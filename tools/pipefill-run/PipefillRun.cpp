// pipefill-run: loads a StreamProgram (binary or text protobuf), runs it on the host or CUDA
// backend through the runtime's C API and writes the run report / measured profile. The command
// line is read by RunArgs.cpp, the outputs are written by RunOutputs.cpp.
#include "tools/pipefill-run/RunArgs.h"

#include <csignal>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

using namespace pipefill::run;

namespace {

// --- Progress line and clean stop (SIGINT/SIGTERM/SIGUSR1) -----------------------------------

struct Progress {
  bool tty = false;       // stderr is a terminal: one line rewritten in place
  double lastPrintS = -1; // elapsed seconds of the last line printed
  // --compare: the runs (2 + 4N, each calls back from iteration 1), the current one, its last
  // iteration seen, and the seconds of the runs before it.
  uint32_t runs = 0, run = 0, lastDone = 0;
  double doneS = 0, lastElapsedS = 0;
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

// pfrt_progress_fn for --compare: which of the runs (A/A pair, then A B B A blocks), its
// iteration, and the comparison's elapsed time; at most one line a second, plus the last one.
void printCompareProgress(void *user, uint32_t done, uint32_t total, double elapsedS) {
  Progress &p = *static_cast<Progress *>(user);
  if (p.run == 0 || done <= p.lastDone) { // a run begins
    p.doneS += p.run ? p.lastElapsedS : 0;
    ++p.run;
  }
  p.lastDone = done;
  p.lastElapsedS = elapsedS;
  const bool last = p.run == p.runs && done == total;
  const double allS = p.doneS + elapsedS;
  if (!last && p.lastPrintS >= 0 && allS - p.lastPrintS < 1.0)
    return;
  p.lastPrintS = allS;
  const uint32_t k = p.run - 1; // A A (A B B A)...
  const bool b = k >= 2 && ((k - 2) % 4 == 1 || (k - 2) % 4 == 2);
  std::fprintf(stderr, "%spipefill-run --compare: run %u/%u (%s), iteration %u/%u, elapsed %s%s",
               p.tty ? "\r" : "", p.run, p.runs, b ? "B, with fill" : "A, main only", done,
               total, formatSeconds(allS).c_str(), p.tty ? (last ? "\n" : "\033[K") : "\n");
  std::fflush(stderr);
}

volatile std::sig_atomic_t gStopSignal = 0;

void onStopSignal(int sig) {
  gStopSignal = sig;
  pfrt_stop_request();
  const char msg[] = "\npipefill-run: stopping at the next iteration boundary (again to kill)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}

// SIGINT/SIGTERM/SIGUSR1 ask the runtime to stop cleanly; a second one kills (SA_RESETHAND).
// SIGUSR1: what mpirun forwards to every rank (it turns its own SIGINT/SIGTERM into killing the
// job) and what batch schedulers send ahead of a time limit (Slurm's --signal=USR1@SECONDS).
void installStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
}

// When pfrt_run has returned there is no iteration boundary left to stop at: a signal while a
// failed rank waits for MPI to abort the job (mpirun sends SIGTERM to every rank) or while a rank
// waits for its peers at exit takes its default action, without the stop message.
void restoreDefaultSignals() {
  for (int sig : {SIGINT, SIGTERM, SIGUSR1})
    ::signal(sig, SIG_DFL);
}

const char *stopSignalName(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
}

// After the run: exit code 128 + signal when a stop signal cut the run short, else 0.
int stopExitCode(const pfrt_report *report, const std::string &checkpointPath) {
  if (!pfrt_report_incomplete(report))
    return 0;
  pfrt_report_stats stats;
  pfrt_report_get_stats(report, &stats);
  // No signal of our own: another rank's stop request, which the ranks agreed on.
  const int sig = gStopSignal ? static_cast<int>(gStopSignal) : SIGTERM;
  std::fprintf(stderr,
               "pipefill-run: stopped by %s after %u iteration(s) (through iteration %u); the "
               "report is marked incomplete%s\n",
               gStopSignal ? stopSignalName(sig) : "another rank's stop signal",
               stats.iterations,
               stats.first_iteration + stats.iterations,
               checkpointPath.empty() ? "" : "; the checkpoint is written: rerun to resume");
  return 128 + sig;
}

// Runs the loaded program (progress line, stop handlers) and writes its outputs; the exit code.
int runProgram(pfrt_program *program, RunArgs &args) {
  Progress progressState;
  progressState.tty = ::isatty(2) != 0;
  if (args.progress || (progressState.tty && !args.quiet)) {
    args.options.progress = printProgress;
    args.options.progress_user = &progressState;
  }
  installStopHandlers(); // ranks agree on where to stop (a vote per iteration)
  if (args.rankMode() && !args.reportPath.empty()) {
    args.options.rank_part = writeRankPart;
    args.options.rank_part_user = &args;
  }
  pfrt_report *report = nullptr;
  pfrt_status status = pfrt_run(program, &args.options, &report);
  if (status != PFRT_OK) {
    restoreDefaultSignals();
    std::fprintf(stderr, "pipefill-run: error: %s: %s\n", args.programPath.c_str(),
                 runtimeError().c_str());
    return 1;
  }
  int rc = args.rankMode() ? writeRankOutputs(report, args) : writeOutputs(report, args);
  if (int stopRc = stopExitCode(report, args.checkpointPath))
    rc = rc ? rc : stopRc;
  pfrt_report_destroy(report);
  restoreDefaultSignals();
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  RunArgs args;
  if (int rc = parseRunArgs(argc, argv, args); rc != kContinue)
    return rc;
  if (args.merge)
    return runMerge(args);
  if (int rc = finishRunArgs(args); rc != kContinue)
    return rc;
  if (int rc = checkOutputsWritable(args); rc != kContinue)
    return rc;
  pfrt_program *program = nullptr;
  if (pfrt_program_load(args.programPath.c_str(), &program) != PFRT_OK) {
    std::fprintf(stderr, "pipefill-run: error: %s\n", runtimeError().c_str());
    return 1;
  }
  int rc = 0;
  Progress compareProgress;
  if (args.compare) {
    compareProgress.tty = ::isatty(2) != 0;
    compareProgress.runs = static_cast<uint32_t>(2 + 4 * args.compare);
    if (args.progress || (compareProgress.tty && !args.quiet)) {
      args.options.progress = printCompareProgress;
      args.options.progress_user = &compareProgress;
    }
    // A signal ends the comparison after the run in progress; the blocks completed before it
    // are printed, marked incomplete (the cut block is left out).
    installStopHandlers();
    rc = runCompare(program, args);
    restoreDefaultSignals();
    if (gStopSignal && rc == 0) {
      std::fflush(stdout); // the table first
      std::fprintf(stderr, "pipefill-run --compare: stopped by %s\n",
                   stopSignalName(gStopSignal));
      rc = 128 + static_cast<int>(gStopSignal);
    }
  } else {
    rc = runProgram(program, args);
  }
  pfrt_program_destroy(program);
  return rc;
}
