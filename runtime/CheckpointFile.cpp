#include "runtime/CheckpointFile.h"

#include "proto/stream_program.pb.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <vector>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pfrt {

namespace {

const char kMagic[8] = {'P', 'F', 'C', 'K', 'P', 'T', 0, 1};
constexpr size_t kHeader = 32;

void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t getU64(const std::string &in, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

[[noreturn]] void ioFail(const std::string &path, const std::string &step) {
  throw Error(PFRT_ERROR_IO, "checkpoint " + path + ": " + step + ": " + std::strerror(errno));
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A checkpoint path that exists must be a regular file (or a link to one): opening a FIFO for
// reading blocks, and replacing a device node or a FIFO with a file would destroy it. Not a
// damaged checkpoint either (no --on-bad-checkpoint recovery moves it aside): the path is wrong.
void requireRegularFile(const std::string &path, const struct stat &st) {
  if (S_ISREG(st.st_mode))
    return;
  const char *what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  throw Error(PFRT_ERROR_INVALID_ARGUMENT,
              "checkpoint " + path + " is " + what +
                  ", not a checkpoint file: give the path of a regular file (it is created if "
                  "missing)");
}

void writeAll(int fd, const std::string &data, const std::string &path, const std::string &tmp) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int saved = errno ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      ioFail(path, "cannot write " + tmp + " (the previous checkpoint is kept)");
    }
    done += static_cast<size_t>(n);
  }
}

} // namespace

uint64_t fnv1a64(const void *data, size_t size) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

void writeCheckpointFile(const std::string &path, const pipefill::rt::FillCheckpoint &cp,
                         uint64_t fingerprint) {
  std::string payload;
  if (!cp.SerializeToString(&payload))
    throw Error(PFRT_ERROR_INTERNAL, "checkpoint " + path + ": cannot serialize");
  std::string data(kMagic, sizeof kMagic);
  putU64(data, fingerprint);
  putU64(data, payload.size());
  putU64(data, fnv1a64(payload.data(), payload.size()));
  data += payload;

  struct stat existing;
  if (::stat(path.c_str(), &existing) == 0)
    requireRegularFile(path, existing);
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    ioFail(path, "cannot create a temporary file in " + dirOf(path));
  tmp = name.data();
  writeAll(fd, data, path, tmp);
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    ioFail(path, "fsync of " + tmp + " failed (the previous checkpoint is kept)");
  }
  if (::close(fd) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    ioFail(path, "closing " + tmp + " failed (the previous checkpoint is kept)");
  }
  // Keep the last complete checkpoint as PATH.prev (a hard link: PATH itself stays in place until
  // the rename below replaces it atomically).
  const std::string prev = path + ".prev";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    ::unlink(prev.c_str());
    if (::link(path.c_str(), prev.c_str()) != 0 && errno != EEXIST) {
      // Not fatal (e.g. a file system without hard links): only the fallback is lost.
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    ioFail(path, "cannot rename " + tmp + " over it");
  }
  int dfd = ::open(dirOf(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    if (::fsync(dfd) != 0 && errno != EINVAL) {
      ::close(dfd);
      ioFail(path, "fsync of the directory failed");
    }
    ::close(dfd);
  }
}

