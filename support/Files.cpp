//===- Files.cpp - writing outputs whole, and telling paths apart ---------===//
#include "support/Files.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace pipefill {
namespace {

std::string errnoText(const std::string &what) { return what + ": " + std::strerror(errno); }

// Writes all of `data` to `fd`; "" or the reason.
std::string writeAll(int fd, const std::string &data, const std::string &path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errnoText(path + ": write error");
    done += static_cast<size_t>(n);
  }
  return "";
}

// The directory part of `path` ("." when it has none) and the rest.
void splitPath(const std::string &path, std::string &dir, std::string &base) {
  const size_t slash = path.find_last_of('/');
  dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  base = slash == std::string::npos ? path : path.substr(slash + 1);
}

// `path` made absolute with "." and ".." removed by its text alone (a directory that does not
// exist cannot be resolved through the file system).
std::string lexicallyNormal(const std::string &path) {
  std::string full = path;
  if (full.empty() || full[0] != '/') {
    char cwd[PATH_MAX];
    full = std::string(::getcwd(cwd, sizeof cwd) ? cwd : ".") + "/" + full;
  }
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= full.size()) {
    const size_t slash = std::min(full.find('/', at), full.size());
    const std::string part = full.substr(at, slash - at);
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    at = slash + 1;
  }
  std::string out;
  for (const std::string &part : parts)
    out += "/" + part;
  return out.empty() ? "/" : out;
}

} // namespace

std::string writeFileAtomically(const std::string &path, const std::string &data) {
  if (path.empty())
    return "empty path";
  std::string target = path;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return path + ": is a directory";
  if (exists && !S_ISREG(st.st_mode)) { // a FIFO, a terminal, /dev/stdout: in place
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return errnoText(path + ": cannot open for writing");
    std::string error = writeAll(fd, data, path);
    if (::close(fd) != 0 && error.empty())
      error = errnoText(path + ": write error");
    return error;
  }
  if (exists) { // replace the link's target, not the link
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved))
      target = resolved;
  }
  std::string dir, base;
  splitPath(target, dir, base);
  const std::string tmp = dir + "/." + base + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return errnoText(path + ": cannot open for writing (" + tmp + ")");
  std::string error = writeAll(fd, data, path);
  if (error.empty() && exists && ::fchmod(fd, st.st_mode & 07777) != 0)
    error = errnoText(path + ": cannot keep its mode");
  if (error.empty() && ::fsync(fd) != 0 && errno != EINVAL)
    error = errnoText(path + ": fsync failed");
  if (::close(fd) != 0 && error.empty())
    error = errnoText(path + ": write error");
  if (error.empty() && ::rename(tmp.c_str(), target.c_str()) != 0)
    error = errnoText(path + ": cannot rename " + tmp + " over it");
  if (!error.empty())
    ::unlink(tmp.c_str());
  return error;
}

std::vector<std::string> pathKeys(const std::string &path) {
  // A file that is there is its inode (two links, or a link and its target, are one file), and
  // any path is its absolute name: its directory resolved through the file system, or, where a
  // directory does not exist ("none/../x" is not there for the file system but names x), by its
  // text alone. Both forms of the name carry one prefix: a name that resolves and the same name
  // written through a directory that does not exist compare equal.
  std::vector<std::string> keys;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0)
    keys.push_back("inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
  std::string dir, base;
  splitPath(path, dir, base);
  char buf[PATH_MAX];
  keys.push_back("path " + (::realpath(dir.c_str(), buf) ? std::string(buf) + "/" + base
                                                          : lexicallyNormal(path)));
  return keys;
}

bool samePath(const std::string &a, const std::string &b) {
  const std::vector<std::string> ka = pathKeys(a), kb = pathKeys(b);
  for (const std::string &k : ka)
    if (std::find(kb.begin(), kb.end(), k) != kb.end())
      return true;
  return false;
}

std::string overlappingFiles(const std::vector<std::pair<std::string, std::string>> &outputs,
                             const std::vector<std::pair<std::string, std::string>> &inputs) {
  auto isFile = [](const std::string &p) { return !p.empty() && p != "-"; };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[option, path] = outputs[i];
    if (!isFile(path))
      continue;
    for (const auto &[what, input] : inputs)
      if (isFile(input) && samePath(path, input))
        return option + " would overwrite " + what + " '" + input + "'";
    for (size_t j = 0; j < i; ++j)
      if (isFile(outputs[j].second) && samePath(path, outputs[j].second))
        return outputs[j].first + " and " + option + " both write '" + path +
               "'; give each output its own file";
  }
  return "";
}

ReadStatus readBoundedFile(const std::string &path, size_t limit, std::string &out) {
  out.clear();
  const bool stdinPath = path == "-";
  const int fd = stdinPath ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {errno, std::strerror(errno)};
  auto tooLarge = [&](const std::string &size) {
    return ReadStatus{EFBIG, size + " bytes; the limit for an input is " + std::to_string(limit) +
                                 " bytes"};
  };
  ReadStatus status;
  struct stat st;
  const bool statted = ::fstat(fd, &st) == 0;
  const bool regular = statted && S_ISREG(st.st_mode);
  if (statted && S_ISDIR(st.st_mode)) {
    status = {EISDIR, std::strerror(EISDIR)};
  } else if (regular && static_cast<unsigned long long>(st.st_size) > limit) {
    status = tooLarge("it is " + std::to_string(st.st_size));
  } else {
    if (regular)
      out.reserve(static_cast<size_t>(st.st_size));
    std::vector<char> chunk(size_t(1) << 16);
    for (;;) {
      const ssize_t n = ::read(fd, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        status = {errno, std::strerror(errno)};
        break;
      }
      if (n == 0)
        break;
      if (out.size() + static_cast<size_t>(n) > limit) {
        status = tooLarge("it has more than " + std::to_string(limit));
        break;
      }
      out.append(chunk.data(), static_cast<size_t>(n));
    }
  }
  if (!stdinPath)
    ::close(fd);
  if (!status)
    out.clear();
  return status;
}

} // namespace pipefill
