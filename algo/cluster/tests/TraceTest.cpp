// Trace CSV parsing (good and bad input, errors naming file:line) and the
// synthetic generator (determinism, round trip, distribution).

#include "algo/cluster/Trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace pipefill::cluster;

namespace {
ModelResolver resolver() {
  return {[](const std::string &n) -> std::string {
            if (n == "bert-large" || n == "BERT-Large")
              return "bert-large";
            if (n == "llama-7b")
              return "llama-7b";
            return "";
          },
          "bert-large, llama-7b"};
}
std::string parseError(const std::string &text) {
  std::vector<TraceJob> jobs;
  std::string error;
  EXPECT_FALSE(parseTrace(text, "t.csv", resolver(), jobs, error));
  return error;
}
const char *kHeader = "arrival_s,model,samples,priority\n";
} // namespace

TEST(Trace, ParsesAndCanonicalizes) {
  std::vector<TraceJob> jobs;
  std::string error;
  ASSERT_TRUE(parseTrace("# a comment\n"
                         "arrival_s, model, samples, priority\r\n"
                         "\n"
                         "0,BERT-Large,100,1\n"
                         "0, llama-7b , 5 ,\n"
                         "2.5,bert-large,7,2\n",
                         "t.csv", resolver(), jobs, error))
      << error;
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].model, "bert-large");
  EXPECT_EQ(jobs[0].line, 4);
  EXPECT_EQ(jobs[1].model, "llama-7b");
  EXPECT_EQ(jobs[1].samples, 5);
  EXPECT_DOUBLE_EQ(jobs[1].priority, 1); // empty -> 1
  EXPECT_DOUBLE_EQ(jobs[2].arrivalS, 2.5);
  EXPECT_DOUBLE_EQ(jobs[2].priority, 2);
}

TEST(Trace, Errors) {
  EXPECT_EQ(parseError(std::string(kHeader) + "0,gpt9,10,1\n"),
            "t.csv:2: error: unknown model 'gpt9'; known models: "
            "bert-large, llama-7b");
  EXPECT_EQ(parseError(std::string(kHeader) + "0,bert-large,-5,1\n"),
            "t.csv:2: error: samples must be a positive integer (got -5)");
  EXPECT_EQ(parseError(std::string(kHeader) + "0,bert-large,0,1\n"),
            "t.csv:2: error: samples must be a positive integer (got 0)");
  EXPECT_EQ(parseError(std::string(kHeader) + "0,bert-large,1.5,1\n"),
            "t.csv:2: error: samples '1.5' is not an integer");
  EXPECT_EQ(parseError(std::string(kHeader) +
                       "5,bert-large,1,1\n3,bert-large,1,1\n"),
            "t.csv:3: error: arrival_s 3 is earlier than the previous job's "
            "(5 at line 2); the trace must be sorted by arrival time");
  EXPECT_EQ(parseError(std::string(kHeader) + "0,bert-large,1\n"),
            "t.csv:2: error: expected 4 comma-separated fields "
            "(arrival_s,model,samples,priority), got 3");
  EXPECT_EQ(parseError(std::string(kHeader) + "-1,bert-large,1,1\n"),
            "t.csv:2: error: arrival_s must be non-negative (got -1)");
  EXPECT_EQ(parseError(std::string(kHeader) + "soon,bert-large,1,1\n"),
            "t.csv:2: error: arrival_s 'soon' is not a number");
  EXPECT_EQ(parseError(std::string(kHeader) + "0,bert-large,1,0\n"),
            "t.csv:2: error: priority must be positive (got 0)");
  EXPECT_EQ(parseError("time,model,n\n0,bert-large,1\n"),
            "t.csv:1: error: expected the header "
            "'arrival_s,model,samples,priority', got 'time,model,n'");
  EXPECT_EQ(parseError(""), "t.csv:1: error: the trace is empty; expected "
                            "the header 'arrival_s,model,samples,priority'");
  // Every bad line is reported, each with its own line number.
  std::string many = parseError(std::string(kHeader) +
                                "0,gpt9,1,1\n1,bert-large,1,1\n2,x,0,1\n");
  EXPECT_NE(many.find("t.csv:2: error: unknown model 'gpt9'"),
            std::string::npos);
  EXPECT_NE(many.find("t.csv:4: error: unknown model 'x'"), std::string::npos);
  EXPECT_NE(many.find("t.csv:4: error: samples must be a positive integer"),
            std::string::npos);
}

TEST(Trace, MissingFile) {
  std::vector<TraceJob> jobs;
  std::string error;
  EXPECT_FALSE(readTraceFile("/nonexistent/x.csv", resolver(), jobs, error));
  EXPECT_EQ(error, "/nonexistent/x.csv: error: cannot open the trace file");
}

