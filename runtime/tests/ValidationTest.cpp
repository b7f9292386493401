// Every rule of the stream model is checked before a run, with a message naming the op at fault.
#include "runtime/tests/TestUtil.h"

#include <functional>

namespace pfrt {
namespace test {
namespace {

// A small valid two-device program that `mutate` then breaks.
struct Fixture {
  ProgramPtr p;
  uint32_t main0 = 0, fill0 = 0, main1 = 0, ev = 0, job = 0;
  Fixture() {
    pfrt_program *raw = nullptr;
    pfrt_program_create("v", &raw);
    p.reset(raw);
    uint32_t d = 0;
    pfrt_program_add_device(raw, nullptr, &d);
    pfrt_program_add_device(raw, nullptr, &d);
    pfrt_program_create_stream(raw, 0, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main0);
    pfrt_program_create_stream(raw, 0, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill0);
    pfrt_program_create_stream(raw, 1, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main1);
    pfrt_program_create_event(raw, 0, "b0", &ev);
    pfrt_fill_job_desc jd{};
    jd.name = "job";
    jd.kind = PFRT_FILL_INFERENCE;
    pfrt_program_add_fill_job(raw, &jd, &job);
    pfrt_fill_layer_desc l = samples::smallEncoder();
    pfrt_fill_job_add_layer(raw, job, &l);
    pfrt_fill_job_add_layer(raw, job, &l);
    pfrt_program_enqueue_compute(raw, 0, main0, PFRT_COMPUTE_FORWARD, 0, 0, 10, 0);
    pfrt_program_enqueue_send(raw, 0, main0, 1, 64, 0, 0, 0);
    pfrt_program_enqueue_record(raw, 0, main0, ev);
    pfrt_bubble_desc b{};
    b.bubble_id = 0;
    pfrt_program_enqueue_bubble(raw, 0, main0, &b);
    pfrt_program_enqueue_recv(raw, 0, main0, 1, 64, 1, 0, 0);
    pfrt_program_enqueue_recv(raw, 1, main1, 0, 64, 0, 0, 0);
    pfrt_program_enqueue_compute(raw, 1, main1, PFRT_COMPUTE_FORWARD, 0, 0, 10, 0);
    pfrt_program_enqueue_send(raw, 1, main1, 0, 64, 1, 0, 0);
    pfrt_program_enqueue_wait(raw, 0, fill0, ev);
  }
  pfrt_fill_chunk_desc chunk(uint32_t begin, uint32_t end, uint64_t sample = 0) const {
    pfrt_fill_chunk_desc c{};
    c.job = job;
    c.bubble_id = 0;
    c.layer_begin = begin;
    c.layer_end = end;
    c.batch = 2;
    c.sample_begin = sample;
    return c;
  }
};

std::string invalid(const std::function<void(Fixture &)> &mutate) {
  Fixture f;
  mutate(f);
  pfrt_status s = pfrt_program_validate(f.p.get());
  EXPECT_EQ(s, PFRT_ERROR_INVALID_PROGRAM) << pfrt_last_error();
  return pfrt_last_error();
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(ValidationTest, FixtureIsValid) {
  Fixture f;
  pfrt_fill_chunk_desc c = f.chunk(0, 2);
  PFRT_ASSERT_OK(pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c));
  PFRT_ASSERT_OK(pfrt_program_validate(f.p.get()));
}

TEST(ValidationTest, UnmatchedSendAndRecv) {
  EXPECT_CONTAINS(
      invalid([](Fixture &f) { pfrt_program_enqueue_send(f.p.get(), 0, f.main0, 1, 64, 9, 0, 0); }),
      "device 0 stream 0 ('main') op 5 (send): send to device 1 with tag 9 has no "
      "matching recv");
  EXPECT_CONTAINS(
      invalid([](Fixture &f) { pfrt_program_enqueue_recv(f.p.get(), 1, f.main1, 0, 64, 9, 0, 0); }),
      "recv from device 0 with tag 9 has no matching send");
  EXPECT_CONTAINS(
      invalid([](Fixture &f) { pfrt_program_enqueue_send(f.p.get(), 0, f.main0, 7, 64, 9, 0, 0); }),
      "peer device 7 does not exist (program has 2 devices)");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_program_enqueue_send(f.p.get(), 0, f.main0, 1, 64, 5, 0, 0);
                    pfrt_program_enqueue_recv(f.p.get(), 1, f.main1, 0, 32, 5, 0, 0);
                  }),
                  "recv of 32 bytes does not match the send of 64 bytes");
}

