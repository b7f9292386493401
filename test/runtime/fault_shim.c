/* A fault injector for rank-mode tests (test/runtime/rank_faults_test.py), loaded into each rank
 * with mpirun -x LD_PRELOAD=libpfrt-fault-shim.so. On rank FAULT_RANK it acts at the FAULT_NTH
 * (default 1) call of the function FAULT_AT, FAULT_WHEN=before (default) or after the real call.
 * FAULT_SIG says how:
 *   STOP (default), KILL, USR1, TERM: the process signals itself (STOP freezes every thread);
 *   ERR: the call fails (returns MPI_ERR_OTHER without calling MPI) from the N-th call on;
 *   DELAY: the call is delayed by FAULT_DELAY_S seconds (default 1).
 * The rank is FAULT_RANK of OMPI_COMM_WORLD_RANK, which mpirun sets before MPI_Init. MPI_Finalized
 * call 1 is where pipefill-run's exit begins (before the ranks meet at exit); rename call 1 on a
 * rank is its part (--report), call 2 on rank 0 the merged report. FAULT_PIDS names a file to
 * which a signalled process appends its pid (the test kills stopped processes it finds there). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int counts[16];

/* 0: nothing happens; 1: the call goes on (after a signal or a delay); -1: the call fails. */
static int maybe(const char *fn, int idx, const char *when) {
  static int active = -1;
  static const char *at, *w, *n, *s, *pids, *me, *delay;
  if (active < 0) {
    const char *r = getenv("FAULT_RANK");
    me = getenv("OMPI_COMM_WORLD_RANK");
    at = getenv("FAULT_AT");
    w = getenv("FAULT_WHEN");
    n = getenv("FAULT_NTH");
    s = getenv("FAULT_SIG");
    pids = getenv("FAULT_PIDS");
    delay = getenv("FAULT_DELAY_S");
    active = r && me && at && atoi(r) == atoi(me);
  }
  if (!active || strcmp(at, fn) != 0 || strcmp(w ? w : "before", when) != 0)
    return 0;
  const int nth = n ? atoi(n) : 1;
  const int err = s && !strcmp(s, "ERR");
  if (counts[idx] < nth)
    ++counts[idx];
  if (counts[idx] != nth)
    return 0;
  if (err) {
    static int said;
    if (!said++) {
      fprintf(stderr, "FAULT: rank %s pid %d fails %s from call %d on\n", me, (int)getpid(), fn,
              nth);
      fflush(stderr);
    }
    return -1;
  }
  ++counts[idx]; /* once */
  if (s && !strcmp(s, "DELAY")) {
    const double secs = delay ? atof(delay) : 1.0;
    fprintf(stderr, "FAULT: rank %s pid %d delays %s %s call %d by %g s\n", me, (int)getpid(),
            when, fn, nth, secs);
    fflush(stderr);
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    return 1;
  }
  int sig = SIGSTOP;
  if (s && !strcmp(s, "KILL"))
    sig = SIGKILL;
  else if (s && !strcmp(s, "USR1"))
    sig = SIGUSR1;
  else if (s && !strcmp(s, "TERM"))
    sig = SIGTERM;
  fprintf(stderr, "FAULT: rank %s pid %d signal %d %s %s call %d\n", me, (int)getpid(), sig, when,
          fn, nth);
  fflush(stderr);
  if (pids) {
    FILE *f = fopen(pids, "a");
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
  }
  kill(getpid(), sig);
  return 1;
}

#define WRAP(idx, name, params, args)                                                              \
  int name params {                                                                                \
    if (maybe(#name, idx, "before") < 0)                                                           \
      return MPI_ERR_OTHER;                                                                        \
    int rc = P##name args;                                                                         \
    if (maybe(#name, idx, "after") < 0)                                                            \
      return MPI_ERR_OTHER;                                                                        \
    return rc;                                                                                     \
  }
WRAP(0, MPI_Init_thread, (int *a, char ***b, int c, int *d), (a, b, c, d))
WRAP(1, MPI_Comm_dup, (MPI_Comm c, MPI_Comm *n), (c, n))
WRAP(2, MPI_Comm_idup, (MPI_Comm c, MPI_Comm *n, MPI_Request *r), (c, n, r))
WRAP(3, MPI_Ibarrier, (MPI_Comm c, MPI_Request *r), (c, r))
WRAP(4, MPI_Iallgather,
     (const void *a, int b, MPI_Datatype c, void *d, int e, MPI_Datatype f, MPI_Comm g,
      MPI_Request *h),
     (a, b, c, d, e, f, g, h))
WRAP(5, MPI_Igatherv,
     (const void *a, int b, MPI_Datatype c, void *d, const int e[], const int f[], MPI_Datatype g,
      int root, MPI_Comm h, MPI_Request *i),
     (a, b, c, d, e, f, g, root, h, i))
WRAP(6, MPI_Finalize, (void), ())
WRAP(8, MPI_Finalized, (int *f), (f))
WRAP(9, MPI_Test, (MPI_Request *r, int *f, MPI_Status *s), (r, f, s))

int rename(const char *a, const char *b) {
  static int (*real)(const char *, const char *);
  maybe("rename", 7, "before");
  if (!real)
    real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int rc = real(a, b);
  maybe("rename", 7, "after");
  return rc;
}
