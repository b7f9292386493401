//===- ArgCursor.h - pipefill-run's argument cursor ------------------------===//
//
// Walking the command line: an option's name, its inline (--x=v) or next
// value, and checked number parsing.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_TOOLS_PIPEFILL_RUN_ARGCURSOR_H
#define PIPEFILL_TOOLS_PIPEFILL_RUN_ARGCURSOR_H

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace pipefill::run {

inline bool parseUnsigned(const std::string &s, unsigned long long max, unsigned long long &out) {
  if (s.empty() || s[0] == '-' || s[0] == '+')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end || v > max)
    return false;
  out = v;
  return true;
}

inline bool parseDouble(const std::string &s, double &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

/// One argument of the command line: its name, an inline value (--x=v) and
/// the arguments after it.
class ArgCursor {
public:
  ArgCursor(int argc, char **argv, int &i) : argc(argc), argv(argv), i(i) {
    arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasInlineValue = true;
      }
    }
  }

  const std::string &name() const { return arg; }
  bool noValue() const { return !hasInlineValue; }

  /// The option's value (inline or the next argument); false if none.
  bool next(std::string &v) {
    if (hasInlineValue) {
      v = value;
      return true;
    }
    if (i + 1 >= argc)
      return false;
    v = argv[++i];
    return true;
  }
  /// The value as an integer in [0, max] (v: the text, for messages).
  bool nextUnsigned(unsigned long long max, std::string &v, unsigned long long &n) {
    return next(v) && parseUnsigned(v, max, n);
  }
  /// The value as a number > 0.
  bool nextPositive(std::string &v, double &x) {
    return next(v) && parseDouble(v, x) && x > 0;
  }
  /// The value as one of `choices`.
  bool nextChoice(std::string &v, std::initializer_list<const char *> choices) {
    if (!next(v))
      return false;
    for (const char *c : choices)
      if (v == c)
        return true;
    return false;
  }

private:
  int argc;
  char **argv;
  int &i;
  std::string arg, value;
  bool hasInlineValue = false;
};

} // namespace pipefill::run

#endif // PIPEFILL_TOOLS_PIPEFILL_RUN_ARGCURSOR_H
