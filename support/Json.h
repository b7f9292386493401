//===- Json.h - a minimal streaming JSON writer -----------------*- C++ -*-===//
//
// Pretty-printed (two-space indent), one writer for every JSON report: the
// runtime's session and comparison reports and the cluster simulator's run and
// study reports. Header-only and MLIR-free so the runtime can use it.
//
// Numbers: integer overloads print exactly; a double prints with one decimal
// when it is integral ("2.0", so a reader sees a real) and with 12 significant
// digits otherwise; NaN and infinities print as null. A null key writes a bare
// array element.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_JSON_H
#define PIPEFILL_SUPPORT_JSON_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace pipefill {

class JsonWriter {
public:
  // Containers nested deeper than `prettyDepth` print on one line ("{"a": 1, "b": 2}"); the
  // default pretty-prints everything. A trace uses 2: one event per line.
  explicit JsonWriter(size_t prettyDepth = SIZE_MAX) : prettyDepth_(prettyDepth) {}

  JsonWriter &beginObject(const char *key = nullptr) { return open(key, '{'); }
  JsonWriter &endObject() { return close('}'); }
  JsonWriter &beginArray(const char *key = nullptr) { return open(key, '['); }
  JsonWriter &endArray() { return close(']'); }

  JsonWriter &value(const char *key, const std::string &v) {
    item(key);
    quote(v);
    return *this;
  }
  JsonWriter &value(const char *key, const char *v) { return value(key, std::string(v)); }
  JsonWriter &value(const char *key, bool v) {
    item(key);
    out_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter &value(const char *key, double v) {
    item(key);
    number(v);
    return *this;
  }
  JsonWriter &value(const char *key, uint64_t v) {
    item(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter &value(const char *key, int64_t v) {
    item(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter &value(const char *key, uint32_t v) { return value(key, uint64_t(v)); }
  JsonWriter &value(const char *key, int32_t v) { return value(key, int64_t(v)); }
  JsonWriter &null(const char *key) {
    item(key);
    out_ += "null";
    return *this;
  }
  JsonWriter &numbers(const char *key, const std::vector<double> &vs) {
    item(key);
    out_ += '[';
    for (size_t i = 0; i < vs.size(); ++i) {
      if (i)
        out_ += ", ";
      number(vs[i]);
    }
    out_ += ']';
    return *this;
  }
  const std::string &str() const { return out_; }

private:
  JsonWriter &open(const char *key, char c) {
    item(key);
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter &close(char c) {
    bool empty = first_.back();
    const size_t level = first_.size();
    first_.pop_back();
    if (!empty && level <= prettyDepth_)
      newline();
    out_ += c;
    if (first_.empty())
      out_ += '\n';
    return *this;
  }
  void item(const char *key) {
    if (!first_.empty()) {
      const bool firstItem = first_.back();
      if (!firstItem)
        out_ += ',';
      first_.back() = false;
      if (first_.size() <= prettyDepth_)
        newline();
      else if (!firstItem)
        out_ += ' ';
    }
    if (key) {
      quote(key);
      out_ += ": ";
    }
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * first_.size(), ' ');
  }
  void number(double v) {
    if (!std::isfinite(v)) {
      out_ += "null";
      return;
    }
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 1e15)
      std::snprintf(buf, sizeof buf, "%.1f", v);
    else
      std::snprintf(buf, sizeof buf, "%.12g", v);
    out_ += buf;
  }
  void quote(const std::string &s) {
    out_ += '"';
    for (unsigned char c : s) {
      switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\t': out_ += "\\t"; break;
      case '\r': out_ += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += static_cast<char>(c);
        }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
  size_t prettyDepth_;
};

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_JSON_H
