//===- ModelProto.h - JobSpec `model { }` block -> stage costs ------------===//
//
// The bridge between the protobuf JobSpec and the cost model, for the
// importer (pipefill-translate) and pipefill-sim. Plain C++17 + protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_COST_MODELPROTO_H
#define PIPEFILL_ALGO_COST_MODELPROTO_H

#include "algo/cost/CostModel.h"

#include <string>

namespace pipefill {
class Model;
} // namespace pipefill

namespace pipefill::cost {

/// Copies the proto into a TransformerConfig and validates it. Required:
/// layers hidden heads seq_length vocab tp pp global_batch; defaults:
/// ffn_hidden 4h, micro_batch_size 1, dp 1, gpu "A100-80GB", efficiency the
/// preset's, zero_stage 0. On failure `field` names the offending field of
/// the model block (e.g. "global_batch"), so the caller can point at it.
bool configFromProto(const pipefill::Model &model, TransformerConfig &out,
                     std::string &error, std::string *field = nullptr);

/// The entry point for a JobSpec with a `model` block.
///
/// In:  spec.schedule and spec.virtualStages (from the JobSpec's pipeline).
/// Out: spec.stages (= pp), spec.microbatches (= global_batch / (dp * b)),
///      spec.costs (one per stage), spec.p2pLatencyUs/p2pBandwidthGBps, and
///      the tail (tail = true, dataParallel, gradBytes (max over stages),
///      dpBandwidthGBps, dpLatencyUs, optimizerUs (max over stages));
///      hw: the GPU preset's memory, PCIe, HBM, kernel launch, link figures.
/// Returns false with a one-sentence `error` (and `field`, see above);
/// `spec` and `hw` are then unspecified.
bool stageCostsFromModel(const pipefill::Model &model,
                         sched::PipelineSpec &spec, HardwareOut &hw,
                         std::string &error, std::string *field = nullptr);

} // namespace pipefill::cost

#endif // PIPEFILL_ALGO_COST_MODELPROTO_H
