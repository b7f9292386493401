// ProgramCheck.h: the loader's refusals as values, for the compiler. The refusal is the loader's own
// message (pfrt_program_load_memory's, less its source) and points at the op, stream, device or
// fill-job layer at fault; the device-at-a-time checker refuses what the whole check refuses (these
// programs have one defect each: with several, the two may name different ones first).
#include "runtime/ProgramCheck.h"

#include "proto/stream_program.pb.h"
#include "runtime/ProgramIO.h"
#include "runtime/tests/TestUtil.h"

#include <google/protobuf/text_format.h>

namespace pfrt {
namespace test {
namespace {

pipefill::rt::StreamProgram parse(const std::string &text) {
  pipefill::rt::StreamProgram p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// The device-at-a-time check of `p`.
std::optional<ProgramRefusal> checkByDevice(const pipefill::rt::StreamProgram &p) {
  pipefill::rt::StreamProgram head = p;
  head.clear_devices();
  ProgramChecker checker;
  checker.begin(head);
  for (const pipefill::rt::DeviceProgram &d : p.devices())
    checker.addDevice(d);
  return checker.finish();
}

// What pfrt_program_load_memory says about `p` (binary), less "prog.pb: ".
std::string loaderMessage(const pipefill::rt::StreamProgram &p) {
  std::string bytes;
  EXPECT_TRUE(p.SerializeToString(&bytes));
  pfrt_program *prog = nullptr;
  pfrt_status status = pfrt_program_load_memory(bytes.data(), bytes.size(), "prog.pb", &prog);
  EXPECT_NE(status, PFRT_OK);
  pfrt_program_destroy(prog);
  std::string message = pfrt_last_error();
  const std::string prefix = "prog.pb: ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size()) : message;
}

void expectSite(const ProgramSite &s, int64_t device, int64_t stream, int64_t op, int64_t job,
                int64_t layer) {
  EXPECT_EQ(s.device, device);
  EXPECT_EQ(s.stream, stream);
  EXPECT_EQ(s.op, op);
  EXPECT_EQ(s.job, job);
  EXPECT_EQ(s.layer, layer);
}

const char *kOneJob = R"(
fill_jobs { name: "j" kind: INFERENCE
            layers { name: "a" gemm_chain {} planned_us_per_sample: 1 }
            layers { name: "b" gemm_chain {} planned_us_per_sample: 1 } }
)";

TEST(ProgramCheckTest, AcceptsWhatTheLoaderAccepts) {
  pipefill::rt::StreamProgram p;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(readFile(dataPath("two_stage.pbtxt")),
                                                            &p));
  EXPECT_FALSE(checkProgram(p).has_value());
  EXPECT_FALSE(checkByDevice(p).has_value());
}

TEST(ProgramCheckTest, AWaitOnAnEventNeverRecordedIsAtTheWait) {
  pipefill::rt::StreamProgram p = parse(std::string(kOneJob) + R"(
devices {
  streams { role: MAIN ops { bubble { bubble_id: 0 } } }
  streams { name: "fill" role: FILL
            ops { wait { event: 0 } }
            ops { fill { job: 0 bubble_id: 0 layer_end: 2 batch: 1 } } }
  events { name: "e" }
})");
  std::optional<ProgramRefusal> r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "device 0 stream 1 ('fill') op 0 (wait): waits on event 0 which is never "
                        "recorded");
  EXPECT_EQ(r->message, loaderMessage(p));
  expectSite(r->site, 0, 1, 0, -1, -1);
  std::optional<ProgramRefusal> byDevice = checkByDevice(p);
  ASSERT_TRUE(byDevice.has_value());
  EXPECT_EQ(byDevice->message, r->message);
  expectSite(byDevice->site, 0, 1, 0, -1, -1);
}

TEST(ProgramCheckTest, AFieldOverItsLimitIsAtItsOp) {
  // The second device's fill chunk: the limits name its field path, which gives the site.
  pipefill::rt::StreamProgram p = parse(std::string(kOneJob) + R"(
devices { streams { role: MAIN } }
devices {
  streams { role: MAIN ops { bubble { bubble_id: 0 } } }
  streams { role: FILL ops { fill { job: 0 bubble_id: 0 layer_end: 2 batch: 100000 } } }
})");
  std::optional<ProgramRefusal> r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->message.find("devices[1].streams[1].ops[0].fill.batch must be at most 65536"),
            std::string::npos)
      << r->message;
  expectSite(r->site, 1, 1, 0, -1, -1);
  std::optional<ProgramRefusal> byDevice = checkByDevice(p);
  ASSERT_TRUE(byDevice.has_value());
  EXPECT_EQ(byDevice->message, r->message);
  expectSite(byDevice->site, 1, 1, 0, -1, -1);
}

