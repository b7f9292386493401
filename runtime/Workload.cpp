#include "runtime/Workload.h"

#include "runtime/Random.h"
#include "support/Checked.h"

#include <algorithm>
#include <cmath>

namespace pfrt {

std::vector<size_t> LayerShape::weightSizes() const {
  switch (kind) {
  case PFRT_LAYER_ENCODER: {
    size_t hh = size_t(hidden) * hidden, hf = size_t(hidden) * ffn;
    return {hh, hh, hh, hh, hf, hf, hidden, hidden, hidden, hidden};
  }
  case PFRT_LAYER_MLP:
    return {size_t(in) * mid, size_t(mid) * out};
  case PFRT_LAYER_GEMM_CHAIN:
    return {};
  }
  return {};
}

size_t JobShape::maxWidth() const {
  size_t w = inWidth;
  for (const LayerShape &l : layers)
    w = std::max<size_t>(w, l.outWidth);
  return w;
}

namespace {
uint32_t scaled(uint32_t v, uint32_t divisor) { return v ? std::max(1u, v / divisor) : 0; }
} // namespace

bool gemmChainOnly(const JobShape &shape, uint32_t passBegin, uint32_t passEnd) {
  const uint32_t L = shape.numLayers();
  for (uint32_t q = passBegin; q < passEnd; ++q)
    if (shape.layers[q < L ? q : 2 * L - 1 - q].kind != PFRT_LAYER_GEMM_CHAIN)
      return false;
  return true;
}

double plannedPassUs(const JobShape &shape, uint32_t q, uint32_t batch) {
  const uint32_t L = shape.numLayers();
  const LayerShape &ls = shape.layers[q < L ? q : 2 * L - 1 - q];
  return (q < L ? ls.usPerSample : ls.backwardUsPerSample) * batch;
}

void checkHostFillFits(const Program &program, uint32_t maxDim) {
  const uint64_t have = physicalMemoryBytes();
  std::vector<uint64_t> perSample(program.jobs.size()), fixed(program.jobs.size());
  for (uint32_t j = 0; j < program.jobs.size(); ++j) {
    const JobShape shape = makeJobShape(program, j, maxDim);
    for (const LayerShape &l : shape.layers) {
      const uint64_t width = std::max<uint64_t>(
          {l.hidden, l.ffn, l.in, l.mid, l.out, l.dim, l.inWidth, l.outWidth, 64});
      const uint64_t rows = l.kind == PFRT_LAYER_ENCODER ? std::max<uint32_t>(l.seq, 1) : 1;
      const uint64_t scores = l.kind == PFRT_LAYER_ENCODER
                                  ? pipefill::satMulU(l.heads, pipefill::satMulU(l.seq, l.seq))
                                  : 0;
      perSample[j] = std::max(perSample[j],
                              pipefill::satAddU(pipefill::satMulU(rows * 8, width), scores));
      fixed[j] = std::max(fixed[j], pipefill::satMulU(width, width));
    }
  }
  for (const Device &d : program.devices)
    for (const Stream &s : d.streams)
      for (const Op &op : s.ops) {
        if (op.kind != OpKind::Fill || op.fill.job >= program.jobs.size())
          continue;
        const uint32_t j = op.fill.job;
        const uint64_t bytes = pipefill::satMulU(
            pipefill::satAddU(pipefill::satMulU(op.fill.batch, perSample[j]), fixed[j]), 4);
        if (bytes > have / 2)
          throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                      "fill job '" + program.jobs[j].name + "' needs about " +
                          std::to_string(bytes) + " bytes of host memory for one chunk of batch " +
                          std::to_string(op.fill.batch) + (maxDim ? " with dimensions capped at " +
                                                                        std::to_string(maxDim)
                                                                  : std::string()) +
                          " but the machine has " + std::to_string(have) +
                          " bytes (a smaller max_dim caps the layers' dimensions)");
      }
}

