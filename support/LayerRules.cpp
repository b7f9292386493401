//===- LayerRules.cpp - the fill-workload rules compiler and runtime share ===//
#include "support/LayerRules.h"

namespace pipefill {

bool checkFillLayers(bool training, const std::vector<LayerShape> &layers,
                     LayerProblem &problem) {
  auto bad = [&](int layer, std::string message) {
    problem.layer = layer;
    problem.message = std::move(message);
    return false;
  };
  if (layers.empty())
    return bad(-1, "has no layers");
  bool encoder = false, mlp = false;
  uint32_t width = 0, hidden = 0, seq = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerShape &d = layers[i];
    int l = static_cast<int>(i);
    switch (d.family) {
    case LayerFamily::Encoder:
      if (training)
        return bad(l, "TRAINING jobs support MLP and GEMM_CHAIN layers only (this is an "
                      "encoder layer)");
      if (d.hidden == 0 || d.heads == 0 || d.seq == 0 || d.ffn == 0)
        return bad(l, "encoder layer needs hidden, heads, seq and ffn > 0");
      if (d.hidden % d.heads != 0)
        return bad(l, "hidden (" + std::to_string(d.hidden) + ") is not a multiple of heads (" +
                          std::to_string(d.heads) + ")");
      if (encoder && (d.hidden != hidden || d.seq != seq))
        return bad(l, "all encoder layers of a job must have the same hidden and seq");
      if (width != 0 && width != d.hidden)
        return bad(l, "input width " + std::to_string(d.hidden) +
                          " does not match the previous layer's output width " +
                          std::to_string(width));
      encoder = true;
      hidden = d.hidden;
      seq = d.seq;
      width = d.hidden;
      break;
    case LayerFamily::Mlp:
      if (d.in == 0 || d.hidden == 0 || d.out == 0)
        return bad(l, "MLP layer needs in, hidden and out > 0");
      if (width != 0 && width != d.in)
        return bad(l, "MLP input width " + std::to_string(d.in) +
                          " does not match the previous layer's output width " +
                          std::to_string(width));
      mlp = true;
      width = d.out;
      break;
    case LayerFamily::GemmChain:
      if (d.width != 0 && width != 0 && d.width != width)
        return bad(l, "GEMM_CHAIN width " + std::to_string(d.width) +
                          " does not match the previous layer's output width " +
                          std::to_string(width));
      if (width == 0)
        width = d.width ? d.width : 64;
      break;
    default:
      return bad(l, "unknown layer kind " + std::to_string(static_cast<int>(d.family)));
    }
    if (encoder && mlp)
      return bad(l, "mixes ENCODER and MLP layers (one family per job)");
  }
  return true;
}

} // namespace pipefill