TEST(ProgramCheckTest, ALayerTheRuntimeCannotRunIsAtTheLayer) {
  pipefill::rt::StreamProgram p = parse(R"(
fill_jobs { name: "j" kind: TRAINING
            layers { name: "a" mlp { in: 8 hidden: 8 out: 8 } planned_us_per_sample: 1 }
            layers { name: "b" encoder { hidden: 8 heads: 2 seq: 4 ffn: 16 }
                     planned_us_per_sample: 1 } }
devices { streams { role: MAIN } })");
  std::optional<ProgramRefusal> r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, loaderMessage(p));
  expectSite(r->site, -1, -1, -1, 0, 1);
  // A limit on a layer's field: the path gives the job and the layer.
  p = parse(std::string(kOneJob) + "devices { streams { role: MAIN } }");
  p.mutable_fill_jobs(0)->mutable_layers(1)->set_planned_us_per_sample(2e9);
  r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  expectSite(r->site, -1, -1, -1, 0, 1);
  r = checkByDevice(p);
  ASSERT_TRUE(r.has_value());
  expectSite(r->site, -1, -1, -1, 0, 1);
}

TEST(ProgramCheckTest, DeviceAndStreamRefusalsAreAtThem) {
  pipefill::rt::StreamProgram p = parse("devices { streams { role: MAIN } streams { role: MAIN } }");
  std::optional<ProgramRefusal> r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "device 0 has 2 MAIN streams; exactly one is required");
  expectSite(r->site, 0, -1, -1, -1, -1);
  // A stream's priority that is none (the field limits).
  p = parse("devices { streams { role: MAIN } streams { role: FILL priority: 7 } }");
  r = checkProgram(p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, loaderMessage(p));
  expectSite(r->site, 0, 1, -1, -1, -1);
  // The program as a whole.
  r = checkProgram(parse("name: \"empty\""));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "program has no devices");
  expectSite(r->site, -1, -1, -1, -1, -1);
}

TEST(ProgramCheckTest, TheCheckerKeepsTheFirstRefusal) {
  pipefill::rt::StreamProgram head;
  ProgramChecker checker;
  checker.begin(head);
  EXPECT_FALSE(checker.refused());
  checker.addDevice(parse("devices { streams { role: MAIN } }").devices(0));
  EXPECT_FALSE(checker.refused());
  // Device 1's stream is refused as it is added; device 2 is not looked at.
  checker.addDevice(parse("devices { streams { role: MAIN priority: 7 } }").devices(0));
  EXPECT_TRUE(checker.refused());
  checker.addDevice(parse("devices { }").devices(0));
  std::optional<ProgramRefusal> r = checker.finish();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "devices[1].streams[0].priority is 7, which is not a Priority (expected "
                        "one of PRIORITY_DEFAULT, HIGH, NORMAL, LOW)");
  expectSite(r->site, 1, 0, -1, -1, -1);
}

// A program written a device at a time is refused at its 4097th device, before it is built.
TEST(ProgramCheckTest, TheCheckerRefusesTooManyDevices) {
  ProgramChecker checker;
  checker.begin(pipefill::rt::StreamProgram());
  const pipefill::rt::DeviceProgram device = parse("devices { streams { role: MAIN } }").devices(0);
  for (size_t d = 0; d < kMaxDevices; ++d)
    checker.addDevice(device);
  EXPECT_FALSE(checker.refused());
  checker.addDevice(device);
  std::optional<ProgramRefusal> r = checker.finish();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "devices has more than 4096 elements (at most 4096)");
}

} // namespace
} // namespace test
} // namespace pfrt