TEST(ValidationTest, EventRules) {
  EXPECT_CONTAINS(
      invalid([](Fixture &f) { pfrt_program_enqueue_record(f.p.get(), 0, f.main0, f.ev); }),
      "is recorded twice in the iteration body (once per iteration is allowed)");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    uint32_t e2 = 0;
                    pfrt_program_create_event(f.p.get(), 0, "never", &e2);
                    pfrt_program_enqueue_wait(f.p.get(), 0, f.fill0, e2);
                  }),
                  "which is never recorded");
}

TEST(ValidationTest, MainNeverWaitsOnFill) {
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    uint32_t done = 0;
                    pfrt_program_create_event(f.p.get(), 0, "done", &done);
                    pfrt_program_enqueue_record(f.p.get(), 0, f.fill0, done);
                    pfrt_program_enqueue_wait(f.p.get(), 0, f.main0, done);
                  }),
                  "the MAIN stream depends on device 0 stream 1 ('fill')");
}

TEST(ValidationTest, BubbleAndFillPlacement) {
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_bubble_desc b{};
                    b.bubble_id = 0;
                    pfrt_program_enqueue_bubble(f.p.get(), 0, f.main0, &b);
                  }),
                  "bubble id 0 is used twice on this device");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc c = f.chunk(0, 2);
                    c.bubble_id = 4;
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c);
                  }),
                  "bubble id 4 is not a bubble of device 0");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc c = f.chunk(0, 3);
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c);
                  }),
                  "layer range [0, 3) is not within the job's 2 passes");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc c = f.chunk(0, 2);
                    c.job = 3;
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c);
                  }),
                  "fill job 3 does not exist (program has 1 fill jobs)");
}

TEST(ValidationTest, BatchContinuity) {
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc c = f.chunk(1, 2);
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c);
                  }),
                  "but no chunk on this device began that batch");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc c = f.chunk(0, 1);
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c);
                  }),
                  "never reaches the last layer (stuck at layer 1)");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_chunk_desc a = f.chunk(0, 2, 0), b = f.chunk(0, 2, 1);
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &a);
                    pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &b);
                  }),
                  "overlap");
}

TEST(ValidationTest, JobRules) {
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_job_desc jd{};
                    jd.kind = PFRT_FILL_TRAINING;
                    uint32_t j = 0;
                    pfrt_program_add_fill_job(f.p.get(), &jd, &j);
                    pfrt_fill_layer_desc l = samples::smallEncoder();
                    pfrt_fill_job_add_layer(f.p.get(), j, &l);
                  }),
                  "TRAINING jobs support MLP and GEMM_CHAIN layers only");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_job_desc jd{};
                    jd.kind = PFRT_FILL_INFERENCE;
                    uint32_t j = 0;
                    pfrt_program_add_fill_job(f.p.get(), &jd, &j);
                    pfrt_fill_layer_desc a = samples::smallMlp(), b = samples::smallMlp();
                    b.in = 5;
                    pfrt_fill_job_add_layer(f.p.get(), j, &a);
                    pfrt_fill_job_add_layer(f.p.get(), j, &b);
                  }),
                  "MLP input width 5 does not match the previous layer's output width 16");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    pfrt_fill_job_desc jd{};
                    jd.kind = PFRT_FILL_INFERENCE;
                    uint32_t j = 0;
                    pfrt_program_add_fill_job(f.p.get(), &jd, &j);
                    pfrt_fill_layer_desc a = samples::smallEncoder();
                    a.heads = 5;
                    pfrt_fill_job_add_layer(f.p.get(), j, &a);
                  }),
                  "is not a multiple of heads");
}

TEST(ValidationTest, StructureRules) {
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    uint32_t s = 0;
                    pfrt_program_create_stream(f.p.get(), 1, PFRT_STREAM_MAIN,
                                               PFRT_PRIORITY_DEFAULT, "m2", &s);
                  }),
                  "device 1 has 2 MAIN streams");
  EXPECT_CONTAINS(
      invalid([](Fixture &f) { pfrt_program_enqueue_alloc(f.p.get(), 0, f.main0, 1, 100); }),
      "buffer 1 is allocated but never freed in the iteration body");
  EXPECT_CONTAINS(invalid([](Fixture &f) {
                    // device 1 receives tag 0 before ... and device 0 waits for device 1's send
                    // before sending: a cycle.
                    pfrt_program_enqueue_recv(f.p.get(), 0, f.main0, 1, 64, 2, 0, 0);
                    pfrt_program_enqueue_send(f.p.get(), 0, f.main0, 1, 64, 3, 0, 0);
                    pfrt_program_enqueue_recv(f.p.get(), 1, f.main1, 0, 64, 3, 0, 0);
                    pfrt_program_enqueue_send(f.p.get(), 1, f.main1, 0, 64, 2, 0, 0);
                  }),
                  "can never run");
}

