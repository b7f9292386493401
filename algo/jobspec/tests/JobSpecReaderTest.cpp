// The JobSpec front end: every reproducer class of issue 14 that a JobSpec
// can express ends in one located error, and a valid job passes.
#include "algo/jobspec/JobSpecReader.h"

#include <gtest/gtest.h>

using namespace pipefill;
using namespace pipefill::jobspec;

namespace {

const char *kBase = R"(pipeline { stages: 2 microbatches: 4 schedule: ONE_F_ONE_B }
stage { forward_us: 100 backward_us: 200 static_bytes: 1000 stash_bytes: 10 }
hardware { gpu_memory_bytes: 1000000 p2p_latency_us: 1 p2p_bandwidth_gbps: 10 }
)";

/// Runs the compile checks on kBase + extra with `from` replaced by `to`.
std::string check(std::string text, bool &ok) {
  JobSource job;
  Diagnostics d;
  ok = readJobSpec("job.pbtxt", text, job, d) && checkCompileJob(job, d);
  return d.str();
}

std::string errorsOf(const std::string &text) {
  bool ok = true;
  std::string s = check(text, ok);
  EXPECT_FALSE(ok) << text;
  return s;
}

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(JobSpecReader, ValidJobPasses) {
  bool ok = false;
  std::string s = check(std::string(kBase) +
                            "fill_job { name: \"a\" kind: INFERENCE samples: 10 layer { "
                            "forward_us_per_sample: 1 repeat: 3 workload { kind: ENCODER_LAYER "
                            "hidden: 64 heads: 4 } } }\n",
                        ok);
  EXPECT_TRUE(ok) << s;
}

TEST(JobSpecReader, HugeCostIsOutOfRange) {
  EXPECT_EQ(errorsOf(replaced(kBase, "forward_us: 100", "forward_us: 1e300")),
            "job.pbtxt:2:9: error: stage[0].forward_us must be at most 1e+09 (got 1e+300): 1000 "
            "s per operation or per sample");
}

TEST(JobSpecReader, StaticBytesNearInt64MaxIsOutOfRange) {
  std::string s = errorsOf(replaced(kBase, "static_bytes: 1000", "static_bytes: 9223372036854775000"));
  EXPECT_NE(s.find("job.pbtxt:2:42: error: stage[0].static_bytes must be at most 2^50"),
            std::string::npos)
      << s;
}

TEST(JobSpecReader, VirtualStagesMillionIsOutOfRange) {
  std::string s = errorsOf(replaced(kBase, "schedule: ONE_F_ONE_B",
                                    "schedule: INTERLEAVED_1F1B virtual_stages: 1000000"));
  EXPECT_NE(s.find("pipeline.virtual_stages must be at most 64 (got 1000000)"), std::string::npos)
      << s;
}

TEST(JobSpecReader, HugePipelineIsRefusedBeforeExpansion) {
  std::string s = errorsOf(replaced(kBase, "stages: 2 microbatches: 4",
                                    "stages: 1024 microbatches: 65536"));
  EXPECT_NE(s.find("micro-batch chunks; at most 4194304"), std::string::npos) << s;
}

TEST(JobSpecReader, RepeatLimits) {
  std::string job = std::string(kBase) +
                    "fill_job { name: \"a\" kind: INFERENCE samples: 1 layer { "
                    "forward_us_per_sample: 1 repeat: 2147483647 } }\n";
  EXPECT_NE(errorsOf(job).find("fill_job[0].layer[0].repeat must be at most 1024 (got 2147483647)"),
            std::string::npos);
  std::string many = std::string(kBase) + "fill_job { name: \"a\" kind: INFERENCE samples: 1 ";
  for (int i = 0; i < 5; ++i)
    many += "layer { forward_us_per_sample: 1 repeat: 1000 } ";
  many += "}\n";
  EXPECT_NE(errorsOf(many).find("fill job 'a' expands to 5000 layers (after repeat); at most 4096"),
            std::string::npos);
}

TEST(JobSpecReader, NoSilentRewriteOfWorkloadFields) {
  std::string enc = std::string(kBase) +
                    "fill_job { name: \"a\" kind: INFERENCE samples: 1 layer { "
                    "forward_us_per_sample: 1 workload { kind: ENCODER_LAYER hidden: 64 "
                    "heads: 4 } } }\n";
  EXPECT_NE(errorsOf(replaced(enc, "hidden: 64", "hidden: -1"))
                .find("fill_job[0].layer[0].workload.hidden must be at least 1 (got -1)"),
            std::string::npos);
  EXPECT_NE(errorsOf(replaced(enc, "heads: 4", "heads: 0"))
                .find("fill_job[0].layer[0].workload.heads must be at least 1 (got 0)"),
            std::string::npos);
  EXPECT_NE(errorsOf(replaced(enc, "heads: 4", "heads: 5"))
                .find("hidden (64) is not a multiple of heads (5) (the runtime could not run it)"),
            std::string::npos);
  std::string training = replaced(replaced(enc, "INFERENCE", "TRAINING"),
                                  "forward_us_per_sample: 1", "forward_us_per_sample: 1 "
                                                              "backward_us_per_sample: 2");
  EXPECT_NE(errorsOf(training).find("TRAINING jobs support MLP and GEMM_CHAIN layers only"),
            std::string::npos);
  EXPECT_NE(errorsOf(replaced(enc, "hidden: 64 heads: 4", ""))
                .find("workload ENCODER_LAYER needs hidden > 0"),
            std::string::npos);
}

TEST(JobSpecReader, NonFiniteOptionsAreRejected) {
  EXPECT_EQ(errorsOf(std::string(kBase) + "planner { min_bubble_us: nan }\n"),
            "job.pbtxt:4:11: error: planner.min_bubble_us must be a number in [0, 1e+09] (got "
            "nan)");
  std::string s = errorsOf(std::string(kBase) +
                           "fill_job { name: \"a\" kind: INFERENCE samples: 1 priority: inf "
                           "layer { forward_us_per_sample: 1 } }\n");
  EXPECT_NE(s.find("fill_job[0].priority must be at most 1e+06 (got inf)"), std::string::npos) << s;
}

// The limits can fail on a value that is merely large, not only on NaN.
TEST(JobSpecReader, LimitsAreInclusiveAtTheBound) {
  bool ok = false;
  std::string s = check(replaced(kBase, "forward_us: 100", "forward_us: 1e9"), ok);
  EXPECT_TRUE(ok) << s;
  s = check(replaced(kBase, "forward_us: 100", "forward_us: 1.000001e9"), ok);
  EXPECT_FALSE(ok);
}

} // namespace