namespace {

// The files next to `path` whose names are its own followed by `suffix`: (the rest of the name,
// full path).
std::vector<std::pair<std::string, std::string>> siblings(const std::string &path,
                                                           const std::string &suffix) {
  const std::string dir = dirOf(path);
  const size_t slash = path.rfind('/');
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + suffix;
  std::vector<std::pair<std::string, std::string>> out;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return out;
  while (const dirent *e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(name.substr(prefix.size()), dir + "/" + name);
  }
  ::closedir(d);
  return out;
}

// PATH.itN files: (N, full path), ascending.
std::vector<std::pair<uint32_t, std::string>> historyFiles(const std::string &path) {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (const auto &[rest, file] : siblings(path, ".it"))
    if (rest.size() <= 9 && rest.find_first_not_of("0123456789") == std::string::npos)
      out.emplace_back(static_cast<uint32_t>(std::stoul(rest)), file);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

void keepCheckpointHistory(const std::string &path, uint32_t iterationsDone, uint32_t keep) {
  for (const auto &[n, file] : historyFiles(path))
    if (n + keep <= iterationsDone || n > iterationsDone)
      ::unlink(file.c_str());
  const std::string link = path + ".it" + std::to_string(iterationsDone);
  ::unlink(link.c_str());
  if (::link(path.c_str(), link.c_str()) != 0) {
    // Not fatal (a file system without hard links): only the ranks' common fallback is lost.
  }
}

std::vector<uint32_t> checkpointHistory(const std::string &path) {
  std::vector<uint32_t> out;
  for (const auto &entry : historyFiles(path))
    out.push_back(entry.first);
  return out;
}

int removeStaleCheckpointTemps(const std::string &path) {
  int removed = 0;
  // Exactly the mkstemp pattern: the prefix and six more characters.
  for (const auto &[rest, file] : siblings(path, ".tmp."))
    removed += rest.size() == 6 && ::unlink(file.c_str()) == 0;
  return removed;
}

CheckpointStatus readCheckpointFile(const std::string &path, uint64_t fingerprint,
                                    pipefill::rt::FillCheckpoint &cp, std::string &problem) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return CheckpointStatus::Missing;
  requireRegularFile(path, st);
  if (static_cast<uint64_t>(st.st_size) > pipefill::kMaxInputBytes * 16ull) {
    problem = "is " + std::to_string(st.st_size) + " bytes, larger than any checkpoint";
    return CheckpointStatus::Bad;
  }
  std::string data;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    problem = std::string("cannot be read: ") + std::strerror(errno);
    return CheckpointStatus::Bad;
  }
  data.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, &data[got], data.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(got);
  return parseCheckpointData(data, path, fingerprint, cp, problem);
}

CheckpointStatus parseCheckpointData(const std::string &data, const std::string &path,
                                     uint64_t fingerprint, pipefill::rt::FillCheckpoint &cp,
                                     std::string &problem) {
  pipefill::Diagnostics diags;
  if (data.size() < kHeader || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    problem = data.size() < kHeader && data.size() >= 6 && data.compare(0, 6, "PFCKPT") == 0
                  ? "is truncated (" + std::to_string(data.size()) + " bytes, header is 32)"
                  : "is not a pipefill checkpoint (no PFCKPT header)";
    return CheckpointStatus::Bad;
  }
  const uint64_t fileFingerprint = getU64(data, 8);
  const uint64_t size = getU64(data, 16);
  const uint64_t sum = getU64(data, 24);
  if (size != data.size() - kHeader) {
    problem = "is truncated or padded: the header announces " + std::to_string(size) +
              " payload bytes, the file has " + std::to_string(data.size() - kHeader);
    return CheckpointStatus::Bad;
  }
  if (fnv1a64(data.data() + kHeader, size) != sum) {
    problem = "is corrupted (content checksum mismatch)";
    return CheckpointStatus::Bad;
  }
  if (!pipefill::parseBinaryProto(path, data.substr(kHeader), cp, diags) ||
      !pipefill::checkLimits(cp, nullptr, path, diags)) {
    problem = "has invalid content: " + diags.all().front().message;
    return CheckpointStatus::Bad;
  }
  // The header's fingerprint is outside the checksum; the payload holds its own copy, so a
  // checkpoint is another program's only when both say so.
  if (cp.program_fingerprint() != fileFingerprint) {
    problem = "is corrupted: its header names program fingerprint " +
              std::to_string(fileFingerprint) + ", its content " +
              std::to_string(cp.program_fingerprint());
    return CheckpointStatus::Bad;
  }
  if (fileFingerprint != fingerprint) {
    problem = "was written for a different program (fingerprint " +
              std::to_string(fileFingerprint) + ", this program " + std::to_string(fingerprint) +
              ")";
    return CheckpointStatus::Foreign;
  }
  return CheckpointStatus::Ok;
}