TEST(TraceGen, DeterministicAndRoundTrips) {
  TraceGenOptions g;
  g.jobs = 500;
  g.jobsPerHour = 120;
  g.seed = 42;
  std::vector<std::string> models = {"bert-large", "llama-7b"};
  std::vector<double> per = {0.0005, 0.02};
  std::vector<TraceJob> a, b, c;
  std::string error;
  ASSERT_TRUE(generateTrace(g, models, per, a, error)) << error;
  ASSERT_TRUE(generateTrace(g, models, per, b, error));
  g.seed = 43;
  ASSERT_TRUE(generateTrace(g, models, per, c, error));
  ASSERT_EQ(a.size(), 500u);
  std::string text = formatTrace(a);
  EXPECT_EQ(text, formatTrace(b));
  EXPECT_NE(text, formatTrace(c));
  std::vector<TraceJob> parsed;
  ASSERT_TRUE(parseTrace(text, "gen.csv", resolver(), parsed, error)) << error;
  ASSERT_EQ(parsed.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_DOUBLE_EQ(parsed[i].arrivalS, a[i].arrivalS);
    EXPECT_EQ(parsed[i].model, a[i].model);
    EXPECT_EQ(parsed[i].samples, a[i].samples);
    EXPECT_DOUBLE_EQ(parsed[i].priority, a[i].priority);
  }
}

// Poisson arrivals at 3600 jobs/hour: mean gap 1 s; log-normal work with
// median 100 GPU-s: the sample median of samples x per-sample cost is near
// 100; about 10% of jobs get priority 2; weights 3:1 pick models 3:1.
TEST(TraceGen, Distribution) {
  TraceGenOptions g;
  g.jobs = 20000;
  g.jobsPerHour = 3600;
  g.medianGpuSeconds = 100;
  g.sigma = 0.8;
  g.weights = {3, 1};
  std::vector<TraceJob> t;
  std::string error;
  ASSERT_TRUE(generateTrace(g, {"bert-large", "llama-7b"}, {0.001, 0.01}, t,
                            error));
  EXPECT_NEAR(t.back().arrivalS / (g.jobs - 1), 1.0, 0.03);
  std::vector<double> work;
  int high = 0, first = 0;
  for (const TraceJob &j : t) {
    work.push_back(double(j.samples) *
                   (j.model == "bert-large" ? 0.001 : 0.01));
    high += j.priority == 2;
    first += j.model == "bert-large";
  }
  std::nth_element(work.begin(), work.begin() + work.size() / 2, work.end());
  EXPECT_NEAR(work[work.size() / 2], 100, 4);
  EXPECT_NEAR(double(high) / g.jobs, 0.1, 0.01);
  EXPECT_NEAR(double(first) / g.jobs, 0.75, 0.015);
}

TEST(TraceGen, BadOptions) {
  TraceGenOptions g;
  std::vector<TraceJob> t;
  std::string error;
  g.jobsPerHour = 0;
  EXPECT_FALSE(generateTrace(g, {"a"}, {1.0}, t, error));
  g = TraceGenOptions();
  g.weights = {1, 2};
  EXPECT_FALSE(generateTrace(g, {"a"}, {1.0}, t, error));
  EXPECT_FALSE(generateTrace(TraceGenOptions(), {}, {}, t, error));
}

// A line longer than 256 bytes is written whole (it was cut at 256 bytes
// into a line the reader refuses).
TEST(Trace, LongLinesAreWrittenWhole) {
  TraceJob j;
  j.arrivalS = 999999999.5;
  j.model = std::string(300, 'm');
  j.samples = 1000000000000000;
  j.priority = 1000000;
  std::string text = formatTrace({j});
  EXPECT_EQ(text, "arrival_s,model,samples,priority\n999999999.500," + j.model +
                      ",1000000000000000,1e+06\n");
}

// Jobs the reader would refuse are an error: llround of their sample count
// was undefined (1e300 GPU-s gave 1-sample jobs).
TEST(TraceGen, JobsPastTheLimitsAreAnError) {
  TraceGenOptions g;
  g.jobs = 3;
  g.medianGpuSeconds = 1e300;
  std::vector<TraceJob> t;
  std::string error;
  EXPECT_FALSE(generateTrace(g, {"a"}, {1.0}, t, error));
  EXPECT_NE(error.find("past the limits of 1e+15 samples"), std::string::npos) << error;
  EXPECT_TRUE(t.empty());
  g = TraceGenOptions();
  g.jobs = kMaxGeneratedJobs + 1;
  EXPECT_FALSE(generateTrace(g, {"a"}, {1.0}, t, error));
  // 1e15 samples of 1 s each at sigma 0: exactly at the limit.
  g = TraceGenOptions();
  g.jobs = 2;
  g.sigma = 0;
  g.medianGpuSeconds = 1e15;
  ASSERT_TRUE(generateTrace(g, {"a"}, {1.0}, t, error)) << error;
  EXPECT_EQ(t[0].samples, 1000000000000000);
}
