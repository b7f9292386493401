//===- ProtoText.cpp - one reader front end for every protobuf input ------===//
#include "support/ProtoText.h"
#include "support/Files.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

namespace pb = google::protobuf;

namespace pipefill {

std::string Diagnostic::str() const {
  std::string out = file.empty() ? "-" : file;
  if (line > 0)
    out += ":" + std::to_string(line) + ":" + std::to_string(column > 0 ? column : 1);
  out += severity == Severity::Error ? ": error: " : ": warning: ";
  return out + message;
}

void Diagnostics::error(const std::string &file, int line, int column, std::string message) {
  list_.push_back({Diagnostic::Severity::Error, file, line, column, std::move(message)});
  ++errors_;
}

void Diagnostics::warning(const std::string &file, int line, int column, std::string message) {
  list_.push_back({Diagnostic::Severity::Warning, file, line, column, std::move(message)});
}

std::string Diagnostics::str() const {
  std::string out;
  for (const Diagnostic &d : list_) {
    if (!out.empty())
      out += "\n";
    out += d.str();
  }
  return out;
}

void ProtoErrorCollector::AddError(int line, pb::io::ColumnNumber column,
                                   const std::string &message) {
  int l = line, c = column;
  pointAtValue(message, l, c);
  out_.error(file_, l + 1, c + 1, message);
  hadError_ = true;
}

void ProtoErrorCollector::AddWarning(int line, pb::io::ColumnNumber column,
                                     const std::string &message) {
  out_.warning(file_, line + 1, column + 1, message);
}

void ProtoErrorCollector::pointAtValue(const std::string &message, int &line,
                                       int &column) const {
  if (message.rfind("Unknown enumeration value", 0) != 0)
    return;
  size_t q1 = message.find('"');
  size_t q2 = q1 == std::string::npos ? q1 : message.find('"', q1 + 1);
  if (q2 == std::string::npos || q2 == q1 + 1)
    return;
  std::string quoted = message.substr(q1 + 1, q2 - q1 - 1);
  size_t offset = 0;
  for (int l = 0; l < line && offset != std::string::npos; ++l) {
    offset = text_.find('\n', offset);
    if (offset != std::string::npos)
      ++offset;
  }
  if (offset == std::string::npos)
    return;
  size_t end = std::min(text_.size(), offset + size_t(column < 0 ? 0 : column));
  size_t at = text_.substr(0, end).rfind(quoted);
  if (at == std::string::npos)
    return;
  size_t lineStart = text_.rfind('\n', at == 0 ? 0 : at - 1);
  line = 0;
  for (size_t i = 0; i < at; ++i)
    line += text_[i] == '\n';
  column = lineStart == std::string::npos || at == 0 ? int(at) : int(at - lineStart - 1);
}

namespace {
bool hasSuffix(const std::string &s, const char *suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
} // namespace

bool isTextProtoPath(const std::string &path) {
  for (const char *ext : {".pbtxt", ".textproto", ".txtpb", ".prototxt", ".txt"})
    if (hasSuffix(path, ext))
      return true;
  return false;
}

bool isBinaryProtoPath(const std::string &path) {
  return hasSuffix(path, ".pb") || hasSuffix(path, ".binpb") || hasSuffix(path, ".bin");
}

bool readsAsTextProto(const std::string &path, const std::string &data) {
  if (isTextProtoPath(path))
    return true;
  return !isBinaryProtoPath(path) && looksLikeTextProto(data);
}

bool looksLikeTextProto(const std::string &data) {
  for (unsigned char c : data)
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v')
      return false;
  return true;
}

bool parseTextProto(const std::string &file, const std::string &text, pb::Message &msg,
                    pb::TextFormat::ParseInfoTree *tree, Diagnostics &diags) {
  if (text.size() > kMaxInputBytes) {
    diags.error(file, 0, 0,
                "input is " + std::to_string(text.size()) + " bytes; the limit is " +
                    std::to_string(kMaxInputBytes) + " bytes");
    return false;
  }
  pb::TextFormat::Parser parser;
  ProtoErrorCollector collector(file, text, diags);
  parser.RecordErrorsTo(&collector);
  if (tree)
    parser.WriteLocationsTo(tree);
  // Nesting deeper than any schema of ours is a malformed input, not a reason
  // to recurse without bound.
  parser.SetRecursionLimit(64);
  if (!parser.ParseFromString(text, &msg) || collector.hadError()) {
    if (!collector.hadError())
      diags.error(file, 1, 1, "could not parse the " + msg.GetDescriptor()->name());
    return false;
  }
  return true;
}

bool parseBinaryProto(const std::string &file, const std::string &data, pb::Message &msg,
                      Diagnostics &diags) {
  if (data.size() > kMaxInputBytes) {
    diags.error(file, 0, 0,
                "input is " + std::to_string(data.size()) + " bytes; the limit is " +
                    std::to_string(kMaxInputBytes) + " bytes");
    return false;
  }
  pb::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
  pb::io::CodedInputStream in(&raw);
  in.SetRecursionLimit(64);
  if (!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    diags.error(file, 0, 0,
                "not a valid binary " + msg.GetDescriptor()->name() +
                    " (truncated or corrupted protobuf)");
    return false;
  }
  return true;
}

bool readInputFile(const std::string &path, std::string &out, Diagnostics &diags) {
  // Bounded (support/Files.h): a FIFO or /dev/zero that never ends is an error, not unbounded
  // memory.
  const ReadStatus read = readBoundedFile(path, kMaxInputBytes, out);
  if (read)
    return true;
  diags.error(path, 0, 0,
              read.error == EFBIG ? "file " + read.message : "cannot open: " + read.message);
  return false;
}

SourcePos fieldPos(const pb::Message &msg, const pb::TextFormat::ParseInfoTree *tree,
                   const std::string &name, int index, SourcePos fallback) {
  if (!tree)
    return fallback;
  const pb::FieldDescriptor *field = msg.GetDescriptor()->FindFieldByName(name);
  if (!field)
    return fallback;
  if (field->is_repeated()) {
    if (index < 0)
      index = 0;
    if (index >= msg.GetReflection()->FieldSize(msg, field))
      return fallback;
  } else {
    index = -1;
  }
  auto where = tree->GetLocation(field, index);
  if (where.line < 0)
    return fallback;
  return {where.line + 1, where.column + 1};
}

const pb::TextFormat::ParseInfoTree *nestedTree(const pb::Message &msg,
                                                const pb::TextFormat::ParseInfoTree *tree,
                                                const std::string &name, int index) {
  if (!tree)
    return nullptr;
  const pb::FieldDescriptor *field = msg.GetDescriptor()->FindFieldByName(name);
  if (!field)
    return nullptr;
  if (field->is_repeated()) {
    if (index < 0 || index >= msg.GetReflection()->FieldSize(msg, field))
      return nullptr;
  } else {
    index = -1;
  }
  return tree->GetTreeForNested(field, index);
}

bool fieldWritten(const pb::Message &msg, const pb::TextFormat::ParseInfoTree *tree,
                  const std::string &name) {
  return fieldPos(msg, tree, name).known();
}

} // namespace pipefill
