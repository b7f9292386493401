// Rank mode's process-wide MPI pieces, shared by the MPI transport (MpiTransport.cpp) and the
// ranks' exit (MpiExit.cpp): the lock every MPI call of the runtime takes, the deadline for MPI
// calls that cannot be made nonblocking (MPI_Init, MPI_Finalize), and the heartbeats that bound
// the ranks' meeting at exit (docs/runtime.md, §5b "Ranks as processes").
//
// The exit: every rank's part is written before the final gather; after it rank 0 merges and
// writes the report (minutes for a long run) and no rank may exit before every rank is done
// (mpirun ends the whole job when one rank exits with a non-zero code, as a stopped run does).
// From the final gather on, each rank sends a heartbeat once a second on a communicator of its
// own: rank 0 to every rank, the others to rank 0. At exit the others tell rank 0 they are done
// and wait for its release; rank 0 waits for every rank's "done", then releases them. A waiter
// fails when it hears nothing (heartbeat, done or release) from the rank it waits for within the
// limit (no rank passes the final gather, whose first step is an allgather of the part sizes,
// before rank 0 has ended its run and started its heartbeats): a process that is stopped, killed
// or frozen sends nothing. A process whose main thread is stuck while its heartbeat thread runs
// is alive to its peers: that wait is not bounded.
#ifndef PFRT_MPIEXIT_H
#define PFRT_MPIEXIT_H

// The C API only (Open MPI would pull in its deprecated C++ bindings otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <functional>
#include <mutex>
#include <string>

namespace pfrt {

// MPI_Init, the ranks' meeting at exit and MPI_Finalize wait the peer timeout, but at least this
// long: they come before any output (MPI_Init) or after all of them (exit), and a small
// --peer-timeout must not fail a run whose outputs are written because a busy machine delayed a
// rank by a second.
constexpr double kMpiExitFloorS = 5;

// The lock every MPI call of the runtime takes (the transport needs MPI_THREAD_SERIALIZED only).
std::mutex &mpiLock();
// MPI's text for an error code.
std::string mpiError(int code);
// A time as printed: 0.5 s is not "0 s".
std::string mpiSeconds(double s);

// Runs `call`, a blocking MPI call that takes no time limit of its own; if it has not returned
// after `limitS` seconds, prints "pipefill-run: `message`" and ends the process with exit status 1
// at once (_exit: the call holds MPI's state, and exit handlers would call into MPI again). mpirun
// then ends the job, the hung peer included. Returns the call's result.
int mpiUnderDeadline(double limitS, const std::string &message, const std::function<int()> &call);

// The ranks' exit (see above). mpiExitSetup: the communicator of heartbeats (made once per
// process, MPI_ERRORS_RETURN) and the rank's limit. mpiExitHeartbeatStart: from a run's final
// gather on (idempotent; a no-op before mpiExitSetup). mpiExitHeartbeatStop: a next run starts,
// or the process aborts. mpiExitTogether: at exit (MPI initialised by the runtime, no failure);
// returns when every rank is done, or ends the process with exit status 1 and a message naming
// the rank that went silent.
void mpiExitSetup(MPI_Comm comm, double limitS);
void mpiExitHeartbeatStart();
void mpiExitHeartbeatStop();
void mpiExitTogether();

} // namespace pfrt

#endif // PFRT_MPIEXIT_H
