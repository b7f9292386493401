// writeFileAtomically and samePath (support/Files.h) on a scratch directory.
#include "support/Files.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "pipefill-files-" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0755);
    ::mkdir((dir + "/sub").c_str(), 0755);
  }
  void TearDown() override {
    for (const char *f : {"/a", "/b", "/link", "/sub/t"})
      ::unlink((dir + f).c_str());
    ::rmdir((dir + "/sub").c_str());
    ::rmdir(dir.c_str());
  }
  std::string dir;
};

TEST_F(FilesTest, ReplacesWholeAndKeepsTheMode) {
  const std::string a = dir + "/a";
  EXPECT_EQ(pipefill::writeFileAtomically(a, "first"), "");
  ASSERT_EQ(::chmod(a.c_str(), 0600), 0);
  EXPECT_EQ(pipefill::writeFileAtomically(a, "second"), "");
  EXPECT_EQ(slurp(a), "second");
  struct stat st;
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(::access((dir + "/.a.tmp." + std::to_string(::getpid())).c_str(), F_OK), -1)
      << "the temporary file is left behind";
}

TEST_F(FilesTest, FollowsALinkAndKeepsIt) {
  const std::string target = dir + "/sub/t", link = dir + "/link";
  EXPECT_EQ(pipefill::writeFileAtomically(target, "old"), "");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(pipefill::writeFileAtomically(link, "new"), "");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(slurp(target), "new");
}

TEST_F(FilesTest, ErrorsNameThePath) {
  EXPECT_NE(pipefill::writeFileAtomically(dir + "/none/x", "x").find(dir + "/none/x"),
            std::string::npos);
  EXPECT_NE(pipefill::writeFileAtomically(dir, "x").find("is a directory"), std::string::npos);
  EXPECT_NE(pipefill::writeFileAtomically("", "x"), "");
}

TEST_F(FilesTest, SamePath) {
  const std::string a = dir + "/a";
  EXPECT_TRUE(pipefill::samePath(a, dir + "/sub/../a")); // neither exists
  EXPECT_TRUE(pipefill::samePath(dir + "/none/./../a", a)); // a directory that does not exist
  EXPECT_FALSE(pipefill::samePath(dir + "/none/a", a));
  EXPECT_FALSE(pipefill::samePath(a, dir + "/b"));
  EXPECT_EQ(pipefill::writeFileAtomically(a, "x"), "");
  ASSERT_EQ(::symlink(a.c_str(), (dir + "/link").c_str()), 0);
  EXPECT_TRUE(pipefill::samePath(dir + "/link", a)); // one inode
  EXPECT_FALSE(pipefill::samePath(a, dir + "/b"));   // one exists, one does not
  EXPECT_TRUE(pipefill::samePath(a, dir + "/none/../a")); // there, and named through no dir
}

} // namespace

// readBoundedFile: whole inputs up to the limit; past it an error, also for inputs that have no
// size (a FIFO, /dev/zero), which are read only up to the limit.
TEST_F(FilesTest, ReadsWholeInputsUpToTheLimit) {
  const std::string a = dir + "/a";
  ASSERT_EQ(pipefill::writeFileAtomically(a, "0123456789"), "");
  std::string out;
  pipefill::ReadStatus r = pipefill::readBoundedFile(a, 10, out);
  EXPECT_TRUE(r) << r.message;
  EXPECT_EQ(out, "0123456789");
  // One byte over: refused by its size, and nothing is returned.
  r = pipefill::readBoundedFile(a, 9, out);
  EXPECT_EQ(r.error, EFBIG);
  EXPECT_EQ(r.message, "it is 10 bytes; the limit for an input is 9 bytes");
  EXPECT_EQ(out, "");
  // An input that never ends stops at the limit.
  r = pipefill::readBoundedFile("/dev/zero", 1 << 20, out);
  EXPECT_EQ(r.error, EFBIG);
  EXPECT_EQ(r.message, "it has more than 1048576 bytes; the limit for an input is 1048576 bytes");
  // A FIFO whose writer sends a little and closes: read whole.
  const std::string fifo = dir + "/b";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream(fifo) << "through a pipe";
  });
  r = pipefill::readBoundedFile(fifo, 100, out);
  writer.join();
  EXPECT_TRUE(r) << r.message;
  EXPECT_EQ(out, "through a pipe");
  // Errors: a missing file, a directory.
  r = pipefill::readBoundedFile(dir + "/none", 100, out);
  EXPECT_EQ(r.error, ENOENT);
  EXPECT_EQ(r.message, std::strerror(ENOENT));
  r = pipefill::readBoundedFile(dir, 100, out);
  EXPECT_EQ(r.error, EISDIR);
}
