#include "runtime/tests/TestUtil.h"

#include <cstdio>
#include <unistd.h>

namespace pfrt {
namespace test {

pfrt_options hostOptions(uint32_t iterations) {
  pfrt_options o;
  pfrt_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  o.iterations = iterations;
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
  return path;
}

std::string dataPath(const std::string &name) { return std::string(PFRT_TEST_DATA_DIR) + "/" + name; }

} // namespace test
} // namespace pfrt
