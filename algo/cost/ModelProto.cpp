//===- ModelProto.cpp - JobSpec `model { }` block -> stage costs ----------===//

#include "algo/cost/ModelProto.h"

#include "proto/pipefill.pb.h"

namespace pipefill::cost {

bool configFromProto(const pipefill::Model &m, TransformerConfig &out,
                     std::string &error, std::string *field) {
  struct Required {
    const char *name;
    bool present;
  };
  const Required required[] = {
      {"layers", m.has_layers()},         {"hidden", m.has_hidden()},
      {"heads", m.has_heads()},           {"seq_length", m.has_seq_length()},
      {"vocab", m.has_vocab()},           {"tp", m.has_tp()},
      {"pp", m.has_pp()},                 {"global_batch", m.has_global_batch()},
  };
  for (const Required &r : required)
    if (!r.present) {
      error = std::string("model.") + r.name + " is missing";
      if (field)
        *field = "";
      return false;
    }
  out = TransformerConfig();
  out.layers = m.layers();
  out.hidden = m.hidden();
  out.heads = m.heads();
  out.seqLength = m.seq_length();
  out.vocab = m.vocab();
  out.ffnHidden = m.has_ffn_hidden() ? m.ffn_hidden() : 0;
  if (m.has_ffn_hidden() && m.ffn_hidden() < 1) {
    error = "model.ffn_hidden must be at least 1 (got " +
            std::to_string(m.ffn_hidden()) + ")";
    if (field)
      *field = "ffn_hidden";
    return false;
  }
  out.microBatchSize = m.has_micro_batch_size() ? m.micro_batch_size() : 1;
  out.tp = m.tp();
  out.pp = m.pp();
  out.dp = m.has_dp() ? m.dp() : 1;
  out.globalBatch = m.global_batch();
  out.recompute = m.recompute();
  out.gpu = m.has_gpu() ? m.gpu() : "A100-80GB";
  if (m.has_efficiency() && !(m.efficiency() > 0 && m.efficiency() <= 1)) {
    error = "model.efficiency must be in (0, 1] (got " +
            std::to_string(m.efficiency()) + ")";
    if (field)
      *field = "efficiency";
    return false;
  }
  out.efficiency = m.has_efficiency() ? m.efficiency() : 0;
  out.zeroStage = m.has_zero_stage() ? m.zero_stage() : 0;
  return validateConfig(out, error, field);
}

bool stageCostsFromModel(const pipefill::Model &model,
                         sched::PipelineSpec &spec, HardwareOut &hw,
                         std::string &error, std::string *field) {
  TransformerConfig cfg;
  if (!configFromProto(model, cfg, error, field))
    return false;
  ModelCosts costs;
  if (!computeModelCosts(cfg, spec.schedule, spec.virtualStages, costs, error,
                         field))
    return false;
  spec = costs.spec;
  hw = costs.hw;
  return true;
}

} // namespace pipefill::cost
