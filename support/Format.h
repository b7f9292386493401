//===- Format.h - formatting for diagnostics ---------------------*- C++ -*-===//
#ifndef PIPEFILL_SUPPORT_FORMAT_H
#define PIPEFILL_SUPPORT_FORMAT_H

#include <cstdarg>
#include <cstdio>
#include <string>

namespace pipefill {

/// Shortest readable form of a double for messages: "2.5", "1e+06", "-100".
inline std::string fmtNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// printf into a std::string, of any length.
inline std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char *fmt, ...) {
  va_list args, probe;
  va_start(args, fmt);
  va_copy(probe, args);
  int n = std::vsnprintf(nullptr, 0, fmt, probe);
  va_end(probe);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0)
    std::vsnprintf(out.data(), size_t(n) + 1, fmt, args);
  va_end(args);
  return out;
}

/// Bytes as a human-readable quantity: "12.0 GB", "512.0 MB" (decimal units).
inline std::string fmtBytes(double bytes) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_FORMAT_H
