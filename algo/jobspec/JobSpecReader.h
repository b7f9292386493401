//===- JobSpecReader.h - the one JobSpec front end -------------*- C++ -*-===//
//
// Reads a JobSpec (proto/pipefill.proto, text format) and checks it: syntax,
// the documented range of every numeric field (support/Limits.h), and the
// semantic rules (required blocks, cross-field rules, workload shapes the
// runtime can run). Plain C++ (protobuf + algo/cost); the importer turns the
// diagnostics into MLIR diagnostics and pipefill-sim prints them, so both say
// the same thing about the same bad JobSpec.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_ALGO_JOBSPEC_JOBSPECREADER_H
#define PIPEFILL_ALGO_JOBSPEC_JOBSPECREADER_H

#include "proto/pipefill.pb.h"
#include "support/LayerRules.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include <string>

namespace pipefill::jobspec {

/// A parsed JobSpec with the positions of its fields.
struct JobSource {
  std::string file;
  JobSpec spec;
  google::protobuf::TextFormat::ParseInfoTree tree;

  /// Position of `field` (element `index`) in `msg` whose tree is `t`.
  SourcePos pos(const google::protobuf::Message &msg,
                const google::protobuf::TextFormat::ParseInfoTree *t, const std::string &field,
                int index = -1, SourcePos fallback = {}) const {
    return fieldPos(msg, t, field, index, fallback);
  }
  /// Position of a top-level JobSpec field.
  SourcePos top(const std::string &field, int index = -1) const {
    return fieldPos(spec, &tree, field, index);
  }
  const google::protobuf::TextFormat::ParseInfoTree *sub(const std::string &field,
                                                          int index = -1) const {
    return nestedTree(spec, &tree, field, index);
  }
};

/// Most layers one fill job may expand to (after `repeat`).
constexpr int64_t kMaxJobLayers = 4096;
/// Fill layers of all jobs together after `repeat`: the planner holds a few KB per layer and
/// configuration (1000 jobs x 4096 layers ran it out of memory).
constexpr int64_t kMaxTotalFillLayers = int64_t(1) << 20;

/// Parses `text` and checks every field's range. False with diagnostics.
bool readJobSpec(const std::string &file, const std::string &text, JobSource &job,
                 Diagnostics &diags);
/// readJobSpec on the contents of `path`.
bool loadJobSpec(const std::string &path, JobSource &job, Diagnostics &diags);

/// Replaces a `model { }` block by the stage costs, pipeline size, hardware
/// preset and tail it stands for (fields the user wrote win over the preset).
bool expandModel(JobSource &job, Diagnostics &diags);

/// Rules for the fill jobs, shared by every consumer (the planner block has plain ranges only,
/// checked by readJobSpec).
bool checkFillJobs(const JobSource &job, Diagnostics &diags);
/// Hardware fields that must be non-negative/positive when given.
bool checkHardware(const JobSource &job, bool requireMemory, Diagnostics &diags);

/// Everything the compiler needs: expands a model block, then checks the
/// pipeline, hardware, stage costs, tail, planner and fill jobs.
bool checkCompileJob(JobSource &job, Diagnostics &diags);

/// The runnable shape the runtime will get for a JobSpec fill layer (the
/// exporter's defaults: heads 1, seq 128, ffn 4 x hidden when not written).
LayerShape layerShape(const FillLayer &layer);

/// Name of a fill job in messages: "fill job 'x'" or "fill_job[i]".
std::string fillJobName(const FillJob &job, int index);

} // namespace pipefill::jobspec

#endif // PIPEFILL_ALGO_JOBSPEC_JOBSPECREADER_H