// A mutation of the fixture and the message pfrt_program_validate gives for it.
struct Case {
  const char *message;
  std::function<void(Fixture &)> mutate;
};

void expectInvalid(const std::vector<Case> &cases) {
  for (const Case &c : cases)
    EXPECT_CONTAINS(invalid(c.mutate), c.message);
}

// The fixture's fill stream gets the chunk `c` (the fixture's job unless c.job says otherwise).
void fill(Fixture &f, const pfrt_fill_chunk_desc &c) {
  PFRT_ASSERT_OK(pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c));
}

// A second job (1) of `layers` copies of `layer`, with the given samples per iteration.
uint32_t addJob(Fixture &f, pfrt_fill_kind kind, const pfrt_fill_layer_desc &layer,
                uint32_t layers, const char *name = "j") {
  pfrt_fill_job_desc jd{};
  jd.name = name;
  jd.kind = kind;
  uint32_t j = 0;
  pfrt_program_add_fill_job(f.p.get(), &jd, &j);
  for (uint32_t l = 0; l < layers; ++l)
    pfrt_fill_job_add_layer(f.p.get(), j, &layer);
  return j;
}

// Sizes beyond what the runtime supports (runtime/Program.h), refused before a run by name.
TEST(ValidationTest, ProgramSizeLimits) {
  expectInvalid({
      {"program has 4098 devices; at most 4096 are supported",
       [](Fixture &f) {
         for (int i = 0; i < 4096; ++i)
           pfrt_program_add_device(f.p.get(), nullptr, nullptr);
       }},
      {"iterations = 1000001 exceeds 1000000 per run; run fewer and resume from the checkpoint",
       [](Fixture &f) { pfrt_program_set_iterations(f.p.get(), 1000001); }},
      {"device 1 has 17 streams; at most 16 per device are supported (each is a thread on the "
       "host backend)",
       [](Fixture &f) {
         for (int i = 0; i < 16; ++i)
           pfrt_program_create_stream(f.p.get(), 1, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT, "c",
                                      nullptr);
       }},
      // 256 more devices of 16 streams each: 4099 in all, at most 16 on each.
      {"program has 4099 streams in all; the host backend runs one thread per stream and "
       "supports at most 4096",
       [](Fixture &f) {
         for (uint32_t d = 2; d < 2 + 256; ++d) {
           pfrt_program_add_device(f.p.get(), nullptr, nullptr);
           for (int i = 0; i < 16; ++i)
             pfrt_program_create_stream(f.p.get(), d, i ? PFRT_STREAM_COPY : PFRT_STREAM_MAIN,
                                        PFRT_PRIORITY_DEFAULT, "s", nullptr);
         }
       }},
      {"program has 4097 fill jobs; at most 4096 are supported",
       [](Fixture &f) {
         for (int i = 0; i < 4096; ++i)
           addJob(f, PFRT_FILL_INFERENCE, samples::smallMlp(), 0);
       }},
      {"fill job 1 ('deep'): 4097 layers; at most 4096 are supported",
       [](Fixture &f) { addJob(f, PFRT_FILL_INFERENCE, samples::smallMlp(), 4097, "deep"); }},
  });
}

