//===- Format.h - number formatting for diagnostics -------------*- C++ -*-===//
#ifndef PIPEFILL_SUPPORT_FORMAT_H
#define PIPEFILL_SUPPORT_FORMAT_H

#include <cstdio>
#include <string>

namespace pipefill {

/// Shortest readable form of a double for messages: "2.5", "1e+06", "-100".
inline std::string fmtNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
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
