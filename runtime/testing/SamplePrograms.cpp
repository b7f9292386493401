#include "runtime/testing/SamplePrograms.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace pfrt {
namespace samples {

namespace {

struct SOp {
  enum Kind { F, B, Send, Recv, AllReduce, Optimizer } kind;
  uint32_t mb = 0, peer = 0, tag = 0;
  double dur = 0;
};

std::vector<std::vector<SOp>> stageOps(const PipelineSpec &spec) {
  const uint32_t p = spec.stages, m = spec.microbatches;
  std::vector<std::vector<SOp>> out(p);
  for (uint32_t s = 0; s < p; ++s) {
    auto fwd = [&](uint32_t mb) {
      if (s > 0)
        out[s].push_back({SOp::Recv, mb, s - 1, 2 * mb, 0});
      out[s].push_back({SOp::F, mb, 0, 0, spec.forwardUs});
      if (s + 1 < p)
        out[s].push_back({SOp::Send, mb, s + 1, 2 * mb, spec.p2pUs});
    };
    auto bwd = [&](uint32_t mb) {
      if (s + 1 < p)
        out[s].push_back({SOp::Recv, mb, s + 1, 2 * mb + 1, 0});
      out[s].push_back({SOp::B, mb, 0, 0, spec.backwardUs});
      if (s > 0)
        out[s].push_back({SOp::Send, mb, s - 1, 2 * mb + 1, spec.p2pUs});
    };
    if (spec.schedule == PipelineSpec::GPipe) {
      for (uint32_t mb = 0; mb < m; ++mb)
        fwd(mb);
      for (uint32_t mb = m; mb-- > 0;)
        bwd(mb);
    } else {
      uint32_t warm = std::min(p - s - 1, m);
      for (uint32_t mb = 0; mb < warm; ++mb)
        fwd(mb);
      for (uint32_t i = 0; i + warm < m; ++i) {
        fwd(warm + i);
        bwd(i);
      }
      for (uint32_t mb = m - warm; mb < m; ++mb)
        bwd(mb);
    }
    if (spec.allreduceUs > 0)
      out[s].push_back({SOp::AllReduce, 0, 0, 0, spec.allreduceUs});
    if (spec.optimizerUs > 0)
      out[s].push_back({SOp::Optimizer, 0, 0, 0, spec.optimizerUs});
  }
  return out;
}

struct Plan {
  std::vector<std::vector<SOp>> ops;
  // Steady-state (last simulated iteration) per stage and op: start time relative to the
  // iteration's start, and the wait before a recv.
  std::vector<std::vector<double>> start, gap;
  double iterationUs = 0;
};

Plan simulate(const PipelineSpec &spec) {
  Plan plan;
  plan.ops = stageOps(spec);
  const uint32_t p = spec.stages;
  const int iters = 3;
  std::vector<double> t(p, 0);
  std::vector<size_t> idx(p, 0);
  std::map<std::tuple<int, uint32_t, uint32_t, uint32_t>, double> avail;
  plan.start.assign(p, {});
  plan.gap.assign(p, {});
  for (uint32_t s = 0; s < p; ++s) {
    plan.start[s].assign(plan.ops[s].size(), 0);
    plan.gap[s].assign(plan.ops[s].size(), 0);
  }
  std::vector<std::vector<double>> iterEnd(iters, std::vector<double>(p, 0));
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t s = 0; s < p; ++s) {
      const size_t n = plan.ops[s].size();
      while (idx[s] < n * iters) {
        const int it = static_cast<int>(idx[s] / n);
        const size_t i = idx[s] % n;
        const SOp &op = plan.ops[s][i];
        double begin = t[s], end = t[s];
        if (op.kind == SOp::Recv) {
          auto a = avail.find({it, op.peer, s, op.tag});
          if (a == avail.end())
            break;
          end = std::max(t[s], a->second);
        } else {
          end = t[s] + op.dur;
          if (op.kind == SOp::Send)
            avail[{it, s, op.peer, op.tag}] = end;
        }
        if (it == iters - 1) {
          plan.start[s][i] = begin;
          plan.gap[s][i] = end - begin;
        }
        t[s] = end;
        iterEnd[it][s] = end;
        ++idx[s];
        progress = true;
      }
    }
  }
  for (uint32_t s = 0; s < p; ++s)
    if (idx[s] < plan.ops[s].size() * iters)
      throw std::runtime_error("sample pipeline deadlocks");
  double prevEnd = *std::max_element(iterEnd[iters - 2].begin(), iterEnd[iters - 2].end());
  double lastEnd = *std::max_element(iterEnd[iters - 1].begin(), iterEnd[iters - 1].end());
  plan.iterationUs = lastEnd - prevEnd;
  // Start times relative to the end of the previous iteration.
  for (uint32_t s = 0; s < p; ++s)
    for (double &x : plan.start[s])
      x -= prevEnd;
  // A recv's gap only counts when it really waits: the gap computed above is end - begin.
  return plan;
}

