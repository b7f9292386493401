//===- LayerRules.h - the fill-workload rules compiler and runtime share -*- C++ -*-===//
//
// What a fill job's layers may be, checked by one function that both the
// JobSpec front end (at import, with file:line:col) and the runtime validator
// (for programs built through the C API or read from files) call, so the
// compiler never plans a workload the runtime then rejects.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_LAYERRULES_H
#define PIPEFILL_SUPPORT_LAYERRULES_H

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill {

enum class LayerFamily { GemmChain, Encoder, Mlp };

/// The runnable shape of one layer (the runtime's pfrt_fill_layer_desc).
struct LayerShape {
  LayerFamily family = LayerFamily::GemmChain;
  uint32_t hidden = 0, heads = 0, seq = 0, ffn = 0; ///< encoder; MLP uses hidden too
  uint32_t in = 0, out = 0;                         ///< MLP
  uint32_t width = 0;                               ///< GEMM chain (0: any)
};

struct LayerProblem {
  int layer = -1; ///< index of the offending layer, -1 for the job as a whole
  std::string message;
};

/// Checks the layers of one fill job: encoder layers need hidden, heads, seq
/// and ffn > 0 with heads dividing hidden; MLP layers need in, hidden and out
/// > 0; widths chain from layer to layer; one family per job; TRAINING jobs
/// run MLP and GEMM_CHAIN layers only. False with the first problem.
bool checkFillLayers(bool training, const std::vector<LayerShape> &layers,
                     LayerProblem &problem);

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_LAYERRULES_H
