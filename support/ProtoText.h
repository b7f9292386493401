//===- ProtoText.h - one reader front end for every protobuf input -*- C++ -*-===//
//
// Every protobuf input of pipefill (JobSpec, stream programs, profiles,
// checkpoints) goes through these few functions: one error collector that
// turns protobuf's syntax errors into located diagnostics, a size cap before
// parsing, and a locator that finds the file:line:col of any field through
// protobuf's parse-info tree. Plain C++ (protobuf only): the compiler turns
// the diagnostics into MLIR diagnostics, the tools and the runtime print them.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_PROTOTEXT_H
#define PIPEFILL_SUPPORT_PROTOTEXT_H

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include "support/Files.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill {

/// One located message. line/column are 1-based; 0 means "no position" (the
/// diagnostic names the file only, e.g. for binary inputs).
struct Diagnostic {
  enum class Severity { Error, Warning };
  Severity severity = Severity::Error;
  std::string file;
  int line = 0, column = 0;
  std::string message;

  /// "FILE:LINE:COL: error: MESSAGE" (or "FILE: error: MESSAGE").
  std::string str() const;
};

class Diagnostics {
public:
  void error(const std::string &file, int line, int column, std::string message);
  void warning(const std::string &file, int line, int column, std::string message);
  bool hasErrors() const { return errors_ > 0; }
  size_t errorCount() const { return errors_; }
  const std::vector<Diagnostic> &all() const { return list_; }
  /// Every diagnostic on its own line (no trailing newline).
  std::string str() const;

private:
  std::vector<Diagnostic> list_;
  size_t errors_ = 0;
};

/// The single protobuf error collector of the project. protobuf reports an
/// unknown enum value at the token after it; when the message quotes the value
/// the position is moved back onto the value itself.
class ProtoErrorCollector : public google::protobuf::io::ErrorCollector {
public:
  ProtoErrorCollector(std::string file, const std::string &text, Diagnostics &out)
      : file_(std::move(file)), text_(text), out_(out) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override;
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string &message) override;
  bool hadError() const { return hadError_; }

private:
  void pointAtValue(const std::string &message, int &line, int &column) const;
  std::string file_;
  const std::string &text_;
  Diagnostics &out_;
  bool hadError_ = false;
};

// kMaxInputBytes, the size limit of every input, is in support/Files.h.

/// The one rule for which protobuf files are text: by extension, .pbtxt
/// .textproto .txtpb .prototxt .txt are text (what writers produce for those
/// names) and .pb .binpb .bin binary; any other name is read as text when its
/// bytes look like text (no control characters but whitespace). Every reader
/// and writer of stream programs, profiles and checkpoints' companions (the
/// runtime, the compiler's profile pass, the Python package) uses it, so a file
/// one of them writes the others read.
bool isTextProtoPath(const std::string &path);
bool isBinaryProtoPath(const std::string &path);
bool readsAsTextProto(const std::string &path, const std::string &data);
/// The content rule alone: no control characters but whitespace.
bool looksLikeTextProto(const std::string &data);

/// Parses `text` (protobuf text format) into `msg`, recording field positions
/// into `tree` when given. False (with diagnostics) on any syntax error or an
/// input over kMaxInputBytes.
bool parseTextProto(const std::string &file, const std::string &text,
                    google::protobuf::Message &msg,
                    google::protobuf::TextFormat::ParseInfoTree *tree,
                    Diagnostics &diags);

/// Parses binary protobuf with the same size cap and a recursion limit.
bool parseBinaryProto(const std::string &file, const std::string &data,
                      google::protobuf::Message &msg, Diagnostics &diags);

/// Reads a whole file; false with a diagnostic when it cannot be opened or
/// is larger than kMaxInputBytes.
bool readInputFile(const std::string &path, std::string &out, Diagnostics &diags);

/// A position in a text input (1-based; 0 = unknown).
struct SourcePos {
  int line = 0, column = 0;
  bool known() const { return line > 0; }
};

/// Position of field `name` (element `index` when repeated) of `msg`, whose
/// parse-info tree is `tree` (may be null); `fallback` when not written.
SourcePos fieldPos(const google::protobuf::Message &msg,
                   const google::protobuf::TextFormat::ParseInfoTree *tree,
                   const std::string &name, int index = -1, SourcePos fallback = {});
/// The parse-info tree of nested message field `name` (element `index`).
const google::protobuf::TextFormat::ParseInfoTree *
nestedTree(const google::protobuf::Message &msg,
           const google::protobuf::TextFormat::ParseInfoTree *tree,
           const std::string &name, int index = -1);
/// Whether field `name` was written in the text (even with its default value,
/// which proto3 implicit-presence fields otherwise cannot tell apart).
bool fieldWritten(const google::protobuf::Message &msg,
                  const google::protobuf::TextFormat::ParseInfoTree *tree,
                  const std::string &name);

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_PROTOTEXT_H
