//===- Files.h - writing outputs whole, and telling paths apart -*- C++ -*-===//
//
// Plain POSIX, no exceptions: the runtime's reports and profiles and the
// tools' outputs go through writeFileAtomically, so that a reader (or the
// next run) never finds a half-written file after a full disk, a size limit
// or a kill; samePath lets a tool refuse two outputs (or an output and an
// input) that are one file.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_FILES_H
#define PIPEFILL_SUPPORT_FILES_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace pipefill {

/// Inputs larger than this are refused before parsing (256 MiB): the largest
/// stream program the compiler writes for the 8K-GPU study is a few MB.
constexpr size_t kMaxInputBytes = size_t(256) << 20;

/// Writes `data` to `path`. A regular file (or a path that does not exist yet) is written to a
/// temporary file next to it, flushed to disk and renamed over it, keeping the old file's mode;
/// a symbolic link is followed and its target replaced. Anything else that exists (a FIFO,
/// /dev/stdout, a terminal) is written in place: renaming would replace it. Returns "" on
/// success, else why it failed (the old file, if any, is then left as it was).
std::string writeFileAtomically(const std::string &path, const std::string &data);

/// True when `a` and `b` name the same file: the same inode when both exist, else the same
/// absolute path once "." / ".." and symbolic links of their directories are resolved (by the
/// text alone where a directory does not exist: "none/../x" is x).
bool samePath(const std::string &a, const std::string &b);

/// What samePath compares: two paths name the same file exactly when they share a key (the
/// inode of a file that is there; the resolved, else textual, absolute path). For telling many
/// paths apart at once: a map of keys instead of every pair.
std::vector<std::string> pathKeys(const std::string &path);

/// What a tool writes over: "" when no output (option, path) names an input (what, path) or
/// another output, else the message, e.g. "--svg would overwrite the job file 'j.pbtxt'" or
/// "--json and --svg both write 'o'; give each output its own file". An output over an input
/// destroys it; two outputs at one path keep the last one written. Empty paths and "-" (standard
/// output) are not files; files are told apart by samePath.
std::string overlappingFiles(const std::vector<std::pair<std::string, std::string>> &outputs,
                             const std::vector<std::pair<std::string, std::string>> &inputs);

/// What readBoundedFile found: errno (EFBIG for an input over the limit) and its message, or
/// 0 and "" when the whole input was read.
struct ReadStatus {
  int error = 0;
  std::string message;
  explicit operator bool() const { return error == 0; }
};

/// Reads `path` whole into `out` ("-": standard input), at most `limit` bytes. A regular file
/// larger than that is refused by its size before it is read; anything else (a pipe, a FIFO,
/// /dev/zero) is read until it ends or passes the limit, so an input that never ends is an error,
/// not a process that grows until the machine runs out of memory.
ReadStatus readBoundedFile(const std::string &path, size_t limit, std::string &out);

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_FILES_H