// Fill chunk and job fields beyond their limits.
TEST(ValidationTest, FillFieldLimits) {
  auto job = [](void (*set)(pfrt_fill_job_desc &)) {
    return [set](Fixture &f) {
      pfrt_fill_job_desc jd{};
      jd.name = "big";
      jd.kind = PFRT_FILL_INFERENCE;
      set(jd);
      pfrt_program_add_fill_job(f.p.get(), &jd, nullptr);
    };
  };
  auto layer = [](void (*set)(pfrt_fill_layer_desc &)) {
    return [set](Fixture &f) {
      pfrt_fill_layer_desc l = samples::smallEncoder();
      set(l);
      pfrt_fill_job_add_layer(f.p.get(), f.job, &l);
    };
  };
  expectInvalid({
      {"device 0 stream 1 ('fill') op 1 (fill): period and phase must be at most 1024",
       [](Fixture &f) {
         pfrt_fill_chunk_desc c = f.chunk(0, 2);
         c.period = 1025;
         fill(f, c);
       }},
      // The builder takes any offset <= 0 (a file's is range-checked by the reader first).
      {"device 0 stream 1 ('fill') op 1 (fill): iteration_offset -1025 is below -1024 (a batch "
       "may span at most that many iterations)",
       [](Fixture &f) {
         pfrt_fill_chunk_desc c = f.chunk(0, 2);
         c.iteration_offset = -1025;
         fill(f, c);
       }},
      {"device 0 stream 1 ('fill') op 1 (fill): sample_begin must be below 2^50",
       [](Fixture &f) { fill(f, f.chunk(0, 2, uint64_t(1) << 50)); }},
      {"fill job 1 ('big'): samples must be at most 1e15 (got 2000000000000000)",
       job([](pfrt_fill_job_desc &j) { j.samples = 2000000000000000; })},
      {"fill job 1 ('big'): samples_per_iteration must be at most 2^20",
       job([](pfrt_fill_job_desc &j) { j.samples_per_iteration = (1u << 20) + 1; })},
      {"fill job 1 ('big'): learning_rate must be in [0, 10] (got 11)",
       job([](pfrt_fill_job_desc &j) { j.learning_rate = 11; })},
      {"fill job 0 ('job') layer 2: a dimension of 65537 exceeds 65536",
       layer([](pfrt_fill_layer_desc &l) { l.seq = 65537; })},
      {"fill job 0 ('job') layer 2: ffn, heads or dim out of range",
       layer([](pfrt_fill_layer_desc &l) { l.heads = 4097; })},
  });
}

// Ops that the builder takes one at a time but that do not fit the rest of the program.
TEST(ValidationTest, OpRules) {
  expectInvalid({
      {"device 2 has no streams",
       [](Fixture &f) { pfrt_program_add_device(f.p.get(), nullptr, nullptr); }},
      {"device 0 stream 1 ('fill') op 1 (compute): main-job compute on a FILL stream",
       [](Fixture &f) {
         pfrt_program_enqueue_compute(f.p.get(), 0, f.fill0, PFRT_COMPUTE_FORWARD, 0, 0, 1, 0);
       }},
      {"device 0 stream 0 ('main') op 5 (send): a second send with tag 0 between devices 0 and 1 "
       "(first at device 0 stream 0 ('main') op 1 (send))",
       [](Fixture &f) { pfrt_program_enqueue_send(f.p.get(), 0, f.main0, 1, 64, 0, 0, 0); }},
      {"device 0 stream 0 ('main') op 6 (alloc): buffer 1 is allocated twice",
       [](Fixture &f) {
         pfrt_program_enqueue_alloc(f.p.get(), 0, f.main0, 1, 8);
         pfrt_program_enqueue_alloc(f.p.get(), 0, f.main0, 1, 8);
         pfrt_program_enqueue_free(f.p.get(), 0, f.main0, 1);
       }},
      {"device 0 stream 0 ('main') op 7 (free): buffer 1 is freed twice",
       [](Fixture &f) {
         pfrt_program_enqueue_alloc(f.p.get(), 0, f.main0, 1, 8);
         pfrt_program_enqueue_free(f.p.get(), 0, f.main0, 1);
         pfrt_program_enqueue_free(f.p.get(), 0, f.main0, 1);
       }},
      {"device 0: buffer 1 is freed but never allocated",
       [](Fixture &f) { pfrt_program_enqueue_free(f.p.get(), 0, f.main0, 1); }},
      // The fill stream waits on b0, recorded before the alloc: nothing orders the free after it.
      {"device 0 stream 1 ('fill') op 1 (free): frees buffer 1 but is not ordered after its alloc "
       "at device 0 stream 0 ('main') op 5 (alloc) (same stream, or a wait on an event recorded "
       "after the alloc)",
       [](Fixture &f) {
         pfrt_program_enqueue_alloc(f.p.get(), 0, f.main0, 1, 8);
         pfrt_program_enqueue_free(f.p.get(), 0, f.fill0, 1);
       }},
  });
}

