//===- FileError.h - a file the binding could not read or write -*- C++ -*-===//
//
// Thrown by both halves of the Python binding (the compiler's JobSpec reads,
// Compile.h; the runtime's program and checkpoint files, Session.h) and
// raised in Python as OSError (errno, message, path). Header-only, so the
// runtime-only module (pipefill._rt) uses it without the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PYTHON_FILEERROR_H
#define PIPEFILL_PYTHON_FILEERROR_H

#include <stdexcept>
#include <string>

namespace pipefill::embed {

/// A file could not be read or written; `errnum` is the errno value.
struct FileError : std::runtime_error {
  FileError(const std::string &what, std::string path, int errnum)
      : std::runtime_error(what), path(std::move(path)), errnum(errnum) {}
  std::string path;
  int errnum;
};

} // namespace pipefill::embed

#endif // PIPEFILL_PYTHON_FILEERROR_H
