// Main job -> bubbles -> per-stage fill rates -> cluster model, and the
// scale study, on a small GPT so the test stays fast.

#include "algo/cluster/Analysis.h"
#include "algo/cluster/Report.h"
#include "algo/cost/ModelZoo.h"

#include <gtest/gtest.h>

using namespace pipefill;
using namespace pipefill::cluster;

namespace {

/// 1.3B-class GPT: 24 layers, h 2048, 16 heads, s 2048, TP 2, PP 4
/// (6 layers per stage), global batch 64.
PipelineSetup smallSetup() {
  PipelineSetup s;
  cost::TransformerConfig &c = s.model;
  c.layers = 24;
  c.hidden = 2048;
  c.heads = 16;
  c.seqLength = 2048;
  c.vocab = 51200;
  c.tp = 2;
  c.pp = 4;
  c.dp = 2;
  c.globalBatch = 64;
  c.gpu = "A100-80GB";
  s.schedule = sched::ScheduleKind::OneFOneB;
  s.planner.minBubbleUs = 50;
  s.planner.reserveBytes = int64_t(2) << 30;
  return s;
}

std::vector<fill::Job> zoo(std::vector<std::string> names) {
  std::vector<fill::Job> jobs;
  for (const std::string &n : names) {
    fill::Job j;
    std::string error;
    EXPECT_TRUE(cost::zooJob(n, cost::ZooOptions(), j, error)) << error;
    jobs.push_back(j);
  }
  return jobs;
}

} // namespace

TEST(Analysis, SmallGpt) {
  PipelineAnalysis a;
  std::string error;
  ASSERT_TRUE(analyzePipeline(smallSetup(),
                              zoo({"bert-large", "gpt-small-train"}), a,
                              error))
      << error;
  EXPECT_EQ(a.gpus, 16);
  EXPECT_EQ(a.gpusPerStage, 4);
  EXPECT_EQ(a.costs.microbatches, 32); // 64 / 2
  ASSERT_EQ(a.stages.size(), 4u);
  // The bubble is at least the schedule's closed form (p-1)/(m+p-1) = 3/35
  // (the LM head stage and the all-reduce tail add to it).
  EXPECT_GE(a.bubbleFraction, 3.0 / 35 - 1e-9);
  EXPECT_LT(a.bubbleFraction, 0.5);
  for (const StageSummary &st : a.stages) {
    EXPECT_NEAR(st.busyUs + st.idleUs, a.iterationUs, 1e-6 * a.iterationUs);
    EXPECT_LE(st.bubbleUs, st.idleUs + 1e-6);
    ASSERT_EQ(st.fills.size(), 2u);
    for (const StageFill &f : st.fills) {
      EXPECT_GT(f.samplesPerIteration, 0) << f.reason;
      EXPECT_GT(f.efficiency, 0.3);
      EXPECT_LE(f.efficiency, 1.0);
      EXPECT_LE(f.filledUs, st.bubbleUs + 1e-6);
      EXPECT_FALSE(f.knobs.empty());
    }
  }
  EXPECT_EQ(a.plannerCalls + a.cacheHits, 8);

  ClusterModel cm = clusterModelFrom(a);
  ASSERT_TRUE(cm.validate(error)) << error;
  EXPECT_EQ(cm.totalGpus(), 16);
  EXPECT_EQ(cm.models, (std::vector<std::string>{"bert-large",
                                                 "gpt-small-train"}));
  // Rate = samples per iteration / iteration time.
  EXPECT_NEAR(cm.samplesPerS[1][0],
              a.stages[1].fills[0].samplesPerIteration / a.iterationUs * 1e6,
              1e-9);

  // Saturated capacity: recovered <= idle; best-per-stage >= each model.
  Capacity best = saturatedCapacity(a, -1);
  EXPECT_GT(best.usefulGpus, 0);
  EXPECT_LE(best.usefulGpus, best.idleGpus);
  for (int m = 0; m < 2; ++m)
    EXPECT_GE(best.usefulGpus + 1e-9, saturatedCapacity(a, m).usefulGpus);
  EXPECT_NEAR(best.utilizationGain,
              best.usefulGpus / cm.mainBusyGpus(), 1e-9);
}

// GPipe with many micro-batches does not fit without recompute: "off"
// reports it, "auto" switches recompute on.
TEST(Analysis, RecomputeAuto) {
  PipelineSetup s = smallSetup();
  s.model.layers = 48;
  s.model.hidden = 4096;
  s.model.heads = 32;
  s.model.tp = 4;
  s.model.globalBatch = 512; // 256 micro-batches per pipeline
  s.schedule = sched::ScheduleKind::GPipe;
  s.recompute = Recompute::Off;
  PipelineAnalysis a;
  std::string error;
  EXPECT_FALSE(analyzePipeline(s, zoo({"bert-base"}), a, error));
  EXPECT_NE(error.find("does not fit in GPU memory"), std::string::npos)
      << error;
  s.recompute = Recompute::Auto;
  ASSERT_TRUE(analyzePipeline(s, zoo({"bert-base"}), a, error)) << error;
  EXPECT_TRUE(a.recompute);
  EXPECT_TRUE(a.setup.model.recompute);
}