// How the chunks of one batch follow each other.
TEST(ValidationTest, BatchRules) {
  expectInvalid({
      {"fill job 1 ('train'): a TRAINING job must be placed on one device (it is on devices 0 and "
       "1)",
       [](Fixture &f) {
         uint32_t j = addJob(f, PFRT_FILL_TRAINING, samples::smallMlp(), 1, "train");
         uint32_t fill1 = 0;
         pfrt_program_create_stream(f.p.get(), 1, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill",
                                    &fill1);
         pfrt_bubble_desc b{};
         pfrt_program_enqueue_bubble(f.p.get(), 1, f.main1, &b);
         pfrt_fill_chunk_desc c = f.chunk(0, 2);
         c.job = j;
         fill(f, c);
         pfrt_program_enqueue_fill(f.p.get(), 1, fill1, &c);
       }},
      {"device 0 stream 1 ('fill') op 2 (fill): continues fill job 1 ('three') at layer 2 but the "
       "batch is at layer 1",
       [](Fixture &f) {
         uint32_t j = addJob(f, PFRT_FILL_INFERENCE, samples::smallEncoder(), 3, "three");
         pfrt_fill_chunk_desc a = f.chunk(0, 1), b = f.chunk(2, 3);
         a.job = b.job = j;
         fill(f, a);
         fill(f, b);
       }},
      {"device 0 stream 1 ('fill') op 2 (fill): batch 3 differs from the batch 2 the chunk that "
       "began it used",
       [](Fixture &f) {
         pfrt_fill_chunk_desc a = f.chunk(0, 1), b = f.chunk(1, 2);
         b.batch = 3;
         fill(f, a);
         fill(f, b);
       }},
  });
}

// Rules the builder calls enforce as each op is added (the validator repeats them for programs
// built another way), refused at the call.
TEST(ValidationTest, FillChunkRulesAtTheCall) {
  Fixture f;
  pfrt_fill_chunk_desc c = f.chunk(0, 2);
  EXPECT_EQ(pfrt_program_enqueue_fill(f.p.get(), 0, f.main0, &c), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(), "fill chunks must not run on the MAIN stream");
  c.iteration_offset = 1;
  EXPECT_EQ(pfrt_program_enqueue_fill(f.p.get(), 0, f.fill0, &c), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(), "fill chunk iteration_offset must be <= 0");
}

// A run whose timeline would not fit in memory is refused before it starts.
TEST(ValidationTest, RunTooLongForMemory) {
  Fixture f;
  for (int i = 0; i < 1000; ++i)
    pfrt_program_enqueue_compute(f.p.get(), 1, f.main1, PFRT_COMPUTE_FORWARD, 0, 0, 1, 0);
  PFRT_ASSERT_OK(pfrt_program_validate(f.p.get()));
  pfrt_options o = hostOptions(UINT32_MAX);
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(f.p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  EXPECT_CONTAINS(pfrt_last_error(), " iterations x 16 B) but the machine has ");
  EXPECT_CONTAINS(pfrt_last_error(),
                  " bytes of memory; run fewer iterations and resume from the checkpoint");
}

} // namespace
} // namespace test
} // namespace pfrt

// pfrt_run refuses option values outside their enums or ranges (a C caller can pass any int) by
// name.
TEST(RunOptionsTest, OutOfRangeEnumValuesAreRefusedByName) {
  pfrt::test::ProgramPtr p = pfrt::test::buildOk(pfrt::samples::PipelineSpec{});
  ASSERT_TRUE(p);
  struct Case {
    const char *message;
    void (*set)(pfrt_options &);
  };
  const Case cases[] = {
      {"unknown time_model 7", [](pfrt_options &o) { o.time_model = static_cast<pfrt_time_model>(7); }},
      {"unknown fill_policy 7", [](pfrt_options &o) { o.fill_policy = static_cast<pfrt_fill_policy>(7); }},
      {"unknown rank_transfer 7",
       [](pfrt_options &o) { o.rank_transfer = static_cast<pfrt_rank_transfer>(7); }},
      // Ignored before, whatever the value.
      {"rank must be -1 (every device in this process) or a rank, got -2",
       [](pfrt_options &o) { o.rank = -2; }},
      {"world must be >= 1 (0: the launcher's), got -3", [](pfrt_options &o) { o.world = -3; }},
      // Ignored before: there was no checkpoint to recover.
      {"checkpoint_recovery PREVIOUS or RESTART says what to do with a bad checkpoint; "
       "checkpoint_path is not set",
       [](pfrt_options &o) { o.checkpoint_recovery = PFRT_CHECKPOINT_RESTART; }},
      {"fill_cpu must be -1 (not pinned) or a CPU of this machine",
       [](pfrt_options &o) { o.fill_cpu = -7; }},
      {"cpu must be -1 (not pinned) or a CPU of this machine", [](pfrt_options &o) {
         o.cpu = 999999;
         o.time_model = PFRT_TIME_MODELLED; // the modelled model pins nothing, but said nothing
       }},
  };
  for (const Case &c : cases) {
    pfrt_options o = pfrt::test::hostOptions(1);
    c.set(o);
    pfrt_report *r = nullptr;
    EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(pfrt_last_error()).find(c.message), std::string::npos)
        << pfrt_last_error();
  }
}
