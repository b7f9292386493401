//===- OutputFiles.h - pipefill-compile's outputs, created early -*- C++ -*-===//
//
// The driver's output files are created on a helper thread while the job is
// imported (a serial phase: the other core is idle). Creating a file
// truncates what an earlier run left at that path, and dropping a 28 MB
// report's blocks took 7-20 ms of kernel time on this project's VMs (ext4,
// mounted with discard): at export time that sat on the exports' critical
// path, and for the --timing file at the very end of the run, alone.
//
// As before, a file that is not kept (the run failed) is removed, so a
// failed run leaves no output behind, not even an earlier run's.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_PIPEFILL_COMPILE_OUTPUTFILES_H
#define PIPEFILL_TOOLS_PIPEFILL_COMPILE_OUTPUTFILES_H

#include "support/Files.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pipefill::compile {

/// False, with a usage error, when two of the (option, path) outputs name
/// one file, or one names an input (the JobSpec, the --profile):
/// pipefill::overlappingFiles. Two outputs would both write it (take() gives a
/// path taken twice a second handle), leaving it corrupt with exit 0, and an
/// output over an input is created (truncated) before the input is read, then
/// removed when the run fails: the input was lost. `inputs`: (what, path),
/// e.g. ("the input", job) and ("the --profile file", profile).
inline bool checkOutputPaths(const std::vector<std::pair<const char *, std::string>> &outputs,
                             const std::vector<std::pair<const char *, std::string>> &inputs) {
  std::vector<std::pair<std::string, std::string>> out, in(inputs.begin(), inputs.end());
  for (const auto &[option, path] : outputs)
    out.push_back({std::string("--") + option, path});
  const std::string clash = pipefill::overlappingFiles(out, in);
  if (!clash.empty())
    llvm::errs() << "pipefill-compile: " << clash << "\n";
  return clash.empty();
}

class OutputFiles {
public:
  /// Starts creating the files at `paths` (empty paths and "-", standard
  /// output, are left to take()).
  explicit OutputFiles(const std::vector<std::string> &paths) {
    for (const std::string &path : paths)
      if (!path.empty() && path != "-")
        entries[path];
    if (!entries.empty())
      helper = std::thread([this] {
        for (auto &[path, entry] : entries)
          entry.file = mlir::openOutputFile(path, &entry.error);
      });
  }
  ~OutputFiles() { wait(); }
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;

  /// The file created for `path` (waiting for the helper), or one created
  /// now where none was (standard output; the driver refuses a path given
  /// twice, which would get a second handle here); null, with
  /// the error printed, when it cannot be written. Each path's file is
  /// taken once; takes of different paths may run on different threads.
  std::unique_ptr<llvm::ToolOutputFile> take(llvm::StringRef path) {
    wait();
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file;
    auto it = entries.find(path.str());
    if (it != entries.end() && !it->second.taken.exchange(true)) {
      file = std::move(it->second.file);
      error = it->second.error;
    } else {
      file = mlir::openOutputFile(path, &error);
    }
    if (!file)
      llvm::errs() << "pipefill-compile: cannot write '" << path << "': " << error << "\n";
    return file;
  }

private:
  void wait() {
    std::call_once(joined, [this] {
      if (helper.joinable())
        helper.join();
    });
  }

  struct Entry {
    std::unique_ptr<llvm::ToolOutputFile> file;
    std::string error;
    std::atomic<bool> taken{false};
  };
  /// Keys fixed before the helper starts; it fills the values, and take()
  /// reads them only after joining it.
  std::map<std::string, Entry> entries;
  std::thread helper;
  std::once_flag joined;
};

} // namespace pipefill::compile

#endif // PIPEFILL_TOOLS_PIPEFILL_COMPILE_OUTPUTFILES_H
