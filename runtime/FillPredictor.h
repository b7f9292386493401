// The bubble bound's prediction of a fill chunk's time (see ChunkPredictor).
#ifndef PFRT_FILL_PREDICTOR_H
#define PFRT_FILL_PREDICTOR_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

namespace pfrt {

// Statistics of a window of measured times (the chunk and fill-task predictors).
inline std::vector<double> sortedSample(const std::deque<double> &window) {
  std::vector<double> v(window.begin(), window.end());
  std::sort(v.begin(), v.end());
  return v;
}
// The median of a sorted, non-empty sample (the mean of the two middle values for an even count).
inline double sortedMedian(const std::vector<double> &v) {
  const size_t n = v.size();
  return 0.5 * (v[(n - 1) / 2] + v[n / 2]);
}
// The nearest-rank q-percentile (0 < q <= 1) of a sorted, non-empty sample.
inline double sortedPercentile(const std::vector<double> &v, double q) {
  const size_t n = v.size();
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  return v[std::min(n, std::max<size_t>(rank, 1)) - 1];
}

// Predicts a chunk's time (planned microseconds) for the bubble bound. It starts from the plan and
// is corrected online from the measured times of the job's chunks on this device:
// - chunks of the same shape (passes, batch) seen before: the larger of 1.05 x their median and
//   their 90th percentile over the last 32 runs (with fewer than 5 runs: the larger of FreeRide's
//   1.2 x median and the worst run), so a steady chunk gets a tight margin and a noisy one a
//   margin that covers its tail;
// - a new shape of a job already measured: the plan scaled by the 90th percentile of the job's
//   measured/planned ratios;
// - nothing measured yet: the plan.
class ChunkPredictor {
public:
  double predict(uint32_t passBegin, uint32_t passEnd, uint32_t batch, double plannedUs) const {
    auto it = byShape_.find(std::make_tuple(passBegin, passEnd, batch));
    if (it != byShape_.end() && !it->second.empty()) {
      const std::vector<double> v = sortedSample(it->second);
      const double median = sortedMedian(v);
      if (v.size() < 5)
        return std::max(1.2 * median, v.back());
      return std::max(1.05 * median, sortedPercentile(v, 0.9));
    }
    if (!ratios_.empty() && plannedUs > 0)
      return plannedUs * sortedPercentile(sortedSample(ratios_), 0.9);
    return plannedUs;
  }
  void add(uint32_t passBegin, uint32_t passEnd, uint32_t batch, double plannedUs,
           double measuredUs) {
    auto &d = byShape_[std::make_tuple(passBegin, passEnd, batch)];
    d.push_back(measuredUs);
    if (d.size() > kWindow)
      d.pop_front();
    if (plannedUs > 0) {
      ratios_.push_back(measuredUs / plannedUs);
      if (ratios_.size() > kWindow)
        ratios_.pop_front();
    }
  }

private:
  static constexpr size_t kWindow = 32;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::deque<double>> byShape_;
  std::deque<double> ratios_;
};


} // namespace pfrt

#endif // PFRT_FILL_PREDICTOR_H
