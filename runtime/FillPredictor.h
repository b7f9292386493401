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

// The starvation escape of the predictors (ChunkPredictor, StepPredictor). A prediction made from
// fewer than kThinWindow runs is the slowest of them (the nearest-rank 90th percentile of fewer
// than ten values is the maximum), so one slow run (a cold start: the first use of a kernel or a
// GEMM shape, first-touch page faults, a neighbour's burst) can hold its work out of every bubble
// for good, and what never runs is never measured again. A *refusal* is an admission the
// prediction denied but would have granted without the slowest run. After
// kFirstProbe refusals in a row the slowest run is retired, so the next admission probes the work
// again; every probe doubles the refusals the next one needs (up to kLastProbe), so work that
// really is slower than its estimate costs O(log n) overruns over n refusals, and a run resets the
// count. Windows of kThinWindow runs or more are left alone: their p90 ignores one outlier.
class ProbeBackoff {
public:
  static constexpr uint32_t kFirstProbe = 8, kLastProbe = 1024;
  static constexpr size_t kThinWindow = 10;
  // One refusal; true when the slowest run should be retired now.
  bool refuse() {
    if (++refusals_ < after_)
      return false;
    refusals_ = 0;
    after_ = std::min(2 * after_, kLastProbe);
    return true;
  }
  void ran() { refusals_ = 0; }
  uint32_t nextProbeAfter() const { return after_; }

private:
  uint32_t refusals_ = 0, after_ = kFirstProbe;
};

// Removes the largest value of a window (nothing when empty).
inline void retireLargest(std::deque<double> &window) {
  if (!window.empty())
    window.erase(std::max_element(window.begin(), window.end()));
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
// A shape refused because of its slowest run is probed again with ProbeBackoff's rule (that run
// retired, and with the shape's last run the job's largest ratio). A shape with no run of its own
// (never run, or its runs retired) that the job's ratios hold out of rooms its plan fits is probed
// the same way, at its plan: the ratios come from chunks of other sizes, and small chunks carry
// their fixed cost (a launch, a synchronisation) as a large ratio that the plan of a large chunk
// multiplied by it does not have. Without this, such a shape never ran, so it was never measured.
class ChunkPredictor {
public:
  double predict(uint32_t passBegin, uint32_t passEnd, uint32_t batch, double plannedUs) const {
    auto it = byShape_.find(std::make_tuple(passBegin, passEnd, batch));
    const std::deque<double> none;
    const double ruled = rule(it != byShape_.end() ? it->second.times : none, ratios_, plannedUs);
    if (it != byShape_.end() && it->second.times.empty() && it->second.atPlan)
      return std::min(ruled, plannedUs); // a probe (refused): until it runs again
    return ruled;
  }
  // A chunk of this shape starts: a probe at the plan is one admission. (A chunk that is then
  // cut between passes is measured as its head's shape, not this one: without this, the shape
  // stayed at its plan, and every later chunk of it was admitted there.)
  void admitted(uint32_t passBegin, uint32_t passEnd, uint32_t batch) {
    auto it = byShape_.find(std::make_tuple(passBegin, passEnd, batch));
    if (it != byShape_.end())
      it->second.atPlan = false;
  }
  void add(uint32_t passBegin, uint32_t passEnd, uint32_t batch, double plannedUs,
           double measuredUs) {
    Shape &sh = byShape_[std::make_tuple(passBegin, passEnd, batch)];
    sh.probe.ran();
    sh.atPlan = false;
    std::deque<double> &d = sh.times;
    d.push_back(measuredUs);
    if (d.size() > kWindow)
      d.pop_front();
    if (plannedUs > 0) {
      ratios_.push_back(measuredUs / plannedUs);
      if (ratios_.size() > kWindow)
        ratios_.pop_front();
    }
  }

  // A chunk of this shape did not start: its prediction exceeded roomUs, what was left of its
  // bubble (planned us). A refusal (ProbeBackoff) when the slowest run is the reason: the same rule
  // without the shape's slowest run would have fitted the room (with no run of its own left: the
  // job's ratios, without their largest while they are few, or the plan, whichever is less). A
  // bubble that is simply short, or a margin the rule always keeps (1.2 x the median of a few
  // runs), is not a refusal.
  void refused(uint32_t passBegin, uint32_t passEnd, uint32_t batch, double plannedUs,
               double roomUs) {
    Shape &sh = byShape_[std::make_tuple(passBegin, passEnd, batch)];
    const bool thinShape = !sh.times.empty() && sh.times.size() < ProbeBackoff::kThinWindow;
    if (!(thinShape || sh.times.empty()))
      return;
    std::deque<double> times = sh.times, ratios = ratios_;
    if (thinShape)
      retireLargest(times);
    if (times.empty() && ratios.size() < ProbeBackoff::kThinWindow)
      retireLargest(ratios); // the same slow run scaled the job's ratios
    double without = rule(times, ratios, plannedUs);
    if (times.empty())
      without = std::min(without, plannedUs); // probed at its plan, at worst
    // Without any run the rule has no margin (the plan is trusted until measured); the margin of
    // a few runs (1.2 x) is kept, so a shape that runs at its plan is not probed in rooms between
    // 1 and 1.2 x its plan.
    const double margin = times.empty() ? 1.2 : 1.0;
    if (!(margin * without <= roomUs) || !sh.probe.refuse())
      return;
    sh.times = std::move(times);
    if (sh.times.empty()) {
      ratios_ = std::move(ratios);
      sh.atPlan = true;
    }
  }

private:
  // The prediction from a shape's runs (`times`), else the job's ratios, else the plan.
  static double rule(const std::deque<double> &times, const std::deque<double> &ratios,
                     double plannedUs) {
    if (!times.empty()) {
      const std::vector<double> v = sortedSample(times);
      const double median = sortedMedian(v);
      if (v.size() < 5)
        return std::max(1.2 * median, v.back());
      return std::max(1.05 * median, sortedPercentile(v, 0.9));
    }
    if (!ratios.empty() && plannedUs > 0)
      return plannedUs * sortedPercentile(sortedSample(ratios), 0.9);
    return plannedUs;
  }

  static constexpr size_t kWindow = 32;
  struct Shape {
    std::deque<double> times;
    ProbeBackoff probe;
    bool atPlan = false; // probed with no run of its own: predicted at most at its plan
  };
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, Shape> byShape_;
  std::deque<double> ratios_;
};


} // namespace pfrt

#endif // PFRT_FILL_PREDICTOR_H
