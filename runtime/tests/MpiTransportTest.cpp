// The MPI transport's collectives under mpirun (ctest mpi.transport, 3 ranks): gather (rank 0
// gets every rank's bytes, in rank order) and allGather (every rank does), with parts of different
// sizes, an empty one and bytes that are not text; then again in rounds of 16 bytes per rank (a
// long run's parts pass MPI's 2 GiB int counts and go in rounds of 64 MiB), so parts end inside,
// at and after a round. allGather is what the NCCL setup exchanges its
// communicator ids with, which otherwise runs only on machines with two GPUs. Then the stop votes,
// and a gather that rank 0 gives up at its peer timeout and the others complete later (under
// AddressSanitizer, scripts/sanitize.sh, a write into the buffers it gave up is a failure).
#include "runtime/Transport.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string partOf(int rank) {
  std::string s; // rank 0: empty; others: a length and contents that depend on the rank
  for (int i = 0; i < 37 * rank; ++i)
    s.push_back(static_cast<char>((rank * 31 + i * 7) & 0xff));
  return s;
}

int failures = 0;

void check(bool ok, int rank, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
    ++failures;
  }
}

void checkParts(const std::vector<std::string> &got, int world, int rank, const char *call) {
  check(static_cast<int>(got.size()) == world, rank,
        std::string(call) + ": " + std::to_string(got.size()) + " parts for " +
            std::to_string(world) + " ranks");
  for (int r = 0; r < world && r < static_cast<int>(got.size()); ++r)
    check(got[static_cast<size_t>(r)] == partOf(r), rank,
          std::string(call) + ": part of rank " + std::to_string(r) + " differs");
}

// The stop votes (Executor::agreedStopBefore): a round's result is the OR of every rank's vote.
// Rank r votes to stop in round 2 + r only, and the last rank also in round 9: the results are
// true exactly in rounds 2 .. world + 1 and 9. All rounds are posted before any is read (many
// outstanding), an allGather runs in between (the votes have their own communicator), and the
// last two rounds are left for finish() to complete.
void checkVotes(pfrt::Transport &t, int rank, int world) {
  const int rounds = 12;
  for (int k = 0; k < rounds; ++k)
    t.postVote(k, k == 2 + rank || (rank == world - 1 && k == 9));
  checkParts(t.allGather(partOf(rank)), world, rank, "allGather between votes");
  std::atomic<bool> abort{false};
  for (int k = 0; k < rounds - 2; ++k) {
    bool stop = false;
    const bool done = t.voteResult(k, stop, abort);
    const bool want = (k >= 2 && k <= world + 1) || k == 9;
    check(done && stop == want, rank,
          "vote of round " + std::to_string(k) + ": " + (stop ? "stop" : "go on") + ", want " +
              (want ? "stop" : "go on"));
  }
  t.finish();
}

// Rank 0 gives its gather up after 0.2 s (the others start it 1 s late) and goes on to an
// allGather on `t`, whose polling is MPI progress: the late ranks complete the collective rank 0
// gave up, into its size buffer. That buffer must still be alive (MpiTransport's abandon); it was
// on rank 0's stack.
void checkGatherGivenUp(pfrt::Transport &t, int rank, int world) {
  std::unique_ptr<pfrt::Transport> quick = pfrt::createMpiTransport(-1, -1, 0.2);
  if (rank != 0)
    std::this_thread::sleep_for(std::chrono::seconds(1));
  bool timedOut = false;
  try {
    quick->gather(partOf(rank));
  } catch (const pfrt::Error &e) {
    timedOut = std::string(e.what()).find("timed out after 0.2 s") != std::string::npos;
    check(timedOut, rank, std::string("gather given up: ") + e.what());
  }
  check(rank != 0 || timedOut, rank, "rank 0's gather did not time out");
  quick.reset();
  checkParts(t.allGather(partOf(rank)), world, rank, "allGather after a gather given up");
  t.barrier();
}

} // namespace

int main() {
  try {
    std::unique_ptr<pfrt::Transport> t = pfrt::createMpiTransport(-1, -1, 60.0);
    const int rank = t->rank(), world = t->world();
    check(world >= 2, rank, "needs at least 2 ranks (mpirun -n 3)");
    t->barrier();
    std::vector<std::string> gathered = t->gather(partOf(rank));
    if (rank == 0)
      checkParts(gathered, world, rank, "gather");
    else
      check(gathered.empty(), rank, "gather: a rank other than 0 got parts");
    checkParts(t->allGather(partOf(rank)), world, rank, "allGather");
    // Twice: collectives in a row must not mix their messages.
    checkParts(t->allGather(partOf(rank)), world, rank, "second allGather");
    // Parts of 0, 37 and 74 bytes in rounds of 16 and of 37 bytes (3 and 2 rounds).
    for (uint64_t chunk : {16u, 37u}) {
      pfrt::mpiSetGatherChunkForTesting(chunk);
      const std::string how = " in rounds of " + std::to_string(chunk) + " bytes";
      gathered = t->gather(partOf(rank));
      if (rank == 0)
        checkParts(gathered, world, rank, ("gather" + how).c_str());
      else
        check(gathered.empty(), rank, "gather" + how + ": a rank other than 0 got parts");
      checkParts(t->allGather(partOf(rank)), world, rank, ("allGather" + how).c_str());
    }
    pfrt::mpiSetGatherChunkForTesting(0);
    checkVotes(*t, rank, world);
    checkGatherGivenUp(*t, rank, world);
    std::printf("rank %d of %d: %s\n", rank, world, failures ? "FAILED" : "ok");
    if (failures)
      pfrt::mpiMarkFailed();
    return failures ? 1 : 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    pfrt::mpiMarkFailed();
    return 1;
  }
}
