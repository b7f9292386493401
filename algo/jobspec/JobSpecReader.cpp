//===- JobSpecReader.cpp - the one JobSpec front end ----------------------===//
#include "algo/jobspec/JobSpecReader.h"

#include "algo/cost/ModelProto.h"
#include "support/Checked.h"
#include "support/Format.h"
#include "support/Limits.h"

#include <set>

namespace pb = google::protobuf;

namespace pipefill::jobspec {

namespace {

using Tree = pb::TextFormat::ParseInfoTree;

struct Emitter {
  const JobSource &job;
  Diagnostics &diags;
  bool ok = true;
  void operator()(SourcePos p, const std::string &message) {
    diags.error(job.file, p.line, p.column, message);
    ok = false;
  }
};

const char *scheduleName(Schedule s) { return Schedule_Name(s).c_str(); }

} // namespace

bool readJobSpec(const std::string &file, const std::string &text, JobSource &job,
                 Diagnostics &diags) {
  job.file = file;
  // A UTF-8 byte order mark, as some editors write at the start of a file, is not part of the
  // text format (protobuf refused it: "Interpreting non ascii codepoint 239").
  const bool bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0;
  if (!parseTextProto(file, bom ? text.substr(3) : text, job.spec, &job.tree, diags))
    return false;
  return checkLimits(job.spec, &job.tree, file, diags);
}

bool loadJobSpec(const std::string &path, JobSource &job, Diagnostics &diags) {
  std::string text;
  if (!readInputFile(path, text, diags))
    return false;
  return readJobSpec(path, text, job, diags);
}

std::string fillJobName(const FillJob &job, int index) {
  return job.name().empty() ? "fill_job[" + std::to_string(index) + "]"
                            : "fill job '" + job.name() + "'";
}

LayerShape layerShape(const FillLayer &layer) {
  LayerShape s;
  if (!layer.has_workload())
    return s;
  const Workload &w = layer.workload();
  uint32_t hidden = w.hidden() > 0 ? uint32_t(w.hidden()) : 0;
  uint32_t ffn = w.ffn() > 0 ? uint32_t(w.ffn()) : 4 * hidden;
  switch (w.kind()) {
  case Workload::ENCODER_LAYER:
    s.family = LayerFamily::Encoder;
    s.hidden = hidden;
    s.heads = w.heads() > 0 ? uint32_t(w.heads()) : 1;
    s.seq = w.seq() > 0 ? uint32_t(w.seq()) : 128;
    s.ffn = ffn;
    break;
  case Workload::MLP:
    s.family = LayerFamily::Mlp;
    s.in = hidden;
    s.hidden = ffn;
    s.out = hidden;
    break;
  default:
    s.family = LayerFamily::GemmChain;
    s.width = hidden;
    break;
  }
  return s;
}

bool expandModel(JobSource &job, Diagnostics &diags) {
  Emitter err{job, diags};
  JobSpec &spec = job.spec;
  const Model &model = spec.model();
  SourcePos modelPos = job.top("model");
  if (spec.stage_size() > 0) {
    err(job.top("stage", 0), "'stage' entries and a 'model' block are exclusive: the model "
                             "block derives the stage costs");
    return false;
  }
  if (spec.pipeline().schedule() == SCHEDULE_UNSPECIFIED) {
    err(spec.has_pipeline() ? job.top("pipeline") : modelPos,
        "pipeline.schedule is missing; expected one of GPIPE, ONE_F_ONE_B, "
        "INTERLEAVED_1F1B, ZB_H1");
    return false;
  }
  sched::PipelineSpec derived;
  switch (spec.pipeline().schedule()) {
  case GPIPE: derived.schedule = sched::ScheduleKind::GPipe; break;
  case INTERLEAVED_1F1B: derived.schedule = sched::ScheduleKind::Interleaved1F1B; break;
  case ZB_H1: derived.schedule = sched::ScheduleKind::ZBH1; break;
  default: derived.schedule = sched::ScheduleKind::OneFOneB; break;
  }
  derived.virtualStages =
      spec.pipeline().has_virtual_stages() ? spec.pipeline().virtual_stages() : 1;
  cost::HardwareOut hw;
  std::string error, field;
  if (!cost::stageCostsFromModel(model, derived, hw, error, &field)) {
    err(field.empty() ? modelPos : job.pos(model, job.sub("model"), field, -1, modelPos),
        error.rfind("model.", 0) == 0 ? error : "model: " + error); // "model: model.x" once
    return false;
  }
  Pipeline *pipe = spec.mutable_pipeline();
  const Tree *pipeTree = job.sub("pipeline");
  if (pipe->has_stages() && pipe->stages() != derived.stages) {
    err(job.pos(*pipe, pipeTree, "stages"),
        "pipeline.stages = " + std::to_string(pipe->stages()) +
            " disagrees with the model's pp = " + std::to_string(derived.stages));
    return false;
  }
  if (pipe->has_microbatches() && pipe->microbatches() != derived.microbatches) {
    err(job.pos(*pipe, pipeTree, "microbatches"),
        "pipeline.microbatches = " + std::to_string(pipe->microbatches()) +
            " disagrees with the model's global_batch / (dp x micro_batch_size) = " +
            std::to_string(derived.microbatches));
    return false;
  }
  pipe->set_stages(derived.stages);
  pipe->set_microbatches(derived.microbatches);
  for (const sched::StageCost &c : derived.costs) {
    StageCost *sc = spec.add_stage();
    sc->set_forward_us(c.forwardUs);
    sc->set_backward_us(c.backwardUs);
    sc->set_backward_weight_us(c.backwardWeightUs);
    sc->set_activation_bytes(c.activationBytes);
    sc->set_stash_bytes(c.stashBytes);
    sc->set_static_bytes(c.staticBytes);
  }
  Hardware *h = spec.mutable_hardware();
  if (!h->has_gpu_memory_bytes()) h->set_gpu_memory_bytes(hw.gpuMemoryBytes);
  if (!h->has_p2p_latency_us()) h->set_p2p_latency_us(hw.p2pLatencyUs);
  if (!h->has_p2p_bandwidth_gbps()) h->set_p2p_bandwidth_gbps(hw.p2pBandwidthGBps);
  if (!h->has_pcie_bandwidth_gbps()) h->set_pcie_bandwidth_gbps(hw.pcieGBps);
  if (!h->has_hbm_bandwidth_gbps()) h->set_hbm_bandwidth_gbps(hw.hbmGBps);
  if (!h->has_kernel_launch_us()) h->set_kernel_launch_us(hw.kernelLaunchUs);
  if (!spec.has_tail() && derived.tail) {
    Tail *t = spec.mutable_tail();
    t->set_data_parallel(derived.dataParallel);
    t->set_grad_bytes(derived.gradBytes);
    t->set_allreduce_bandwidth_gbps(derived.dpBandwidthGBps);
    t->set_allreduce_latency_us(derived.dpLatencyUs);
    t->set_optimizer_us(derived.optimizerUs);
  }
  // The model derived these; they must obey the same limits as written ones
  // (a huge model can derive a stage time or size past them).
  Diagnostics derivedDiags;
  if (!checkLimits(spec, nullptr, job.file, derivedDiags)) {
    for (const Diagnostic &d : derivedDiags.all())
      err(modelPos, "the model derives " + d.message);
    return false;
  }
  return true;
}

bool checkHardware(const JobSource &job, bool requireMemory, Diagnostics &diags) {
  Emitter err{job, diags};
  const Hardware &hw = job.spec.hardware();
  if (requireMemory && (!hw.has_gpu_memory_bytes() || hw.gpu_memory_bytes() <= 0))
    err(hw.has_gpu_memory_bytes() ? job.pos(hw, job.sub("hardware"), "gpu_memory_bytes")
                                  : job.top("hardware"),
        "hardware.gpu_memory_bytes must be given and positive");
  if (hw.has_hbm_bandwidth_gbps() && !(hw.hbm_bandwidth_gbps() > 0))
    err(job.pos(hw, job.sub("hardware"), "hbm_bandwidth_gbps"),
        "hardware.hbm_bandwidth_gbps must be positive");
  // A send is an operation too: its time (bytes at the p2p bandwidth; 0 GB/s: free) stays within
  // an operation's limit, or the schedule's times leave the documented range (bubbles of 10^18
  // us, or infinite ones at 10^-300 GB/s, reached the fill planner).
  const double bytesPerUs = hw.p2p_bandwidth_gbps() * 1e3;
  for (int i = 0; i < job.spec.stage_size() && bytesPerUs > 0; ++i) {
    const double us = double(job.spec.stage(i).activation_bytes()) / bytesPerUs;
    if (us > kMaxUs) {
      err(job.pos(hw, job.sub("hardware"), "p2p_bandwidth_gbps", -1, job.top("hardware")),
          "stage[" + std::to_string(i) + "].activation_bytes (" +
              std::to_string(job.spec.stage(i).activation_bytes()) + ") take " +
              fmtNum(us) + " us to send at hardware.p2p_bandwidth_gbps " +
              fmtNum(hw.p2p_bandwidth_gbps()) +
              "; one operation may last at most 1000 s (10^9 us)");
      break;
    }
  }
  return err.ok;
}

bool checkFillJobs(const JobSource &job, Diagnostics &diags) {
  Emitter err{job, diags};
  const JobSpec &spec = job.spec;
  std::set<std::string> names;
  int64_t allLayers = 0;
  for (int j = 0; j < spec.fill_job_size(); ++j) {
    const FillJob &fj = spec.fill_job(j);
    const Tree *jobTree = job.sub("fill_job", j);
    SourcePos jobPos = job.top("fill_job", j);
    std::string what = fillJobName(fj, j);
    if (fj.name().empty())
      err(jobPos, what + " has no name");
    else if (!names.insert(fj.name()).second)
      err(job.pos(fj, jobTree, "name", -1, jobPos), "duplicate fill job name '" + fj.name() + "'");
    if (fj.kind() == JOB_KIND_UNSPECIFIED)
      err(jobPos, what + " has no kind; expected INFERENCE or TRAINING");
    if (!fj.has_samples())
      err(jobPos, what + " is missing samples");
    if (fj.layer_size() == 0) {
      err(jobPos, what + " has no layers");
      continue;
    }
    int64_t expanded = 0;
    bool layersOk = true;
    std::vector<LayerShape> shapes;
    std::vector<int> shapeEntry;
    double forward = 0;
    for (int l = 0; l < fj.layer_size(); ++l) {
      const FillLayer &layer = fj.layer(l);
      SourcePos lPos = job.pos(fj, jobTree, "layer", l, jobPos);
      std::string lwhat =
          what + " layer " + (layer.name().empty() ? std::to_string(l) : "'" + layer.name() + "'");
      if (!layer.has_forward_us_per_sample()) {
        err(lPos, lwhat + " is missing forward_us_per_sample");
        layersOk = false;
        continue;
      }
      if (fj.kind() == TRAINING && !layer.has_backward_us_per_sample()) {
        err(lPos, lwhat + " of a TRAINING job is missing backward_us_per_sample");
        layersOk = false;
      }
      if (layer.has_workload() && layer.workload().kind() != Workload::GEMM_CHAIN &&
          layer.workload().hidden() <= 0) {
        err(job.pos(layer, nestedTree(fj, jobTree, "layer", l), "workload", -1, lPos),
            lwhat + ": workload " + Workload::Kind_Name(layer.workload().kind()) +
                " needs hidden > 0");
        layersOk = false;
      }
      int64_t repeat = layer.has_repeat() ? layer.repeat() : 1;
      expanded = satAdd(expanded, repeat);
      forward += layer.forward_us_per_sample() * double(repeat);
      LayerShape shape = layerShape(layer);
      for (int64_t r = 0; r < repeat && r < 2; ++r) {
        // The rules look at neighbours only, so two copies check a repeat.
        shapes.push_back(shape);
        shapeEntry.push_back(l);
      }
    }
    if (expanded > kMaxJobLayers) {
      err(jobPos, what + " expands to " + std::to_string(expanded) +
                      " layers (after repeat); at most " + std::to_string(kMaxJobLayers) +
                      " are allowed");
      continue;
    }
    allLayers += expanded;
    if (allLayers > kMaxTotalFillLayers) {
      err(jobPos, "the fill jobs up to " + what + " expand to " + std::to_string(allLayers) +
                      " layers (after repeat); at most " + std::to_string(kMaxTotalFillLayers) +
                      " (2^20) are allowed in all");
      return false;
    }
    if (!layersOk)
      continue;
    if (!(forward > 0))
      err(jobPos, what + " has no work (every forward_us_per_sample is 0)");
    LayerProblem problem;
    if (!checkFillLayers(fj.kind() == TRAINING, shapes, problem)) {
      if (problem.layer < 0) {
        err(jobPos, what + " " + problem.message);
      } else {
        int l = shapeEntry[problem.layer];
        const FillLayer &layer = fj.layer(l);
        err(job.pos(layer, nestedTree(fj, jobTree, "layer", l), "workload", -1,
                    job.pos(fj, jobTree, "layer", l, jobPos)),
            what + " layer " + (layer.name().empty() ? std::to_string(l) : "'" + layer.name() + "'") +
                ": " + problem.message + " (the runtime could not run it)");
      }
    }
  }
  return err.ok;
}

bool checkCompileJob(JobSource &job, Diagnostics &diags) {
  JobSpec &spec = job.spec;
  if (spec.has_model() && !expandModel(job, diags))
    return false;
  Emitter err{job, diags};
  SourcePos top{1, 1};

  // --- pipeline ------------------------------------------------------------
  if (!spec.has_pipeline()) {
    err(top, "the job has no 'pipeline { stages microbatches schedule }' block");
    return false;
  }
  const Pipeline &pipe = spec.pipeline();
  const Tree *pipeTree = job.sub("pipeline");
  SourcePos pipePos = job.top("pipeline");
  if (!pipe.has_stages())
    err(pipePos, "pipeline.stages is missing");
  if (!pipe.has_microbatches())
    err(pipePos, "pipeline.microbatches is missing");
  if (pipe.schedule() == SCHEDULE_UNSPECIFIED)
    err(pipePos, "pipeline.schedule is missing; expected one of GPIPE, ONE_F_ONE_B, "
                 "INTERLEAVED_1F1B, ZB_H1");
  int64_t virtualStages = pipe.has_virtual_stages() ? pipe.virtual_stages() : 1;
  if (pipe.schedule() == INTERLEAVED_1F1B && virtualStages < 2)
    err(job.pos(pipe, pipeTree, "virtual_stages", -1, pipePos),
        "INTERLEAVED_1F1B needs pipeline.virtual_stages >= 2 (got " +
            std::to_string(virtualStages) + ")");
  else if (pipe.schedule() != INTERLEAVED_1F1B && virtualStages != 1)
    err(job.pos(pipe, pipeTree, "virtual_stages", -1, pipePos),
        "pipeline.virtual_stages = " + std::to_string(virtualStages) +
            " is only valid with INTERLEAVED_1F1B (schedule is " +
            scheduleName(pipe.schedule()) + ")");
  if (!err.ok)
    return false;
  int64_t chunks = satMul(satMul(pipe.stages(), pipe.microbatches()), virtualStages);
  if (chunks > kMaxPipelineChunks) {
    err(pipePos, "the pipeline has stages x microbatches x virtual_stages = " +
                     std::to_string(chunks) + " micro-batch chunks; at most " +
                     std::to_string(kMaxPipelineChunks) +
                     " are allowed (about 2^24 instructions)");
    return false;
  }
  int64_t numStages = pipe.stages();

  // --- hardware ------------------------------------------------------------
  if (!spec.has_hardware()) {
    err(top, "the job has no 'hardware { gpu_memory_bytes ... }' block");
    return false;
  }
  if (!checkHardware(job, /*requireMemory=*/true, diags))
    return false;
  const Hardware &hw = spec.hardware();

  // --- stage costs ---------------------------------------------------------
  if (spec.stage_size() == 0) {
    err(top, "the job has no 'stage { forward_us backward_us ... }' entry (one applies to "
             "all stages)");
    return false;
  }
  if (spec.stage_size() != 1 && spec.stage_size() != numStages) {
    err(job.top("stage", numStages < spec.stage_size() ? int(numStages) : 0),
        "the job has " + std::to_string(spec.stage_size()) +
            " 'stage' entries; expected 1 (for all stages) or " + std::to_string(numStages));
    return false;
  }
  for (int i = 0; i < spec.stage_size(); ++i) {
    const StageCost &sc = spec.stage(i);
    const Tree *scTree = job.sub("stage", i);
    SourcePos scPos = job.top("stage", i);
    std::string what = "stage[" + std::to_string(i) + "]";
    if (!sc.has_forward_us() || !sc.has_backward_us()) {
      err(scPos, what + " is missing " + (!sc.has_forward_us() ? "forward_us" : "backward_us"));
      continue;
    }
    if (sc.backward_weight_us() > sc.backward_us())
      err(job.pos(sc, scTree, "backward_weight_us", -1, scPos),
          what + ".backward_weight_us (" + fmtNum(sc.backward_weight_us()) +
              ") exceeds backward_us (" + fmtNum(sc.backward_us()) +
              "), which is the whole backward");
    if (pipe.schedule() == ZB_H1 && !sc.has_backward_weight_us())
      err(scPos, what + " is missing backward_weight_us, which ZB_H1 needs to split the backward");
    int64_t need = satAdd(sc.static_bytes(), sc.stash_bytes());
    if (need > hw.gpu_memory_bytes())
      err(job.pos(sc, scTree, "static_bytes", -1, scPos),
          what + " needs " + std::to_string(need) +
              " bytes (static + one micro-batch's stash) but the GPU has " +
              std::to_string(hw.gpu_memory_bytes()));
  }
  if (!err.ok)
    return false;

  // --- tail ----------------------------------------------------------------
  if (spec.has_tail()) {
    const Tail &tail = spec.tail();
    if (tail.data_parallel() > 1 && tail.grad_bytes() > 0 &&
        tail.allreduce_bandwidth_gbps() <= 0)
      err(job.top("tail"), "tail.allreduce_bandwidth_gbps must be positive when "
                           "data_parallel > 1 and grad_bytes > 0");
  }
  bool ok = err.ok;
  ok &= checkFillJobs(job, diags);
  return ok;
}

} // namespace pipefill::jobspec
