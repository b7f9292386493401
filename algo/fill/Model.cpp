//===- Model.cpp - Time model and small helpers of the fill planner -------===//

#include "algo/fill/Planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pipefill::fill {

namespace {
/// Bytes per microsecond of a bandwidth in GB/s (1 GB = 1e9 bytes).
double bytesPerUs(double gbps) { return gbps * 1e3; }

double roofline(double workUs, double bytes, const Hardware &hw) {
  return hw.kernelLaunchUs + std::max(workUs, bytes / bytesPerUs(hw.hbmGBps));
}
} // namespace

double layerForwardUs(const Layer &layer, int batch, const Hardware &hw) {
  double b = batch;
  return roofline(b * layer.forwardUsPerSample,
                  double(layer.weightBytes) +
                      2.0 * b * double(layer.activationBytesPerSample),
                  hw);
}

double layerBackwardUs(const Layer &layer, int batch, const Hardware &hw) {
  double b = batch;
  return roofline(b * layer.backwardUsPerSample,
                  double(layer.weightBytes) + double(layer.gradBytes) +
                      2.0 * b * double(layer.activationBytesPerSample),
                  hw);
}

double layerOptimizerUs(const Layer &layer, const Hardware &hw) {
  if (layer.weightBytes == 0 && layer.gradBytes == 0 &&
      layer.optimizerBytes == 0)
    return 0;
  return roofline(0,
                  2.0 * double(layer.weightBytes) + double(layer.gradBytes) +
                      2.0 * double(layer.optimizerBytes),
                  hw);
}

int numOps(const Job &job) {
  int n = int(job.layers.size());
  return job.kind == JobKind::Training ? 2 * n : n;
}

int opLayer(const Job &job, int op, bool *isBackward) {
  int n = int(job.layers.size());
  bool backward = job.kind == JobKind::Training && op >= n;
  if (isBackward)
    *isBackward = backward;
  return backward ? 2 * n - 1 - op : op;
}

double usefulUsPerSample(const Job &job) {
  double sum = 0;
  for (const Layer &layer : job.layers) {
    sum += layer.forwardUsPerSample;
    if (job.kind == JobKind::Training)
      sum += layer.backwardUsPerSample;
  }
  return sum;
}

const char *toString(WeightPlacement p) {
  return p == WeightPlacement::Resident ? "resident" : "streamed";
}
const char *toString(ActPlacement p) {
  return p == ActPlacement::Device ? "device" : "host";
}
const char *toString(OptimizerPlacement p) {
  return p == OptimizerPlacement::Device ? "device" : "host";
}

std::string formatBytes(int64_t bytes) {
  char buf[64];
  double v = double(bytes);
  double a = std::fabs(v);
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.1f GB", v / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f MB", v / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f KB", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

std::string formatUs(double us) {
  char buf[64];
  if (!std::isfinite(us))
    return us > 0 ? "inf" : "nan";
  double a = std::fabs(us);
  if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f s", us / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2f ms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

} // namespace pipefill::fill
