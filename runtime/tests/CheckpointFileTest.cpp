// Crash-safe checkpoint files (runtime/CheckpointFile.h): a failed write keeps the previous
// checkpoint, and a checkpoint whose tensors do not fit the job is refused before any kernel
// touches it.
#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pfrt {
namespace test {
namespace {

ProgramPtr spanning() {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_load(PFRT_TEST_DATA_DIR "/spanning.pbtxt", &raw), PFRT_OK)
      << pfrt_last_error();
  return ProgramPtr(raw);
}

// Files named PATH.tmp.* next to the checkpoint, sorted.
std::vector<std::string> tempFilesOf(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string prefix = path.substr(slash + 1) + ".tmp.";
  std::vector<std::string> out;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0)
        out.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

pipefill::rt::FillCheckpoint readOk(const std::string &path, uint64_t fp) {
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  EXPECT_EQ(readCheckpointFile(path, fp, cp, problem), CheckpointStatus::Ok) << problem;
  return cp;
}

// A write that fails half-way (here: the file-size limit, as on a full disk) is reported and
// leaves the previous checkpoint in place, byte for byte.
TEST(CheckpointFileTest, FailedWriteKeepsThePreviousCheckpoint) {
  ProgramPtr p = spanning();
  const uint64_t fp = programFingerprint(p->program);
  std::string path = tempPath("full-disk.ckpt");
  pfrt_options o = hostOptions(3);
  o.checkpoint_path = path.c_str();
  o.time_scale = 0.1;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  pipefill::rt::FillCheckpoint before = readOk(path, fp);
  ASSERT_EQ(before.iterations_done(), 3u);

  pipefill::rt::FillCheckpoint bigger = before;
  bigger.set_iterations_done(4);
  bigger.mutable_jobs(0)->mutable_devices(0)->add_in_flight()->add_tensors()->mutable_values()->Resize(
      1 << 20, 1.0f);
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    writeCheckpointFile(path, bigger, fp);
  } catch (const Error &e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_NE(message.find("cannot write"), std::string::npos) << message;
  EXPECT_NE(message.find("the previous checkpoint is kept"), std::string::npos) << message;
  pipefill::rt::FillCheckpoint after = readOk(path, fp);
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  // The half-written temporary file is gone too.
  EXPECT_EQ(tempFilesOf(path), std::vector<std::string>{});
}

// A checkpoint path that exists but is not a regular file is refused at once, by the run and by
// sessions, for reading (a FIFO used to block open() for ever) and for writing (a FIFO or device
// node used to be replaced by a regular file, the original left as PATH.prev); it stays as it was.
TEST(CheckpointFileTest, APathThatIsNotARegularFileIsRefused) {
  ProgramPtr p = spanning();
  const std::string fifo = tempPath("ckpt.fifo"), dir = tempPath("ckpt.dir");
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  for (const auto &[path, what] : {std::pair<std::string, std::string>{fifo, "a FIFO"},
                                   {dir, "a directory"},
                                   {"/dev/null", "a device"}}) {
    pfrt_options o = hostOptions(1);
    o.checkpoint_path = path.c_str();
    pfrt_report *r = nullptr;
    EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT) << path;
    EXPECT_NE(std::string(pfrt_last_error())
                  .find("checkpoint " + path + " is " + what +
                        ", not a checkpoint file: give the path of a regular file (it is created "
                        "if missing)"),
              std::string::npos)
        << pfrt_last_error();
    pfrt_report_destroy(r);
    pfrt_session_options so;
    pfrt_session_options_init(&so);
    so.backend = PFRT_BACKEND_HOST;
    pfrt_session *s = nullptr;
    ASSERT_EQ(pfrt_session_create(p.get(), 0, &so, &s), PFRT_OK) << pfrt_last_error();
    EXPECT_EQ(pfrt_session_checkpoint_save(s, path.c_str()), PFRT_ERROR_INVALID_ARGUMENT) << path;
    EXPECT_NE(std::string(pfrt_last_error()).find("is " + what), std::string::npos);
    EXPECT_EQ(pfrt_session_checkpoint_load(s, path.c_str()), PFRT_ERROR_INVALID_ARGUMENT) << path;
    pfrt_session_destroy(s);
  }
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_NE(::access((fifo + ".prev").c_str(), F_OK), 0);
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(tempFilesOf(fifo), std::vector<std::string>{});
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
}