#define PFRT_TRY(call)                                                                             \
  do {                                                                                             \
    if ((call) != PFRT_OK)                                                                         \
      throw std::runtime_error(std::string(#call) + ": " + pfrt_last_error());                     \
  } while (0)

} // namespace

pfrt_fill_layer_desc smallEncoder() {
  pfrt_fill_layer_desc l{};
  l.kind = PFRT_LAYER_ENCODER;
  l.hidden = 32;
  l.heads = 4;
  l.seq = 8;
  l.ffn = 64;
  return l;
}

pfrt_fill_layer_desc smallMlp() {
  pfrt_fill_layer_desc l{};
  l.kind = PFRT_LAYER_MLP;
  l.in = 16;
  l.hidden = 32;
  l.out = 16;
  return l;
}

OneDeviceProgram oneDeviceProgram(const char *name, const pfrt_fill_job_desc &job,
                                  const pfrt_fill_layer_desc &layer, uint32_t layers,
                                  const pfrt_device_desc *device, std::string *error) {
  OneDeviceProgram p;
  try {
    PFRT_TRY(pfrt_program_create(name, &p.program));
    PFRT_TRY(pfrt_program_add_device(p.program, device, &p.device));
    PFRT_TRY(pfrt_program_create_stream(p.program, p.device, PFRT_STREAM_MAIN,
                                        PFRT_PRIORITY_DEFAULT, "main", &p.main));
    PFRT_TRY(pfrt_program_create_stream(p.program, p.device, PFRT_STREAM_FILL,
                                        PFRT_PRIORITY_DEFAULT, "fill", &p.fill));
    PFRT_TRY(pfrt_program_add_fill_job(p.program, &job, &p.job));
    for (uint32_t l = 0; l < layers; ++l)
      PFRT_TRY(pfrt_fill_job_add_layer(p.program, p.job, &layer));
  } catch (const std::exception &e) {
    if (error)
      *error = e.what();
    pfrt_program_destroy(p.program);
    p = OneDeviceProgram();
  }
  return p;
}

OneDeviceProgram chainJobProgram(const char *name, uint32_t layers, std::string *error,
                                 double usPerSample) {
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 16;
  ld.planned_us_per_sample = usPerSample;
  return oneDeviceProgram(name, jd, ld, layers, nullptr, error);
}

pfrt_fill_chunk_desc chainChunk(uint32_t bubble, uint32_t batch, uint64_t sampleBegin) {
  pfrt_fill_chunk_desc c{};
  c.bubble_id = bubble;
  c.layer_end = 1;
  c.batch = batch;
  c.sample_begin = sampleBegin;
  c.planned_us = 1000.0 * batch;
  return c;
}

pfrt_status enqueueFilledBubble(const OneDeviceProgram &p, uint32_t event,
                                const pfrt_bubble_desc &bubble, const pfrt_fill_chunk_desc *chunk) {
  pfrt_status st = pfrt_program_enqueue_record(p.program, p.device, p.main, event);
  if (st == PFRT_OK)
    st = pfrt_program_enqueue_bubble(p.program, p.device, p.main, &bubble);
  if (st == PFRT_OK)
    st = pfrt_program_enqueue_wait(p.program, p.device, p.fill, event);
  if (st == PFRT_OK && chunk) {
    pfrt_fill_chunk_desc c = *chunk;
    c.job = p.job;
    st = pfrt_program_enqueue_fill(p.program, p.device, p.fill, &c);
  }
  return st;
}

std::vector<PlannedBubble> plannedBubbles(const PipelineSpec &spec) {
  Plan plan = simulate(spec);
  std::vector<PlannedBubble> out;
  for (uint32_t s = 0; s < spec.stages; ++s) {
    uint32_t id = 0;
    for (size_t i = 0; i < plan.ops[s].size(); ++i)
      if (plan.ops[s][i].kind == SOp::Recv && plan.gap[s][i] >= spec.minBubbleUs)
        out.push_back({s, id++, plan.start[s][i], plan.gap[s][i]});
  }
  return out;
}

double plannedIteration(const PipelineSpec &spec) { return simulate(spec).iterationUs; }

pfrt_program *buildPipeline(const PipelineSpec &spec, std::string *error) {
  pfrt_program *prog = nullptr;
  try {
    if (spec.stages == 0 || spec.microbatches == 0)
      throw std::runtime_error("stages and microbatches must be > 0");
    Plan plan = simulate(spec);
    PFRT_TRY(pfrt_program_create(spec.name.c_str(), &prog));
    PFRT_TRY(pfrt_program_set_iterations(prog, spec.iterations));
    PFRT_TRY(pfrt_program_set_planned_iteration_us(prog, plan.iterationUs));
    PFRT_TRY(pfrt_program_set_seed(prog, 1234));

    uint32_t job = 0;
    double perSample = 0;
    const uint32_t fillDevice =
        spec.trainingDevice >= 0 ? static_cast<uint32_t>(spec.trainingDevice) : spec.stages - 1;
    if (spec.fill) {
      pfrt_fill_job_desc jd{};
      jd.name = spec.fillKind == PFRT_FILL_TRAINING ? "mlp-training" : "encoder-inference";
      jd.kind = spec.fillKind;
      jd.samples = spec.fillSamples;
      jd.seed = 42;
      jd.learning_rate = 0.05f;
      PFRT_TRY(pfrt_program_add_fill_job(prog, &jd, &job));
      pfrt_fill_layer_desc layer = spec.layer;
      if (!layer.kind)
        layer = spec.fillKind == PFRT_FILL_TRAINING ? smallMlp() : smallEncoder();
      layer.planned_us_per_sample = spec.fillUsPerSample;
      layer.planned_backward_us_per_sample = 2 * spec.fillUsPerSample;
      for (uint32_t l = 0; l < spec.fillLayers; ++l) {
        std::string name = "layer" + std::to_string(l);
        layer.name = name.c_str();
        PFRT_TRY(pfrt_fill_job_add_layer(prog, job, &layer));
      }
      perSample = spec.fillLayers * spec.fillUsPerSample *
                  (spec.fillKind == PFRT_FILL_TRAINING ? 3.0 : 1.0);
    }
    const uint32_t passes =
        spec.fillLayers * (spec.fillKind == PFRT_FILL_TRAINING ? 2u : 1u);

    uint64_t nextSample = 0;
    for (uint32_t s = 0; s < spec.stages; ++s) {
      pfrt_device_desc dd{};
      dd.stage = s;
      dd.memory_bytes = spec.memoryBytes;
      dd.static_bytes = spec.staticBytes;
      dd.planned_iteration_us = plan.iterationUs;
      dd.forward_us = spec.forwardUs;
      dd.backward_us = spec.backwardUs;
      dd.allreduce_us = spec.allreduceUs;
      dd.optimizer_us = spec.optimizerUs;
      uint32_t dev = 0, main = 0, fill = 0;
      PFRT_TRY(pfrt_program_add_device(prog, &dd, &dev));
      PFRT_TRY(pfrt_program_create_stream(prog, dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                          "main", &main));
      const bool fillHere =
          spec.fill && (spec.fillKind == PFRT_FILL_INFERENCE || s == fillDevice);
      if (fillHere)
        PFRT_TRY(pfrt_program_create_stream(prog, dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT,
                                            "fill", &fill));
      bool computed = false;
      uint32_t forwardsDone = 0, bubbleId = 0;
      const std::vector<SOp> &ops = plan.ops[s];
      for (size_t i = 0; i < ops.size(); ++i) {
        const SOp &op = ops[i];
        const double start = plan.start[s][i];
        switch (op.kind) {
        case SOp::Recv:
          if (plan.gap[s][i] >= spec.minBubbleUs) {
            pfrt_bubble_desc b{};
            b.bubble_id = bubbleId++;
            b.kind = !computed ? PFRT_BUBBLE_WARMUP
                     : forwardsDone == spec.microbatches ? PFRT_BUBBLE_COOLDOWN
                                                         : PFRT_BUBBLE_STEADY;
            b.planned_start_us = std::max(0.0, start);
            b.planned_duration_us = plan.gap[s][i];
            b.free_bytes = spec.memoryBytes - spec.staticBytes;
            if (fillHere) {
              uint32_t ev = 0;
              std::string evName = "bubble" + std::to_string(b.bubble_id);
              PFRT_TRY(pfrt_program_create_event(prog, dev, evName.c_str(), &ev));
              PFRT_TRY(pfrt_program_enqueue_record(prog, dev, main, ev));
              PFRT_TRY(pfrt_program_enqueue_bubble(prog, dev, main, &b));
              double budget = spec.fillFraction * b.planned_duration_us - spec.switchUs;
              uint32_t batch = perSample > 0 ? static_cast<uint32_t>(
                                                   std::max(0.0, std::floor(budget / perSample)))
                                             : 0;
              batch = std::min(batch, spec.maxBatch);
              PFRT_TRY(pfrt_program_enqueue_wait(prog, dev, fill, ev));
              if (batch > 0) {
                pfrt_fill_chunk_desc c{};
                c.job = job;
                c.bubble_id = b.bubble_id;
                c.layer_begin = 0;
                c.layer_end = passes;
                c.batch = batch;
                c.sample_begin = nextSample;
                c.weights_streamed = spec.weightsStreamed;
                c.activations_on_host = spec.activationsOnHost;
                c.planned_us = batch * perSample;
                c.peak_bytes = 64ull << 20;
                nextSample += batch;
                PFRT_TRY(pfrt_program_enqueue_fill(prog, dev, fill, &c));
              }
            } else {
              PFRT_TRY(pfrt_program_enqueue_bubble(prog, dev, main, &b));
            }
          }
          PFRT_TRY(pfrt_program_enqueue_recv(prog, dev, main, op.peer, spec.activationBytes, op.tag,
                                             0, std::max(0.0, start)));
          break;
        case SOp::Send:
          PFRT_TRY(pfrt_program_enqueue_send(prog, dev, main, op.peer, spec.activationBytes, op.tag,
                                             op.dur, std::max(0.0, start)));
          break;
        case SOp::F:
        case SOp::B:
        case SOp::AllReduce:
        case SOp::Optimizer: {
          pfrt_compute_kind kind = op.kind == SOp::F   ? PFRT_COMPUTE_FORWARD
                                   : op.kind == SOp::B ? PFRT_COMPUTE_BACKWARD
                                   : op.kind == SOp::AllReduce ? PFRT_COMPUTE_ALLREDUCE
                                                               : PFRT_COMPUTE_OPTIMIZER;
          PFRT_TRY(pfrt_program_enqueue_compute(prog, dev, main, kind, op.mb, 0, op.dur,
                                                std::max(0.0, start)));
          computed = true;
          if (op.kind == SOp::F)
            ++forwardsDone;
          break;
        }
        }
      }
    }
    PFRT_TRY(pfrt_program_validate(prog));
    return prog;
  } catch (const std::exception &e) {
    if (error)
      *error = e.what();
    pfrt_program_destroy(prog);
    return nullptr;
  }
}

} // namespace samples
} // namespace pfrt
