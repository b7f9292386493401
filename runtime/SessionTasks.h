// Fill tasks of a session (pfrt_session_task_*): the user's own work, cut into steps, that the
// session runs in bubbles after the plan's chunks, under the same bubble bound.
#ifndef PFRT_SESSION_TASKS_H
#define PFRT_SESSION_TASKS_H

#include "runtime/FillPredictor.h"
#include "runtime/pfrt.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace pfrt {

// Predicts the real time of a task's next step for the bound (pfrt.h, "Fill tasks"):
// before any measured step 1.2 x the user's estimate; then max(1.2 x median, 90th percentile) of
// the last 32 measured steps (nearest-rank percentile: with fewer than 10 steps, their maximum).
class StepPredictor {
public:
  static constexpr size_t kWindow = 32;
  static constexpr double kMargin = 1.2; // FreeRide's: time left > 1.2 x median

  explicit StepPredictor(double estimateUs = 0) : estimateUs_(estimateUs) {}

  double predict() const { return rule(recent_); }
  void add(double measuredUs) {
    probe_.ran();
    recent_.push_back(measuredUs);
    if (recent_.size() > kWindow)
      recent_.pop_front();
  }
  size_t size() const { return recent_.size(); }
  // A step did not start: its prediction exceeded roomUs, what was left of the bubble. A refusal
  // (ProbeBackoff) when the slowest of fewer than ten steps is the reason: without it the rule
  // would have fitted the room. After ProbeBackoff's count that step is retired.
  void refused(double roomUs) {
    if (recent_.empty() || recent_.size() >= ProbeBackoff::kThinWindow)
      return;
    std::deque<double> rest = recent_;
    retireLargest(rest);
    if (rule(rest) <= roomUs && probe_.refuse())
      recent_ = std::move(rest);
  }
  // q = 0.5: the median (mean of the two middle values for an even count); otherwise the
  // nearest-rank percentile. 0 when nothing was measured.
  double quantile(double q) const {
    if (recent_.empty())
      return 0;
    const std::vector<double> v = sortedSample(recent_);
    return q == 0.5 ? sortedMedian(v) : sortedPercentile(v, q);
  }

private:
  double rule(const std::deque<double> &steps) const {
    if (steps.empty())
      return kMargin * estimateUs_;
    const std::vector<double> v = sortedSample(steps);
    return std::max(kMargin * sortedMedian(v), sortedPercentile(v, 0.9));
  }

  double estimateUs_;
  std::deque<double> recent_;
  ProbeBackoff probe_;
};

struct TaskState {
  std::string name;
  pfrt_session_task_step_fn step = nullptr;
  void *user = nullptr;
  double stepUs = 0;
  uint64_t memoryBytes = 0, maxSteps = 0;
  StepPredictor predictor;
  uint64_t baseSteps = 0, baseSamples = 0; // restored from a checkpoint
  uint64_t steps = 0, samples = 0;         // this session
  double taskUs = 0, measuredMax = 0, measuredSum = 0, overrunUs = 0; // taskUs: failed steps too
  uint64_t measuredSteps = 0; // the steps measuredSum adds up (this session's; steps resets on load)
  uint64_t skippedNoFit = 0, skippedMemory = 0, overruns = 0;
  bool failed = false;
  pfrt_status errorStatus = PFRT_OK;
  std::string state; // opaque bytes saved with the checkpoint

  uint64_t totalSteps() const { return baseSteps + steps; }
  bool done() const { return maxSteps && totalSteps() >= maxSteps; }
  bool runnable() const { return !failed && !done(); }
};

} // namespace pfrt

#endif // PFRT_SESSION_TASKS_H