// A checkpoint intact on disk (checksum, program) whose deferred chunk cannot run (batch 0, or
// passes outside the job) is a bad checkpoint like any other: the error names the chunk, and
// --on-bad-checkpoint previous / restart recover from it (they did not: the check ran only while
// restoring, after the policy had accepted the file).
TEST(CheckpointFileTest, ADeferredChunkThatCannotRunIsABadCheckpoint) {
  ProgramPtr p = spanning();
  const uint64_t fp = programFingerprint(p->program);
  for (const bool batchZero : {true, false}) {
    const std::string path = tempPath(batchZero ? "deferred0.ckpt" : "deferred-passes.ckpt");
    for (const std::string &f : {path, path + ".prev", path + ".bad"})
      std::remove(f.c_str());
    pfrt_options o = hostOptions(2);
    o.checkpoint_path = path.c_str();
    o.time_scale = 0.1;
    ASSERT_TRUE(runOk(p.get(), o));
    pipefill::rt::FillCheckpoint cp = readOk(path, fp);
    ASSERT_GT(cp.jobs_size(), 0);
    ASSERT_GT(cp.jobs(0).devices_size(), 0);
    pipefill::rt::DeferredChunk *dc = cp.mutable_jobs(0)->mutable_devices(0)->add_deferred();
    dc->set_sample_begin(4096);
    dc->set_batch(batchZero ? 0 : 2);
    dc->set_layer_begin(0);
    dc->set_layer_end(batchZero ? 1 : 1000);
    writeCheckpointFile(path, cp, fp); // the good one becomes PATH.prev
    const std::string expected =
        batchZero ? "has a deferred chunk of batch 0 at sample 4096"
                  : "has a deferred chunk of passes [0, 1000) at sample 4096; the job has";
    o.iterations = 3;
    pfrt_report *r = nullptr;
    EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_PARSE);
    EXPECT_NE(std::string(pfrt_last_error()).find(expected), std::string::npos)
        << pfrt_last_error();
    EXPECT_NE(std::string(pfrt_last_error())
                  .find("checkpoint_recovery PFRT_CHECKPOINT_PREVIOUS or PFRT_CHECKPOINT_RESTART"),
              std::string::npos)
        << "the C API's names, not pipefill-run's flags";
    pfrt_report_destroy(r);
    // previous: resumes from PATH.prev, the good checkpoint of iteration 2.
    o.checkpoint_recovery = PFRT_CHECKPOINT_PREVIOUS;
    ReportPtr prev = runOk(p.get(), o);
    ASSERT_TRUE(prev);
    EXPECT_TRUE(prev->data.resumed);
    EXPECT_EQ(prev->data.firstIteration, 2);
    // restart: the bad file is moved aside and the run starts clean.
    writeCheckpointFile(path, cp, fp);
    o.checkpoint_recovery = PFRT_CHECKPOINT_RESTART;
    ReportPtr clean = runOk(p.get(), o);
    ASSERT_TRUE(clean);
    EXPECT_FALSE(clean->data.resumed);
    EXPECT_EQ(::access((path + ".bad").c_str(), F_OK), 0);
  }
}

// A writer killed mid-write leaves PATH.tmp.XXXXXX; the next run removes it (and nothing else).
TEST(CheckpointFileTest, NextRunRemovesStaleTemporaryFiles) {
  ProgramPtr p = spanning();
  std::string path = tempPath("stale.ckpt");
  const std::string stale = path + ".tmp.Ab12Cd", other = path + ".tmp.keep-me";
  for (const std::string &f : {stale, other})
    std::fclose(std::fopen(f.c_str(), "w"));
  ASSERT_EQ(tempFilesOf(path).size(), 2u);
  pfrt_options o = hostOptions(2);
  o.checkpoint_path = path.c_str();
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(tempFilesOf(path), std::vector<std::string>{other});
  readOk(path, programFingerprint(p->program));
  std::remove(other.c_str());
}

// Wrong-shape tensors (a valid file, checksum and program, but an activation of the wrong size)
// are refused with the reason; they used to overflow a heap buffer in the layer-norm kernel.
TEST(CheckpointFileTest, WrongShapeInFlightBatchIsRefused) {
  ProgramPtr p = spanning();
  const uint64_t fp = programFingerprint(p->program);
  std::string path = tempPath("shape.ckpt");
  pfrt_options o = hostOptions(3);
  o.checkpoint_path = path.c_str();
  o.time_scale = 0.1;
  ASSERT_TRUE(runOk(p.get(), o));
  pipefill::rt::FillCheckpoint cp = readOk(path, fp);
  auto *dev = cp.mutable_jobs(0)->mutable_devices(0);
  ASSERT_GT(dev->in_flight_size(), 0);
  auto *act = dev->mutable_in_flight(0)->mutable_tensors(0)->mutable_values();
  const int good = act->size();
  act->Resize(good - 7, 0.0f);
  writeCheckpointFile(path, cp, fp);

  o = hostOptions(5);
  o.checkpoint_path = path.c_str();
  o.time_scale = 0.1;
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_PARSE);
  std::string message = pfrt_last_error();
  EXPECT_NE(message.find("activation tensor has " + std::to_string(good - 7) +
                         " values, expected " + std::to_string(good)),
            std::string::npos)
      << message;

  // A batch size the job never uses is a wrong shape too (the sizes no longer agree).
  act->Resize(good, 0.0f);
  dev->mutable_in_flight(0)->set_batch(dev->in_flight(0).batch() + 1);
  writeCheckpointFile(path, cp, fp);
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_PARSE);
  // Restored, the same file resumes.
  dev->mutable_in_flight(0)->set_batch(dev->in_flight(0).batch() - 1);
  writeCheckpointFile(path, cp, fp);
  ReportPtr ok = runOk(p.get(), o);
  ASSERT_TRUE(ok);
}