JobShape makeJobShape(const Program &program, uint32_t j, uint32_t maxDim) {
  const FillJob &job = program.jobs.at(j);
  JobShape shape;
  shape.kind = job.kind;
  shape.passes = job.passes();
  shape.learningRate = job.learningRate > 0 ? job.learningRate : 0.01f;
  shape.seed = mix64(program.seed ^ mix64(job.seed * 0x2545F4914F6CDD1Dull + j + 1));
  uint32_t largest = 0;
  for (const FillLayer &l : job.layers) {
    const pfrt_fill_layer_desc &d = l.desc;
    for (uint32_t v : {d.hidden, d.seq, d.ffn, d.in, d.out, d.dim, d.width})
      largest = std::max(largest, v);
  }
  uint32_t divisor = 1;
  while (maxDim && largest / divisor > maxDim)
    divisor *= 2;
  shape.divisor = divisor;
  uint32_t width = 0;
  for (const FillLayer &l : job.layers) {
    const pfrt_fill_layer_desc &d = l.desc;
    LayerShape ls;
    ls.kind = d.kind;
    ls.usPerSample = d.planned_us_per_sample;
    ls.backwardUsPerSample =
        d.planned_backward_us_per_sample > 0 ? d.planned_backward_us_per_sample
                                             : 2 * d.planned_us_per_sample;
    switch (d.kind) {
    case PFRT_LAYER_ENCODER:
      ls.hidden = scaled(d.hidden, divisor);
      ls.seq = scaled(d.seq, divisor);
      ls.ffn = scaled(d.ffn, divisor);
      ls.heads = std::min(d.heads, ls.hidden);
      while (ls.hidden % ls.heads)
        --ls.heads;
      ls.inWidth = ls.outWidth = ls.hidden;
      shape.rows = ls.seq;
      break;
    case PFRT_LAYER_MLP:
      ls.in = width ? width : scaled(d.in, divisor);
      ls.mid = scaled(d.hidden, divisor);
      ls.out = scaled(d.out, divisor);
      ls.inWidth = ls.in;
      ls.outWidth = ls.out;
      break;
    case PFRT_LAYER_GEMM_CHAIN:
      ls.dim = scaled(d.dim ? d.dim : 256, divisor);
      ls.inWidth = ls.outWidth = width ? width : (d.width ? scaled(d.width, divisor) : 64);
      break;
    }
    if (!width)
      shape.inWidth = ls.inWidth;
    width = ls.outWidth;
    shape.layers.push_back(ls);
  }
  shape.outWidth = width;
  return shape;
}

std::vector<std::vector<float>> initLayerWeights(const JobShape &shape, uint32_t layer) {
  const LayerShape &ls = shape.layers.at(layer);
  std::vector<size_t> sizes = ls.weightSizes();
  std::vector<std::vector<float>> out(sizes.size());
  for (size_t t = 0; t < sizes.size(); ++t) {
    out[t].resize(sizes[t]);
    uint64_t stream = kStreamWeights + uint64_t(layer) * 64 + t;
    float scale = 1.0f;
    float offset = 0.0f;
    if (ls.kind == PFRT_LAYER_ENCODER) {
      if (t < 4 || t == 4)
        scale = 1.0f / std::sqrt(static_cast<float>(ls.hidden));
      else if (t == 5)
        scale = 1.0f / std::sqrt(static_cast<float>(ls.ffn));
      else if (t == 6 || t == 8) { // gammas
        scale = 0.1f;
        offset = 1.0f;
      } else // betas
        scale = 0.1f;
    } else if (ls.kind == PFRT_LAYER_MLP) {
      scale = 1.0f / std::sqrt(static_cast<float>(t == 0 ? ls.in : ls.mid));
    }
    for (size_t i = 0; i < sizes[t]; ++i)
      out[t][i] = offset + scale * uniformAt(shape.seed, stream, i);
  }
  return out;
}

void makeInput(const JobShape &shape, uint64_t sampleBegin, uint32_t batch, float *out) {
  size_t per = size_t(shape.rows) * shape.inWidth;
  for (uint32_t b = 0; b < batch; ++b)
    for (size_t e = 0; e < per; ++e)
      out[b * per + e] = uniformAt(shape.seed, kStreamInput + sampleBegin + b, e);
}

void makeTarget(const JobShape &shape, uint64_t sampleBegin, uint32_t batch, float *out) {
  size_t per = size_t(shape.rows) * shape.outWidth;
  size_t in = size_t(shape.rows) * shape.inWidth;
  for (uint32_t b = 0; b < batch; ++b)
    for (size_t e = 0; e < per; ++e)
      out[b * per + e] = targetAt(shape.seed, sampleBegin + b, e, in);
}

double outputChecksum(const JobShape &shape, uint64_t sampleBegin, uint32_t batch,
                      const float *y) {
  size_t per = size_t(shape.rows) * shape.outWidth;
  double sum = 0;
  for (uint32_t b = 0; b < batch; ++b)
    for (size_t e = 0; e < per; ++e)
      sum += std::fabs(static_cast<double>(y[b * per + e])) *
             checksumWeight((sampleBegin + b) * per + e);
  return sum;
}

double tensorsChecksum(const std::vector<std::vector<float>> &tensors) {
  double sum = 0;
  for (const auto &t : tensors)
    for (size_t i = 0; i < t.size(); ++i)
      sum += std::fabs(static_cast<double>(t[i])) * checksumWeight(i);
  return sum;
}

} // namespace pfrt
