#include "runtime/tests/TestUtil.h"

#include <cstdio>
#include <mutex>
#include <unistd.h>
#include <vector>

namespace pfrt {
namespace test {
namespace {

// Removes the files a test asked tempPath for once the test has passed; a failed test keeps them
// for inspection. Without it every run left its files in the temporary directory.
class TempFileSweeper : public ::testing::EmptyTestEventListener {
public:
  void add(std::string path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(std::move(path));
  }
  void OnTestEnd(const ::testing::TestInfo &info) override {
    std::vector<std::string> paths;
    {
      std::lock_guard<std::mutex> lock(mu_);
      paths.swap(paths_);
    }
    if (info.result() && info.result()->Failed())
      return;
    for (const std::string &p : paths) {
      std::remove(p.c_str());
      std::remove((p + ".prev").c_str()); // the checkpoint writer's previous generation
    }
  }

private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

TempFileSweeper &sweeper() {
  // Owned by gtest's listener list once appended; appended from the first tempPath call, which
  // happens inside a test body, never while gtest walks its listeners.
  static TempFileSweeper *s = [] {
    auto *l = new TempFileSweeper;
    ::testing::UnitTest::GetInstance()->listeners().Append(l);
    return l;
  }();
  return *s;
}

} // namespace

pfrt_options hostOptions(uint32_t iterations) {
  pfrt_options o;
  pfrt_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  o.iterations = iterations;
  o.time_model = PFRT_TIME_MODELLED; // exact planned timelines; labelled "modelled" everywhere
  // Every planned chunk runs (numerics, plans and checkpoints are checked against the plan);
  // the bubble-bound tests (BubbleBoundTest) ask for PFRT_FILL_BOUNDED themselves.
  o.fill_policy = PFRT_FILL_UNBOUNDED;
  return o;
}

ReportPtr runOk(pfrt_program *program, const pfrt_options &options) {
  pfrt_report *report = nullptr;
  pfrt_status status = pfrt_run(program, &options, &report);
  EXPECT_EQ(status, PFRT_OK) << pfrt_last_error();
  return ReportPtr(report);
}

ProgramPtr buildOk(const samples::PipelineSpec &spec) {
  std::string error;
  pfrt_program *p = samples::buildPipeline(spec, &error);
  EXPECT_NE(p, nullptr) << error;
  return ProgramPtr(p);
}

std::string tempPath(const std::string &name) {
  const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/')
    dir += '/';
  std::string path = dir + "pfrt-" + std::to_string(::getpid()) + "-" +
                     (info ? std::string(info->test_suite_name()) + "." + info->name() : "x") +
                     "-" + name;
  std::remove(path.c_str());
  sweeper().add(path);
  return path;
}

std::string dataPath(const std::string &name) { return std::string(PFRT_TEST_DATA_DIR) + "/" + name; }

void enqueueChunkBubbles(pfrt_program *p, uint32_t dev, uint32_t main, uint32_t fill, uint32_t job,
                         const std::vector<ChunkSpec> &chunks, double computeUs, double bubbleUs,
                         double plannedUs) {
  const samples::OneDeviceProgram program{p, dev, main, fill, job};
  for (uint32_t c = 0; c < chunks.size(); ++c) {
    uint32_t ev = 0;
    pfrt_program_create_event(p, dev, "b", &ev);
    pfrt_program_enqueue_compute(p, dev, main, PFRT_COMPUTE_FORWARD, c, 0, computeUs, 0);
    pfrt_bubble_desc b{};
    b.bubble_id = c;
    b.planned_duration_us = bubbleUs;
    b.emulate_idle = 1;
    pfrt_fill_chunk_desc f{};
    f.bubble_id = c;
    f.layer_begin = chunks[c].begin;
    f.layer_end = chunks[c].end;
    f.batch = chunks[c].batch;
    f.sample_begin = chunks[c].sample;
    f.weights_streamed = c % 2;
    f.activations_on_host = c % 2;
    f.planned_us = plannedUs;
    EXPECT_EQ(samples::enqueueFilledBubble(program, ev, b, &f), PFRT_OK) << pfrt_last_error();
  }
}

ProgramPtr misPredictedProgram() {
  pfrt_device_desc dd{};
  dd.planned_iteration_us = 24000;
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  jd.samples = kMisPredictedSamples;
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 16;
  ld.planned_us_per_sample = kMisPredictedChunkUs / 4;
  std::string error;
  const samples::OneDeviceProgram p = samples::oneDeviceProgram("bound", jd, ld, 1, &dd, &error);
  EXPECT_NE(p.program, nullptr) << error;
  ProgramPtr owner(p.program);
  if (!p.program)
    return owner;
  uint32_t e0 = 0, e1 = 0;
  pfrt_program_create_event(p.program, p.device, "big", &e1);
  pfrt_program_create_event(p.program, p.device, "small", &e0);
  // Main: the bubble; fill: its chunk of 4 samples from `sample`, planned 10x too optimistic.
  auto bubble = [&](uint32_t id, uint32_t ev, double us, uint64_t sample) {
    pfrt_bubble_desc b{};
    b.bubble_id = id;
    b.planned_duration_us = us;
    b.emulate_idle = 1;
    pfrt_fill_chunk_desc c{};
    c.bubble_id = id;
    c.layer_end = 1;
    c.batch = 4;
    c.sample_begin = sample;
    c.planned_us = kMisPredictedPlannedUs;
    EXPECT_EQ(samples::enqueueFilledBubble(p, ev, b, &c), PFRT_OK) << pfrt_last_error();
  };
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
  bubble(1, e1, 20000, 0);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, 1, 0, 1000, 0);
  bubble(0, e0, 1000, 4);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_BACKWARD, 0, 0, 1000, 0);
  return owner;
}

ProgramPtr tailThenWarmupProgram(double chunkUs, uint32_t layers, uint32_t dim) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("tail", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t d0 = 0, d1 = 0, m0 = 0, m1 = 0, fill = 0, ev = 0, job = 0;
  EXPECT_EQ(PFRT_OK, pfrt_program_add_device(p.get(), nullptr, &d0));
  EXPECT_EQ(PFRT_OK, pfrt_program_add_device(p.get(), nullptr, &d1));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_stream(p.get(), d0, PFRT_STREAM_MAIN,
                                                PFRT_PRIORITY_DEFAULT, "m", &m0));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_stream(p.get(), d1, PFRT_STREAM_MAIN,
                                                PFRT_PRIORITY_DEFAULT, "m", &m1));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_stream(p.get(), d1, PFRT_STREAM_FILL,
                                                PFRT_PRIORITY_DEFAULT, "f", &fill));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_event(p.get(), d1, "tail", &ev));
  const double f = kTailTestF, b = kTailTestB;
  // Device 0: F0 send | recv B0 | B0.
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.get(), d0, m0, PFRT_COMPUTE_FORWARD, 0, 0, f, 0));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d0, m0, d1, 1024, 0, 0, f));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d0, m0, d1, 1024, 1, 0, 2 * f + b));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.get(), d0, m0, PFRT_COMPUTE_BACKWARD, 0, 0, b,
                                                  2 * f + b));
  // Device 1: warm-up bubble | recv F0 | F0 B0 send | record | tail bubble.
  pfrt_bubble_desc warmup{};
  warmup.bubble_id = 0;
  warmup.kind = PFRT_BUBBLE_WARMUP;
  warmup.planned_duration_us = f;
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_bubble(p.get(), d1, m1, &warmup));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d1, m1, d0, 1024, 0, 0, f));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.get(), d1, m1, PFRT_COMPUTE_FORWARD, 0, 0, f, f));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.get(), d1, m1, PFRT_COMPUTE_BACKWARD, 0, 0, b,
                                                  2 * f));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d1, m1, d0, 1024, 1, 0, 2 * f + b));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_record(p.get(), d1, m1, ev));
  pfrt_bubble_desc tail{};
  tail.bubble_id = 1;
  tail.kind = PFRT_BUBBLE_TAIL;
  tail.planned_start_us = 2 * f + b;
  tail.planned_duration_us = b;
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_bubble(p.get(), d1, m1, &tail));
  EXPECT_EQ(PFRT_OK, pfrt_program_set_planned_iteration_us(p.get(), 2 * f + 2 * b));
  // The tail's fill: one sample of `layers` GEMM chains planned (and, modelled, lasting) chunkUs.
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  jd.samples = 4;
  EXPECT_EQ(PFRT_OK, pfrt_program_add_fill_job(p.get(), &jd, &job));
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = dim;
  ld.planned_us_per_sample = chunkUs / layers;
  for (uint32_t l = 0; l < layers; ++l)
    EXPECT_EQ(PFRT_OK, pfrt_fill_job_add_layer(p.get(), job, &ld));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_wait(p.get(), d1, fill, ev));
  pfrt_fill_chunk_desc c{};
  c.job = job;
  c.bubble_id = 1;
  c.layer_end = layers;
  c.batch = 1;
  c.planned_us = chunkUs;
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_fill(p.get(), d1, fill, &c));
  return p;
}

Program twoDeviceSends(const std::vector<uint32_t> &sendOrder,
                       const std::vector<uint32_t> &recvOrder,
                       const std::map<uint32_t, uint32_t> &sendStream,
                       const std::map<uint32_t, uint32_t> &recvStream) {
  Program program;
  program.devices.resize(2);
  for (Device &d : program.devices)
    d.streams.resize(2);
  auto add = [&](uint32_t device, OpKind kind, const std::vector<uint32_t> &tags,
                 const std::map<uint32_t, uint32_t> &streamOf) {
    for (uint32_t tag : tags) {
      Op op;
      op.kind = kind;
      op.peer = 1 - device;
      op.tag = tag;
      auto it = streamOf.find(tag);
      program.devices[device].streams[it == streamOf.end() ? 0 : it->second].ops.push_back(op);
    }
  };
  add(0, OpKind::Send, sendOrder, sendStream);
  add(1, OpKind::Recv, recvOrder, recvStream);
  return program;
}

} // namespace test
} // namespace pfrt
