/* A fault injector for rank-mode tests (test/runtime/rank_faults_test.py), loaded into each rank
 * with mpirun -x LD_PRELOAD=libpfrt-fault-shim.so. On rank FAULT_RANK it signals its own process
 * (FAULT_SIG: STOP, the default, KILL, USR1 or TERM) at the FAULT_NTH (default 1) call of the
 * function FAULT_AT, FAULT_WHEN=before (default) or after the real call. MPI_Ibarrier call 1 is
 * pipefill-run's start barrier, call 2 its exit barrier. FAULT_PIDS names a file to which the
 * signalled process appends its pid (the test kills stopped processes it finds there). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int counts[16];

static void maybe(const char *fn, int idx, const char *when) {
  const char *r = getenv("FAULT_RANK"), *me = getenv("OMPI_COMM_WORLD_RANK");
  const char *at = getenv("FAULT_AT"), *w = getenv("FAULT_WHEN"), *n = getenv("FAULT_NTH");
  const char *s = getenv("FAULT_SIG"), *pids = getenv("FAULT_PIDS");
  if (!r || !me || !at || atoi(r) != atoi(me) || strcmp(at, fn) != 0)
    return;
  if (strcmp(w ? w : "before", when) != 0)
    return;
  if (++counts[idx] != (n ? atoi(n) : 1))
    return;
  int sig = SIGSTOP;
  if (s && !strcmp(s, "KILL"))
    sig = SIGKILL;
  else if (s && !strcmp(s, "USR1"))
    sig = SIGUSR1;
  else if (s && !strcmp(s, "TERM"))
    sig = SIGTERM;
  fprintf(stderr, "FAULT: rank %s pid %d signal %d %s %s call %d\n", me, (int)getpid(), sig, when,
          fn, counts[idx]);
  fflush(stderr);
  if (pids) {
    FILE *f = fopen(pids, "a");
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
  }
  kill(getpid(), sig);
}

#define WRAP(idx, name, params, args)                                                              \
  int name params {                                                                                \
    maybe(#name, idx, "before");                                                                   \
    int rc = P##name args;                                                                         \
    maybe(#name, idx, "after");                                                                    \
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

int rename(const char *a, const char *b) {
  static int (*real)(const char *, const char *);
  maybe("rename", 7, "before");
  if (!real)
    real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int rc = real(a, b);
  maybe("rename", 7, "after");
  return rc;
}
