// UTF-8 well-formedness against closed-form counts (every 1- and 2-byte string, every 3- and
// 4-byte sequence from its lead byte) and an encoder written out here, independently.
#include "support/Utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

using namespace pipefill;

namespace {

// The textbook encoding of one code point, without any validity rule.
std::string encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

} // namespace

// Every code point but the surrogates encodes to valid UTF-8; surrogates and code points above
// U+10FFFF (whose lead byte is F4 90.. or F5..F7) do not.
TEST(Utf8, EveryScalarValueIsValidAndNothingElse) {
  int64_t valid = 0;
  for (uint32_t cp = 0; cp <= 0x13FFFF; ++cp) {
    const bool scalar = cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    const bool ok = isValidUtf8(encode(cp));
    ASSERT_EQ(ok, scalar) << std::hex << cp;
    valid += ok;
  }
  EXPECT_EQ(valid, 0x110000 - 0x800); // all code points less the 2048 surrogates
}

// Closed-form counts over every string of one and two bytes: 128 ASCII bytes; 128 x 128 ASCII
// pairs plus the 1920 two-byte sequences of U+0080..U+07FF (C0 and C1 would be overlong).
TEST(Utf8, EveryOneAndTwoByteString) {
  int valid1 = 0, valid2 = 0;
  for (int a = 0; a < 256; ++a) {
    valid1 += isValidUtf8(std::string(1, char(a)));
    for (int b = 0; b < 256; ++b)
      valid2 += isValidUtf8(std::string{char(a), char(b)});
  }
  EXPECT_EQ(valid1, 128);
  EXPECT_EQ(valid2, 128 * 128 + (0x800 - 0x80));
}

// Every three-byte string led by E0..EF: the 0xFFFF - 0x800 + 1 code points less the 2048
// surrogates (E0 80..9F would be overlong, ED A0..BF a surrogate).
TEST(Utf8, EveryThreeByteSequence) {
  int64_t valid = 0;
  for (int a = 0xE0; a <= 0xEF; ++a)
    for (int b = 0; b < 256; ++b)
      for (int c = 0; c < 256; ++c)
        valid += isValidUtf8(std::string{char(a), char(b), char(c)});
  EXPECT_EQ(valid, (0x10000 - 0x800) - 0x800);
}

// Four-byte sequences led by F0..F7 with any second byte and continuation third and fourth
// bytes: exactly the 2^20 code points U+10000..U+10FFFF (F0 80..8F overlong, F4 90.. and F5..F7
// beyond Unicode).
TEST(Utf8, EveryFourByteLeadAndSecondByte) {
  int64_t valid = 0;
  for (int a = 0xF0; a <= 0xF7; ++a)
    for (int b = 0; b < 256; ++b)
      for (int c = 0x80; c <= 0xBF; ++c)
        for (int d = 0x80; d <= 0xBF; ++d)
          valid += isValidUtf8(std::string{char(a), char(b), char(c), char(d)});
  EXPECT_EQ(valid, 0x100000);
  // A non-continuation third or fourth byte breaks the sequence.
  EXPECT_FALSE(isValidUtf8("\xF0\x90\x41\x80"));
  EXPECT_FALSE(isValidUtf8("\xF0\x90\x80\xC0"));
}

// The offset names the first byte of the first bad sequence; truncation at the end is bad.
TEST(Utf8, FirstInvalidOffset) {
  EXPECT_EQ(firstInvalidUtf8(""), std::string_view::npos);
  EXPECT_EQ(firstInvalidUtf8("b\xC3\xA9rt \xE2\x82\xAC"), std::string_view::npos); // "bért €"
  EXPECT_EQ(firstInvalidUtf8("ab\xFF" "c"), 2u);
  EXPECT_EQ(firstInvalidUtf8("ab\xE2\x82"), 2u);
  EXPECT_EQ(firstInvalidUtf8(std::string_view("a\0\x80", 3)), 2u);
}