// Every flipped byte makes the file Bad (corrupted), never Ok and never Foreign: a flip in the
// header's program fingerprint (not under the checksum) used to read as "written for a different
// program", which --on-bad-checkpoint and the session's status report differently.
TEST(CheckpointFileTest, ChecksumDetectsEveryByteFlipOfASmallFile) {
  pipefill::rt::FillCheckpoint cp;
  cp.set_program_fingerprint(42);
  cp.set_iterations_done(7);
  cp.add_jobs()->set_name("j");
  std::string path = tempPath("flip.ckpt");
  writeCheckpointFile(path, cp, 42);
  std::string data = readFile(path);
  for (size_t i = 0; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] ^= 0x04;
    writeFile(path, bad);
    pipefill::rt::FillCheckpoint out;
    std::string problem;
    EXPECT_EQ(readCheckpointFile(path, 42, out, problem), CheckpointStatus::Bad)
        << "byte " << i << ": " << problem;
  }
}

// RESTART moves a bad checkpoint to PATH.bad; where that cannot be done (PATH.bad is a
// directory that is not empty) the run fails naming both paths instead of losing the file.
TEST(CheckpointFileTest, ABadCheckpointThatCannotBeMovedAsideFailsTheRun) {
  ProgramPtr p = spanning();
  const std::string path = tempPath("unmovable.ckpt"), bad = path + ".bad";
  std::ofstream(path) << "PFCKPT but nothing after it";
  ::mkdir(bad.c_str(), 0700);
  std::ofstream(bad + "/keep") << "x";
  pfrt_options o = hostOptions(1);
  o.checkpoint_path = path.c_str();
  o.checkpoint_recovery = PFRT_CHECKPOINT_RESTART;
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_IO);
  EXPECT_EQ(r, nullptr);
  const std::string e = pfrt_last_error();
  EXPECT_EQ(e.rfind("checkpoint " + path + " ", 0), 0u) << e;
  EXPECT_NE(e.find("; cannot move it to " + bad), std::string::npos) << e;
  EXPECT_EQ(::access(path.c_str(), F_OK), 0) << "the bad checkpoint is kept";
  std::remove((bad + "/keep").c_str());
  ::rmdir(bad.c_str());
  std::remove(path.c_str());
}

// One process per rank (here rank 0 of a one-device program, which needs no MPI) resumes from
// PATH.rank0: a single-process run's PATH is refused, and replay (stage) is refused with ranks.
TEST(CheckpointFileTest, RankModeRefusesASingleProcessCheckpointAndReplay) {
  std::string error;
  pfrt_fill_job_desc jd{};
  jd.name = "j";
  jd.kind = PFRT_FILL_INFERENCE;
  const samples::OneDeviceProgram one =
      samples::oneDeviceProgram("one", jd, samples::smallEncoder(), 1, nullptr, &error);
  ProgramPtr owned(one.program);
  ASSERT_TRUE(owned) << error;
  pfrt_program *p = owned.get();
  const std::string path = tempPath("single.ckpt");
  for (const std::string &f : {path, path + ".rank0"})
    std::remove(f.c_str());
  pfrt_options o = hostOptions(1);
  o.checkpoint_path = path.c_str();
  ASSERT_TRUE(runOk(p, o));
  o.rank = 0;
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p, &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error())
                .find("(" + path + ".rank0 does not exist), so this run would start at "
                      "iteration 0: resume that run as one process, or give another checkpoint "
                      "path"),
            std::string::npos)
      << pfrt_last_error();
  o = hostOptions(1);
  o.rank = 0;
  o.stage = 0;
  EXPECT_EQ(pfrt_run(p, &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(), "stage (replay) and one process per rank exclude each other");
  o = hostOptions(1);
  o.stage = 1;
  EXPECT_EQ(pfrt_run(p, &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(), "stage 1 is out of range: the program has 1 devices");
  std::remove(path.c_str());
}

} // namespace
} // namespace test
} // namespace pfrt
