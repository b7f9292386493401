//===- Checked.h - overflow-safe integer arithmetic on sizes and times -*- C++ -*-===//
//
// Saturating helpers for byte and count arithmetic: a sum or product that
// would leave int64 clamps to INT64_MAX (or INT64_MIN), so a capacity check
// against it fails cleanly instead of wrapping into a small or negative
// number (undefined behaviour in C++). Readers bound inputs (support/Limits.h)
// so saturation is a second line of defence, not a normal path.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_CHECKED_H
#define PIPEFILL_SUPPORT_CHECKED_H

#include <cstdint>
#include <limits>

namespace pipefill {

inline int64_t satAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return r;
}

inline int64_t satSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return r;
}

inline int64_t satMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                              : std::numeric_limits<int64_t>::max();
  return r;
}

/// -v without the undefined negation of INT64_MIN.
inline int64_t satNeg(int64_t v) {
  return v == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -v;
}

inline uint64_t satAddU(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

inline uint64_t satMulU(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_CHECKED_H
