//===- Utf8.h - UTF-8 well-formedness -------------------------*- C++ -*-===//
//
// proto3 `string` fields must hold UTF-8: a binary StreamProgram with a name
// that is not is refused by protobuf's parser, and JSON reports must not
// carry it either. Protobuf's text-format parser accepts any byte written as
// an escape ("\xff"), so the readers check every string field with this
// (checkLimits) before anything is compiled or run.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_UTF8_H
#define PIPEFILL_SUPPORT_UTF8_H

#include <cstddef>
#include <string_view>

namespace pipefill {

/// The offset of the first byte that does not belong to a well-formed UTF-8
/// sequence (Unicode 15, table 3-7: no overlong forms, no surrogates
/// U+D800..U+DFFF, nothing above U+10FFFF), or npos when `s` is all UTF-8.
inline size_t firstInvalidUtf8(std::string_view s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; // the range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0)
        lo = 0xA0; // overlong below U+0800
      else if (b == 0xED)
        hi = 0x9F; // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0)
        lo = 0x90; // overlong below U+10000
      else if (b == 0xF4)
        hi = 0x8F; // above U+10FFFF
    } else {
      return i; // a continuation byte, C0/C1 (overlong) or F5..FF
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi)
      return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF)
        return i;
    i += len;
  }
  return std::string_view::npos;
}

inline bool isValidUtf8(std::string_view s) {
  return firstInvalidUtf8(s) == std::string_view::npos;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_UTF8_H
