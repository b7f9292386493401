// The interpreter: program files (text/binary, corrupt, missing), round trips, builder-API argument
// errors, and "interpreter and builder API give the same run".
#include "runtime/ProgramIO.h"
#include "runtime/Trace.h"
#include "support/Files.h"
#include "runtime/tests/TestUtil.h"

#include <cstdio>
#include <limits>
#include <fstream>

namespace pfrt {
namespace test {
namespace {

std::string loadError(const std::string &path, pfrt_status expected) {
  pfrt_program *p = nullptr;
  pfrt_status status = pfrt_program_load(path.c_str(), &p);
  EXPECT_EQ(status, expected) << pfrt_status_name(status) << ": " << pfrt_last_error();
  EXPECT_EQ(p, nullptr);
  pfrt_program_destroy(p);
  return pfrt_last_error();
}

std::string writeTemp(const std::string &name, const std::string &content) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ProgramIOTest, LoadsTheTextExample) {
  pfrt_program *p = nullptr;
  PFRT_ASSERT_OK(pfrt_program_load(dataPath("two_stage.pbtxt").c_str(), &p));
  ProgramPtr owned(p);
  EXPECT_EQ(p->program.devices.size(), 2u);
  EXPECT_EQ(p->program.jobs.size(), 1u);
  EXPECT_EQ(p->program.iterations, 3u);
}

TEST(ProgramIOTest, MissingFileNamesTheFile) {
  std::string e = loadError("/nonexistent/dir/prog.pb", PFRT_ERROR_IO);
  EXPECT_NE(e.find("/nonexistent/dir/prog.pb: cannot open"), std::string::npos) << e;
}

TEST(ProgramIOTest, CorruptTextGivesLineAndColumn) {
  std::string e = loadError(dataPath("corrupt.pbtxt"), PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("corrupt.pbtxt:6:"), std::string::npos) << e;
}

TEST(ProgramIOTest, UnknownFieldAndEnumAreParseErrors) {
  std::string path = writeTemp("unknown.pbtxt", "name: \"x\"\nbogus_field: 3\n");
  std::string e = loadError(path, PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("unknown.pbtxt:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("bogus_field"), std::string::npos) << e;
  path = writeTemp("enum.pbtxt", "devices { streams { role: SIDEWAYS } }\n");
  e = loadError(path, PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("enum.pbtxt:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("SIDEWAYS"), std::string::npos) << e;
}

TEST(ProgramIOTest, CorruptBinaryIsNamed) {
  std::string e = loadError(dataPath("corrupt.pb"), PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("corrupt.pb: not a valid binary StreamProgram"), std::string::npos) << e;
}

// The hints fit the input: the .pbtxt hint only for a file named .pb (bytes from memory have no
// extension), and a JSON file (a rank part, a report) is said to be one.
TEST(ProgramIOTest, HintsFitTheInput) {
  std::string e = loadError(dataPath("corrupt.pb"), PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("a text-format program needs a .pbtxt extension"), std::string::npos) << e;
  const std::string junk("\x00\x01\xff\xfe junk", 10);
  pfrt_program *p = nullptr;
  EXPECT_EQ(pfrt_program_load_memory(junk.data(), junk.size(), "<memory>", &p), PFRT_ERROR_PARSE);
  e = pfrt_last_error();
  EXPECT_NE(e.find("<memory>: not a valid binary StreamProgram"), std::string::npos) << e;
  EXPECT_EQ(e.find(".pbtxt"), std::string::npos) << e;
  const std::string path = writeTemp("part.json", "{\"format\": \"pipefill.rank_result.v1\"}\n");
  e = loadError(path, PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("part.json:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("(this is JSON: a program is a binary (.pb) or text-format (.pbtxt) "
                   "StreamProgram; rank parts and reports are not programs)"),
            std::string::npos)
      << e;
}

TEST(ProgramIOTest, EmptyFileIsAnError) {
  std::string path = writeTemp("empty.pb", "");
  std::string e = loadError(path, PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("empty.pb: file is empty (expected a StreamProgram)"), std::string::npos) << e;
}

// What the loader itself refuses in a file that parses: a newer version, a layer without a
// workload, a file over the size limit; each names the file and, where there is one, the field.
TEST(ProgramIOTest, LoaderRefusals) {
  std::string e = loadError(writeTemp("v2.pbtxt", "version: 2\n"), PFRT_ERROR_PARSE);
  EXPECT_NE(e.find("v2.pbtxt: StreamProgram version 2 is newer than this runtime understands (1)"),
            std::string::npos)
      << e;
  e = loadError(writeTemp("noworkload.pbtxt", "fill_jobs { name: \"j\" kind: INFERENCE layers { } }\n"),
                PFRT_ERROR_INVALID_PROGRAM);
  EXPECT_NE(e.find("noworkload.pbtxt: fill_jobs[0].layers[0]: layer has no workload (set encoder, "
                   "mlp or gemm_chain)"),
            std::string::npos)
      << e;
  const std::string big(pipefill::kMaxInputBytes + 1, ' ');
  pfrt_program *p = nullptr;
  EXPECT_EQ(pfrt_program_load_memory(big.data(), big.size(), "big.pbtxt", &p), PFRT_ERROR_PARSE);
  EXPECT_EQ(p, nullptr);
  e = pfrt_last_error();
  EXPECT_NE(e.find("big.pbtxt: file is " + std::to_string(big.size()) + " bytes; the limit is " +
                   std::to_string(pipefill::kMaxInputBytes)),
            std::string::npos)
      << e;
}

TEST(ProgramIOTest, WellFormedButInvalidProgramNamesTheOp) {
  std::string e = loadError(dataPath("invalid.pbtxt"), PFRT_ERROR_INVALID_PROGRAM);
  EXPECT_NE(e.find("invalid.pbtxt: devices[0].streams[1].ops[0]: event 3 does not exist"),
            std::string::npos)
      << e;
  e = loadError(dataPath("deadlock.pbtxt"), PFRT_ERROR_INVALID_PROGRAM);
  EXPECT_NE(e.find("deadlock.pbtxt: device 0 stream 0 op 0 (recv): can never run"),
            std::string::npos)
      << e;
  std::string path = writeTemp("noop.pbtxt", "devices { streams { role: MAIN ops { } } }\n");
  e = loadError(path, PFRT_ERROR_INVALID_PROGRAM);
  EXPECT_NE(e.find("devices[0].streams[0].ops[0]: op has no instruction set"), std::string::npos)
      << e;
  path = writeTemp("nodevices.pbtxt", "name: \"empty\"\n");
  e = loadError(path, PFRT_ERROR_INVALID_PROGRAM);
  EXPECT_NE(e.find("program has no devices"), std::string::npos) << e;
}

TEST(ProgramIOTest, TextAndBinaryRoundTrip) {
  pfrt_program *p = nullptr;
  PFRT_ASSERT_OK(pfrt_program_load(dataPath("two_stage.pbtxt").c_str(), &p));
  ProgramPtr a(p);
  std::string text1 = tempPath("a.pbtxt"), bin = tempPath("a.pb"), text2 = tempPath("b.pbtxt");
  PFRT_ASSERT_OK(pfrt_program_save(a.get(), text1.c_str()));
  PFRT_ASSERT_OK(pfrt_program_save(a.get(), bin.c_str()));
  pfrt_program *q = nullptr;
  PFRT_ASSERT_OK(pfrt_program_load(bin.c_str(), &q));
  ProgramPtr b(q);
  PFRT_ASSERT_OK(pfrt_program_save(b.get(), text2.c_str()));
  EXPECT_EQ(slurp(text1), slurp(text2));
  EXPECT_EQ(programFingerprint(a->program), programFingerprint(b->program));
  // A binary program without a known extension is recognised by its content.
  std::string noext = tempPath("program");
  std::ofstream(noext, std::ios::binary) << slurp(bin);
  pfrt_program *r = nullptr;
  PFRT_ASSERT_OK(pfrt_program_load(noext.c_str(), &r));
  ProgramPtr c(r);
  EXPECT_EQ(programFingerprint(c->program), programFingerprint(a->program));
  for (const std::string &f : {text1, bin, text2, noext})
    std::remove(f.c_str());
}

TEST(ProgramIOTest, BuilderRejectsBadArguments) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("x", nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  PFRT_ASSERT_OK(pfrt_program_create("x", &raw));
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, ev = 0;
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), nullptr, &dev));
  PFRT_ASSERT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                            "m", &main));
  EXPECT_EQ(
      pfrt_program_create_stream(p.get(), 5, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "m", &main),
      PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("device 5 does not exist"), std::string::npos);
  EXPECT_EQ(pfrt_program_create_stream(p.get(), dev, static_cast<pfrt_stream_role>(9),
                                       PFRT_PRIORITY_DEFAULT, "m", &main),
            PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_program_enqueue_compute(p.get(), dev, 3, PFRT_COMPUTE_FORWARD, 0, 0, 1, 0),
            PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("stream 3 does not exist"), std::string::npos);
  EXPECT_EQ(pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, -5, 0),
            PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_program_enqueue_compute(p.get(), dev, main, static_cast<pfrt_compute_kind>(0), 0,
                                         0, 1, 0),
            PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_program_enqueue_record(p.get(), dev, main, 0), PFRT_ERROR_INVALID_ARGUMENT);
  PFRT_ASSERT_OK(pfrt_program_create_event(p.get(), dev, "e", &ev));
  PFRT_ASSERT_OK(pfrt_program_enqueue_record(p.get(), dev, main, ev));
  EXPECT_EQ(pfrt_program_enqueue_send(p.get(), dev, main, dev, 8, 0, 0, 0),
            PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_program_enqueue_bubble(p.get(), dev, main, nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  pfrt_fill_chunk_desc c{};
  c.batch = 1;
  c.layer_end = 1;
  EXPECT_EQ(pfrt_program_enqueue_fill(p.get(), dev, main, &c), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("MAIN stream"), std::string::npos);
  pfrt_fill_job_desc jd{};
  jd.kind = static_cast<pfrt_fill_kind>(7);
  EXPECT_EQ(pfrt_program_add_fill_job(p.get(), &jd, nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_MLP;
  EXPECT_EQ(pfrt_fill_job_add_layer(p.get(), 0, &ld), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("fill job 0 does not exist"), std::string::npos);
  EXPECT_EQ(pfrt_program_validate(nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_status_name(PFRT_ERROR_PARSE), "PFRT_ERROR_PARSE");
}

TEST(ProgramIOTest, RunRejectsBadOptions) {
  ProgramPtr p = buildOk({});
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(1);
  pfrt_report *r = nullptr;
  for (double bad : {0.0, std::numeric_limits<double>::infinity(), 1e300, 1e-300}) {
    o.time_scale = bad;
    EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(pfrt_last_error()).find("time_scale must be in [0.000100, 1000.000000]"),
              std::string::npos)
        << pfrt_last_error();
  }
  o = hostOptions(1);
  o.stage = 9;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("stage 9 is out of range"), std::string::npos);
  o = hostOptions(1);
  o.backend = static_cast<pfrt_backend>(17);
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_run(p.get(), nullptr, nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_run(nullptr, &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
}

// pfrt_report_write_trace: its bad calls, and a trace that names the program's devices.
TEST(ProgramIOTest, TraceOfARun) {
  ProgramPtr p = buildOk({});
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(1);
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(pfrt_report_write_trace(nullptr, "x.json"), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_report_write_trace(r.get(), nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_report_write_trace(r.get(), ""), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(pfrt_report_write_trace(r.get(), "/nonexistent-dir/t.json"), PFRT_OK);
  EXPECT_NE(std::string(pfrt_last_error()).find("/nonexistent-dir/t.json"), std::string::npos)
      << pfrt_last_error();
  const std::string path = ::testing::TempDir() + "pfrt-trace-test.json";
  PFRT_ASSERT_OK(pfrt_report_write_trace(r.get(), path.c_str()));
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.find("\"device 0 (stage 0, host, modelled)\""), std::string::npos) << text.substr(0, 800);
  EXPECT_NE(text.find("\"main (planned)\""), std::string::npos);
  std::remove(path.c_str());
}

// A long run's trace keeps its last iterations (the string is built in memory and the viewers
// open some hundreds of MB): with room for 3 iterations of ops, a 10-iteration run's trace holds
// iterations 7-9 and says what it left out.
TEST(ProgramIOTest, ALongRunsTraceKeepsItsLastIterations) {
  ProgramPtr p = buildOk({});
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), hostOptions(10));
  ASSERT_TRUE(r && r->program);
  uint64_t ops = 0;
  for (const Device &d : r->program->devices)
    for (const Stream &s : d.streams)
      ops += s.ops.size();
  const std::string text = runTraceJson(r->data, *r->program, 3 * ops);
  EXPECT_NE(text.find("\"first_iteration\": 7,"), std::string::npos) << text.substr(0, 600);
  EXPECT_NE(text.find("\"iterations\": 3,"), std::string::npos);
  EXPECT_NE(text.find("the run's first 7 of 10 iterations are left out"), std::string::npos);
  EXPECT_EQ(text.find("\"iteration\": 6,"), std::string::npos) << "iteration 6 is in the trace";
  EXPECT_NE(text.find("\"iteration\": 7,"), std::string::npos);
  const std::string whole = runTraceJson(r->data, *r->program);
  EXPECT_EQ(whole.find("left out"), std::string::npos);
  EXPECT_NE(whole.find("\"iteration\": 0,"), std::string::npos);
}

TEST(ProgramIOTest, CudaWithoutGpuIsAClearError) {
  if (pfrt_cuda_device_count() > 0)
    GTEST_SKIP() << "a GPU is present; this checks the no-GPU error";
  ProgramPtr p = buildOk({});
  pfrt_options o = hostOptions(1);
  o.backend = PFRT_BACKEND_CUDA;
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_UNAVAILABLE);
  std::string e = pfrt_last_error();
  EXPECT_NE(e.find(pfrt_backend_compiled(PFRT_BACKEND_CUDA)
                       ? "backend 'cuda' requested but no CUDA device is present "
                         "(cudaGetDeviceCount returned 0 or an error); use --backend host or auto"
                       : "backend 'cuda' requested but this runtime was built without CUDA"),
            std::string::npos)
      << e;
  // auto falls back to the host backend.
  o.backend = PFRT_BACKEND_AUTO;
  o.time_scale = 0.1;
  ReportPtr ok = runOk(p.get(), o);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->data.backend, "host");
}

// Generated C++ calls the builder API; pfrt-run interprets the saved program. Both runs must
// agree on everything that is not a measurement.
TEST(ProgramIOTest, InterpreterAndBuilderGiveTheSameReport) {
  samples::PipelineSpec spec;
  spec.stages = 3;
  spec.microbatches = 4;
  spec.iterations = 3;
  ProgramPtr built = buildOk(spec);
  ASSERT_TRUE(built);
  std::string path = tempPath("pipeline.pbtxt");
  PFRT_ASSERT_OK(pfrt_program_save(built.get(), path.c_str()));
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_load(path.c_str(), &raw));
  ProgramPtr loaded(raw);
  EXPECT_EQ(programFingerprint(built->program), programFingerprint(loaded->program));

  pfrt_options o = hostOptions(0);
  ReportPtr a = runOk(built.get(), o);
  ReportPtr b = runOk(loaded.get(), o);
  ASSERT_TRUE(a && b);
  const ReportData &x = a->data, &y = b->data;
  EXPECT_EQ(x.iterations, y.iterations);
  EXPECT_EQ(x.iterations, 3u);
  EXPECT_EQ(x.plannedIterationUs, y.plannedIterationUs);
  EXPECT_EQ(x.plannedBubbleUsPerIteration, y.plannedBubbleUsPerIteration);
  ASSERT_EQ(x.jobs.size(), y.jobs.size());
  for (size_t j = 0; j < x.jobs.size(); ++j) {
    EXPECT_EQ(x.jobs[j].samplesPlanned, y.jobs[j].samplesPlanned);
    EXPECT_EQ(x.jobs[j].samplesThisRun, y.jobs[j].samplesThisRun);
    EXPECT_EQ(x.jobs[j].checksum, y.jobs[j].checksum); // deterministic, bit for bit
  }
  ASSERT_EQ(x.devices.size(), y.devices.size());
  for (size_t d = 0; d < x.devices.size(); ++d) {
    ASSERT_EQ(x.devices[d].bubbles.size(), y.devices[d].bubbles.size());
    for (size_t i = 0; i < x.devices[d].bubbles.size(); ++i)
      EXPECT_EQ(x.devices[d].bubbles[i].plannedUs, y.devices[d].bubbles[i].plannedUs);
  }
  EXPECT_NEAR(x.iterationUsMean, y.iterationUsMean, 0.05 * x.plannedIterationUs);
  std::remove(path.c_str());
}

} // namespace
} // namespace test
} // namespace pfrt