std::string checkInFlightShape(const JobShape &shape, const pipefill::rt::InFlightBatch &b) {
  const uint32_t L = shape.numLayers();
  const bool training = shape.kind == PFRT_FILL_TRAINING;
  const uint32_t passes = training ? 2 * L : L;
  const uint32_t next = b.next_layer();
  if (L == 0 || next == 0 || next >= passes)
    return "next layer " + std::to_string(next) + " is not inside the job's " +
           std::to_string(passes) + " passes";
  if (b.batch() == 0)
    return "batch is 0";
  const uint64_t rows = uint64_t(b.batch()) * shape.rows;
  uint64_t width;
  if (next < L)
    width = shape.layers[next].inWidth;
  else if (next == L)
    width = shape.layers[L - 1].outWidth;
  else
    width = shape.layers[2 * L - next].inWidth;
  const size_t want = training ? 2 + 2 * size_t(L) : 2;
  if (static_cast<size_t>(b.tensors_size()) != want)
    return "has " + std::to_string(b.tensors_size()) + " tensors, expected " + std::to_string(want);
  if (static_cast<uint64_t>(b.tensors(0).values_size()) != rows * width)
    return "activation tensor has " + std::to_string(b.tensors(0).values_size()) +
           " values, expected " + std::to_string(rows * width) + " (batch " +
           std::to_string(b.batch()) + " at pass " + std::to_string(next) + ")";
  if (b.tensors(1).values_size() > 1)
    return "loss tensor has " + std::to_string(b.tensors(1).values_size()) + " values";
  for (uint32_t l = 0; l + 2 < static_cast<uint32_t>(b.tensors_size()) && l < 2 * L; ++l) {
    const uint32_t layer = l % L;
    const bool isX = l < L;
    const LayerShape &ls = shape.layers[layer];
    const bool live = training && ls.kind == PFRT_LAYER_MLP && layer < next &&
                      next <= 2 * L - 1 - layer;
    const uint64_t expect = live ? rows * (isX ? ls.in : ls.mid) : 0;
    const uint64_t have = static_cast<uint64_t>(b.tensors(2 + l).values_size());
    if (have != expect)
      return std::string(isX ? "stashed input" : "stashed hidden") + " of layer " +
             std::to_string(layer) + " has " + std::to_string(have) + " values, expected " +
             std::to_string(expect);
  }
  return "";
}

namespace {
// A file that starts with the checkpoint magic's name, "PFCKPT" (truncated or not: it was
// written as one; readCheckpointFile uses the same rule for "truncated").
bool isCheckpointFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  struct stat st;
  char magic[6] = {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const bool ok = regular && ::read(fd, magic, sizeof magic) == ssize_t(sizeof magic) &&
                  std::memcmp(magic, kMagic, sizeof magic) == 0;
  ::close(fd);
  return ok;
}
} // namespace

void checkCheckpointMode(const std::string &base, int rank) {
  if (base.empty())
    return;
  struct stat st;
  if (rank >= 0) {
    const std::string mine = base + ".rank" + std::to_string(rank);
    if (::stat(mine.c_str(), &st) != 0 && isCheckpointFile(base))
      throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                  "checkpoint " + base + " holds a single-process run's fill progress, but each "
                  "rank of a run under mpirun resumes from its own " + base + ".rankR (" + mine +
                  " does not exist), so this run would start at iteration 0: resume that run "
                  "as one process, or give another checkpoint path");
    return;
  }
  const std::string rank0 = base + ".rank0";
  if (::stat(base.c_str(), &st) != 0 && isCheckpointFile(rank0))
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "checkpoint " + base + " does not exist, but " + rank0 + " does: " + base +
                    ".rankR are the checkpoints of a run under mpirun (one per rank), and this "
                    "single-process run would start at iteration 0: resume that run under "
                    "mpirun with one rank per device, or give another checkpoint path");
}

void checkOutputPath(const std::string &path, const std::string &what) {
  if (path.empty() || path == "-")
    return;
  struct stat st;
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed)
    requireRegularFile(path, st); // a FIFO would block the open below; a device is no checkpoint
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK, 0644);
  if (fd < 0)
    throw Error(PFRT_ERROR_IO, what + " " + path + ": cannot be written: " + std::strerror(errno) +
                                   " (checked before the run starts)");
  ::close(fd);
  if (!existed)
    ::unlink(path.c_str());
  // The checkpoint's temp files go into its directory.
  if (::access(dirOf(path).c_str(), W_OK) != 0)
    throw Error(PFRT_ERROR_IO, what + " " + path + ": its directory is not writable: " +
                                   std::strerror(errno));
}

} // namespace pfrt
