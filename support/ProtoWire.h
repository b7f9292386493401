//===- ProtoWire.h - protobuf wire format, written directly -----*- C++ -*-===//
//
// Protobuf's wire format (https://protobuf.dev/programming-guides/encoding/)
// written field by field at a cursor, without messages: for code that emits
// 10^5-10^6 small messages and would otherwise spend more on building and
// serializing them than on what they say (codegen/StreamProgramWire.h).
// Proto3 semantics as protoc's generated serializer has them: a singular
// scalar is written only when it is not zero (a double by its bits, so -0.0
// is written), int32 and enum values are sign-extended to 64 bits, a set
// sub-message is written even when empty. support/tests/ProtoWireTest.cpp
// checks every writer against SerializeToString.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_PROTOWIRE_H
#define PIPEFILL_SUPPORT_PROTOWIRE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pipefill {

/// Writes protobuf wire-format fields at a cursor, as proto3's generated
/// serializer writes them. The caller provides the room.
class WireWriter {
public:
  explicit WireWriter(char *at) : begin(at), at(at) {}
  size_t size() const { return size_t(at - begin); }
  std::string_view bytes() const { return std::string_view(begin, size()); }

  void varint(uint64_t v) {
    while (v >= 0x80) {
      *at++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *at++ = static_cast<char>(v);
  }
  static size_t varintSize(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  }
  void tag(uint32_t field, uint32_t wireType) { varint((uint64_t(field) << 3) | wireType); }

  // Singular proto3 scalars: written only when not zero.
  void u32(uint32_t field, uint32_t v) {
    if (v != 0) {
      tag(field, 0);
      varint(v);
    }
  }
  void u64(uint32_t field, uint64_t v) {
    if (v != 0) {
      tag(field, 0);
      varint(v);
    }
  }
  /// int32 and enum fields: negative values sign-extended to ten bytes.
  void i32(uint32_t field, int32_t v) {
    if (v != 0) {
      tag(field, 0);
      varint(static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
  }
  void boolean(uint32_t field, bool v) {
    if (v) {
      tag(field, 0);
      *at++ = 1;
    }
  }
  /// A double by its bits: -0.0 is written, +0.0 is not.
  void f64(uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits == 0)
      return;
    tag(field, 1);
    for (int i = 0; i < 8; ++i)
      *at++ = static_cast<char>(bits >> (8 * i));
  }
  void string(uint32_t field, std::string_view s) {
    if (!s.empty())
      bytes(field, s);
  }
  /// A length-delimited field, written even when empty (a set message).
  void bytes(uint32_t field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    if (!s.empty()) // memcpy's source may not be null, even for no bytes
      std::memcpy(at, s.data(), s.size());
    at += s.size();
  }

  /// Most bytes of one field numbered below 16 whose value is a scalar.
  static constexpr size_t kMaxScalarFieldBytes = 1 + 10;

private:
  char *begin, *at;
};

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_PROTOWIRE_H
