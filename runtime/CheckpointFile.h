// Crash-safe checkpoint files: what is on disk is always one complete checkpoint of this program,
// or the reader says exactly why not.
//
// Layout: magic "PFCKPT" 0x00 0x01 | u64 program fingerprint | u64 payload size | u64 FNV-1a 64 of
// the payload | payload (FillCheckpoint protobuf), integers little-endian.
// Writing: a unique temp file in the checkpoint's directory, every write and the close checked,
// fsync, the previous checkpoint kept as PATH.prev (hard link), rename over PATH, directory fsync.
// A SIGKILL or a full disk at any point leaves PATH as the last complete checkpoint.
#ifndef PFRT_CHECKPOINT_FILE_H
#define PFRT_CHECKPOINT_FILE_H

#include "runtime/Workload.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill::rt {
class FillCheckpoint;
class InFlightBatch;
}

namespace pfrt {

// Writes `cp` to `path` as described above; throws Error(PFRT_ERROR_IO) naming the failing step.
void writeCheckpointFile(const std::string &path, const pipefill::rt::FillCheckpoint &cp,
                         uint64_t fingerprint);

// Foreign: intact, but written for another program.
enum class CheckpointStatus { Ok, Missing, Bad, Foreign };

// Reads and checks a checkpoint: header, size, checksum, program identity, the documented
// limits of every field. On Bad, `problem` says what is wrong (no exception).
CheckpointStatus readCheckpointFile(const std::string &path, uint64_t fingerprint,
                                    pipefill::rt::FillCheckpoint &cp, std::string &problem);

// The same on the bytes of a checkpoint file (`path` only names it in messages).
CheckpointStatus parseCheckpointData(const std::string &data, const std::string &path,
                                     uint64_t fingerprint, pipefill::rt::FillCheckpoint &cp,
                                     std::string &problem);

// Checks an in-flight batch against the job's shape (tensor count and every tensor's size for
// the pass it is at) so that no kernel ever reads past a restored buffer. Empty when it fits.
std::string checkInFlightShape(const JobShape &shape, const pipefill::rt::InFlightBatch &b);

// Checks that `path` can be written (creating and removing it when it does not exist), before a
// run starts; throws Error(PFRT_ERROR_IO) naming `what` and the reason.
void checkOutputPath(const std::string &path, const std::string &what);

// Refuses a checkpoint path whose files belong to the other way of running, where the run would
// start at iteration 0 and drop the progress they hold: a rank's run (`rank` >= 0) whose
// BASE.rankR is missing while BASE is a single process's checkpoint, or a single-process run
// (`rank` -1) whose BASE is missing while BASE.rank0 exists. Throws Error(INVALID_ARGUMENT).
void checkCheckpointMode(const std::string &base, int rank);

// Removes what a writer killed mid-write leaves behind: PATH.tmp.XXXXXX files (mkstemp names) next
// to the checkpoint. Called before a run starts (one writer per checkpoint path). Returns how many
// were removed.
int removeStaleCheckpointTemps(const std::string &path);

// Rank mode: the checkpoint of iteration N stays reachable as PATH.itN (a hard link to the file
// writeCheckpointFile just wrote: no copy) for the last `keep` iterations, so ranks that stopped
// some iterations apart can resume at one that all of them have. Links older than N - keep + 1,
// and any past N (left by an earlier, longer run), are removed. Not fatal when links fail.
void keepCheckpointHistory(const std::string &path, uint32_t iterationsDone, uint32_t keep);
// The iterations N for which PATH.itN exists, ascending.
std::vector<uint32_t> checkpointHistory(const std::string &path);

// 64-bit FNV-1a.
uint64_t fnv1a64(const void *data, size_t size);

} // namespace pfrt

#endif // PFRT_CHECKPOINT_FILE_H
