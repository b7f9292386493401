//===- Xml.h - text for XML (SVG) and C++ comments ---------------*- C++ -*-===//
//
// Names come from JobSpecs and may hold any byte. In SVG they must be
// escaped and must not carry the control characters XML 1.0 forbids (an SVG
// with U+0001 is not well-formed; browsers refuse to draw it); in a generated
// C++ `//` comment a newline would end the comment and turn the rest of the
// name into code.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_XML_H
#define PIPEFILL_SUPPORT_XML_H

#include <cstdio>
#include <string>
#include <string_view>

namespace pipefill {

/// `s` as XML text or attribute value: `<`, `>`, `&`, `"` and `'` escaped;
/// the control characters XML 1.0 does not allow (below U+0020 except tab,
/// newline and carriage return, which become spaces too so that a title
/// stays one line) written as U+FFFD. Other bytes pass unchanged (UTF-8).
inline std::string xmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&apos;"; break;
    case '\t':
    case '\n':
    case '\r': out += ' '; break;
    default:
      if (u < 0x20)
        out += "\xEF\xBF\xBD"; // U+FFFD
      else
        out += c;
    }
  }
  return out;
}

/// `s` for one line of a `//` comment: control characters (newlines
/// included) and DEL written as `\xNN`, so nothing after them becomes code.
inline std::string commentSafe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_XML_H