TEST(Analysis, Errors) {
  PipelineAnalysis a;
  std::string error;
  EXPECT_FALSE(analyzePipeline(smallSetup(), {}, a, error));
  PipelineSetup s = smallSetup();
  s.model.globalBatch = 63;
  EXPECT_FALSE(analyzePipeline(s, zoo({"bert-base"}), a, error));
  EXPECT_NE(error.find("global_batch"), std::string::npos);
  s = smallSetup();
  s.schedule = sched::ScheduleKind::Interleaved1F1B;
  s.virtualStages = 4; // 24 layers / (4 x 4) is fine; m = 32 % 4 == 0
  EXPECT_TRUE(analyzePipeline(s, zoo({"bert-base"}), a, error)) << error;
}

// The study: fixed global batch, dp = N / (tp x pp): fewer micro-batches
// per pipeline and a larger bubble as N grows; more work recovered.
TEST(Study, BubbleGrowsWithScale) {
  StudyOptions o;
  o.gpus = {16, 32, 64, 100};
  o.schedules = {sched::ScheduleKind::OneFOneB};
  std::vector<StudyPoint> pts;
  std::string error;
  ASSERT_TRUE(runStudy(smallSetup(), zoo({"bert-large"}), o, pts, error))
      << error;
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_EQ(pts[0].microbatches, 32);
  EXPECT_EQ(pts[1].microbatches, 16);
  EXPECT_EQ(pts[2].microbatches, 8);
  EXPECT_FALSE(pts[3].ok); // 100 is not a multiple of 8
  EXPECT_NE(pts[3].error.find("not a multiple of tp x pp = 8"),
            std::string::npos);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(pts[i].ok) << pts[i].error;
  EXPECT_LT(pts[0].bubbleFraction, pts[1].bubbleFraction);
  EXPECT_LT(pts[1].bubbleFraction, pts[2].bubbleFraction);
  EXPECT_LT(pts[0].best.utilizationGain, pts[2].best.utilizationGain);
  EXPECT_LT(pts[0].best.usefulGpus, pts[2].best.usefulGpus);

  StudyReport rep;
  PipelineSetup base = smallSetup();
  rep.name = "small";
  rep.base = &base;
  rep.models = {"bert-large"};
  rep.points = &pts;
  std::string json = studyJson(rep);
  EXPECT_NE(json.find("\"bubble_fraction\""), std::string::npos);
  EXPECT_NE(json.find("\"gpu_equivalents\""), std::string::npos);
  EXPECT_NE(json.find("\"error\": \"100 GPUs is not a multiple"),
            std::string::npos);
  std::string svg = studySvg(rep);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::string md = studyMarkdown(rep);
  EXPECT_NE(md.find("| GPUs |"), std::string::npos);
}

// A trace replayed through the analysis: the JSON report has the keys
// docs/cluster.md documents.
TEST(Report, RunJsonKeys) {
  PipelineAnalysis a;
  std::string error;
  ASSERT_TRUE(analyzePipeline(smallSetup(), zoo({"bert-base"}), a, error));
  ClusterModel cm = clusterModelFrom(a);
  std::vector<TraceJob> trace(3);
  for (int i = 0; i < 3; ++i) {
    trace[size_t(i)].arrivalS = i;
    trace[size_t(i)].model = "bert-base";
    trace[size_t(i)].samples = 1000;
  }
  RunReport rep;
  rep.name = "small";
  rep.analysis = &a;
  rep.trace = &trace;
  rep.perJob = true;
  for (Policy p : allPolicies()) {
    SimOptions so;
    so.policy = p;
    so.gpusPerJob = 2;
    PolicyResult r;
    ASSERT_TRUE(simulateQueue(cm, trace, so, r, error)) << error;
    rep.policies.push_back(r);
  }
  std::string json = runJson(rep);
  for (const char *key :
       {"\"iteration_time_us\"", "\"bubble_fraction\"", "\"stages\"",
        "\"fills\"", "\"capacity\"", "\"policies\"", "\"utilization_gain\"",
        "\"gpu_equivalents\"", "\"completion_s\"", "\"queueing_s\"",
        "\"p99\"", "\"jobs\""})
    EXPECT_NE(json.find(key), std::string::npos) << key;
  EXPECT_NE(runTable(rep).find("efficiency"), std::string::npos);
  EXPECT_NE(runSvg(rep).find("</svg>"), std::string::npos);
}
