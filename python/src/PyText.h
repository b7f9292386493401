//===- PyText.h - C++ text as a Python str, whatever its bytes -*- C++ -*-===//
//
// Messages of the compiler and the runtime quote their input: a JobSpec line, a
// name, a byte that is not UTF-8 (a Latin-1 file, a cut multi-byte character).
// nanobind's str conversion would fail on those with UnicodeDecodeError and hide
// the diagnostic, so both halves of the binding convert messages here.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PYTHON_PYTEXT_H
#define PIPEFILL_PYTHON_PYTEXT_H

#include <nanobind/nanobind.h>

#include <filesystem>
#include <string>
#include <vector>

namespace pipefill::py {

/// `text` as a str; bytes that are not UTF-8 become \xNN escapes.
inline nanobind::object pyText(const std::string &text) {
  PyObject *s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                     "backslashreplace");
  if (!s)
    throw nanobind::python_error();
  return nanobind::steal(s);
}

/// A list of pyText.
inline nanobind::list pyTexts(const std::vector<std::string> &texts) {
  nanobind::list out;
  for (const std::string &t : texts)
    out.append(pyText(t));
  return out;
}

/// A path argument (str, bytes or os.PathLike) as the file system path the C API takes:
/// TypeError (os.fspath's) for anything else, ValueError naming `what` for a NUL character (C
/// would cut the name short there; nanobind's own path conversion refused it with a TypeError
/// listing the call's signature).
inline std::filesystem::path fsPath(nanobind::handle path, const char *what) {
  nanobind::module_ os = nanobind::module_::import_("os");
  nanobind::object fs = os.attr("fsencode")(os.attr("fspath")(path));
  const std::string bytes(PyBytes_AsString(fs.ptr()), PyBytes_Size(fs.ptr()));
  if (bytes.find('\0') != std::string::npos)
    throw nanobind::value_error((std::string(what) + " contains a NUL character: " +
                                 nanobind::repr(path).c_str())
                                    .c_str());
  return std::filesystem::path(bytes);
}

} // namespace pipefill::py

#endif // PIPEFILL_PYTHON_PYTEXT_H
