// Sessions: fill tasks (pfrt_session_task_*), run in bubbles after the plan's chunks under the
// same bubble bound (SessionTasks.h, docs/integration.md "Fill tasks").
#include "runtime/SessionImpl.h"

#include "support/Checked.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cxxabi.h>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace pfrt {
namespace session {

void Session::runTasks(BubbleTask &task) {
  const uint32_t n = static_cast<uint32_t>(tasks_.size());
  if (!n)
    return;
  const uint64_t freeBytes =
      task.unplanned ? unplannedFreeBytes_ : bubbles_[task.bubble].desc.free_bytes;
  // out[t]: task t starts no further step in this bubble.
  std::vector<char> out(n, 0);
  for (uint32_t t = 0; t < n; ++t) {
    TaskState &ts = tasks_[t];
    if (!ts.runnable()) {
      out[t] = 1;
    } else if (ts.memoryBytes > freeBytes) {
      ++ts.skippedMemory;
      out[t] = 1;
    }
  }
  uint32_t next = taskTurn_ % n;
  while (!stopped(task)) {
    uint32_t t = n;
    for (uint32_t k = 0; k < n && t == n; ++k)
      if (!out[(next + k) % n])
        t = (next + k) % n;
    if (t == n)
      return; // no task has a step that fits
    TaskState &ts = tasks_[t];
    const double predicted = ts.predictor.predict();
    const double now = sessionNowUs();
    const bool admit = config_.fillBounded ? now + predicted <= task.deadlineUs
                                           : now < task.deadlineUs;
    next = (t + 1) % n;
    if (!admit) {
      // The time left only shrinks and the prediction stays until the task runs again: it
      // waits for the next bubble.
      ts.predictor.refused(task.deadlineUs - now);
      ++ts.skippedNoFit;
      out[t] = 1;
      continue;
    }
    runStep(ts, t, task);
    taskTurn_ = next;
    if (!ts.runnable())
      out[t] = 1;
  }
}

void Session::fillStream(void *&stream, int &gpu) const {
  stream = nullptr;
  gpu = -1;
  if (device_)
    backend_->nativeStream(const_cast<StreamCtx &>(ctx_), stream, gpu);
}

void Session::runStep(TaskState &ts, uint32_t t, BubbleTask &task) {
  uint64_t samples = 0;
  pfrt_status st = PFRT_ERROR_INTERNAL;
  std::string thrown;
  const double t0 = sessionNowUs();
  try {
    st = ts.step(ts.user, &samples);
    // CUDA: the step's GPU work (on the fill stream, pfrt_session_fill_stream) is part of the
    // step: its time is measured, and the next step is admitted, once that work is done.
    if (device_ && st == PFRT_OK)
      backend_->syncStream(ctx_);
  } catch (const std::exception &e) {
    thrown = e.what();
  } catch (abi::__forced_unwind &) {
    throw; // the step's thread is being ended (pthread_exit, e.g. by an exiting interpreter)
  } catch (...) {
    thrown = "unknown exception";
  }
  const double t1 = sessionNowUs();
  const double us = t1 - t0;
  ts.taskUs += us;
  task.result.task_us += us;
  const bool destroyed = destroyRefused_; // the step called pfrt_session_destroy (refused)
  destroyRefused_ = false;
  // A C step may report any count; a task's total stays within what a checkpoint holds.
  constexpr uint64_t kMaxSamples = static_cast<uint64_t>(pipefill::kMaxCheckpointCount);
  const uint64_t before = std::min(pipefill::satAddU(ts.baseSamples, ts.samples), kMaxSamples);
  const bool tooMany = st == PFRT_OK && thrown.empty() && samples > kMaxSamples - before;
  if (st != PFRT_OK || !thrown.empty() || destroyed || tooMany) {
    ts.failed = true;
    const bool known = st >= PFRT_ERROR_INVALID_ARGUMENT && st <= PFRT_ERROR_INTERNAL;
    ts.errorStatus = destroyed || tooMany      ? PFRT_ERROR_INVALID_ARGUMENT
                     : known && thrown.empty() ? st
                                               : PFRT_ERROR_INTERNAL;
    std::string why = destroyed ? std::string("its step called pfrt_session_destroy on its own "
                                              "session, which was refused (the session's worker "
                                              "thread cannot destroy it)")
                      : tooMany ? "its step reported " + std::to_string(samples) +
                                      " samples, which takes the task past 10^15 samples in all "
                                      "(the most a checkpoint counts; it has " +
                                      std::to_string(before) + ")"
                      : !thrown.empty() ? "its step threw a C++ exception: " + thrown
                      : known           ? std::string("its step returned ") + pfrt_status_name(st)
                                        : "its step returned an unknown status " +
                                              std::to_string(static_cast<int>(st));
    std::string message = "fill task '" + ts.name + "' (task " + std::to_string(t) +
                          ") failed at step " + std::to_string(ts.totalSteps()) + ": " + why +
                          "; the task is disabled";
    std::lock_guard<std::mutex> lock(m_);
    if (taskError_.empty()) {
      taskError_ = std::move(message);
      taskErrorStatus_ = ts.errorStatus;
    } else {
      taskError_ += "; " + message; // the status is the first failure's
    }
    return;
  }
  ++ts.steps;
  ts.samples += samples; // <= 10^15 in all (tooMany above)
  ts.predictor.add(us);
  ts.measuredMax = std::max(ts.measuredMax, us);
  ts.measuredSum += us;
  ++ts.measuredSteps;
  ++task.result.task_steps;
  task.result.task_samples += samples;
  if (t1 > task.deadlineUs) {
    const double over = t1 - task.deadlineUs;
    task.result.overrun_us = std::max(task.result.overrun_us, over);
    ++ts.overruns;
    ts.overrunUs += over;
  }
}

uint32_t Session::addTask(const pfrt_session_task_desc &d) {
  checkNoBubble("pfrt_session_task_add");
  sync(); // CUDA: the worker reads the tasks
  const std::string name = d.name ? d.name : "";
  if (name.empty())
    invalid("pfrt_session_task_add: the task needs a name (desc.name is NULL or empty)");
  const std::string what = "pfrt_session_task_add('" + name + "'): ";
  if (!d.step)
    invalid(what + "step is NULL");
  // A step over 1000 s fits no bubble a pipeline has: the task would never run, unsaid.
  constexpr double kMaxStepUs = 1e9;
  if (!(d.step_us > 0 && d.step_us <= kMaxStepUs)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", d.step_us);
    invalid(what + "step_us must be > 0 and at most 1e9 (1000 s; the estimated real us of one "
                   "step), got " + got);
  }
  for (const TaskState &ts : tasks_)
    if (ts.name == name)
      invalid(what + "a task of that name exists already (names are unique: checkpoints "
                     "match tasks by name)");
  TaskState ts;
  ts.name = name;
  ts.step = d.step;
  ts.user = d.user_data;
  ts.stepUs = d.step_us;
  ts.memoryBytes = d.memory_bytes;
  ts.maxSteps = d.max_steps;
  ts.predictor = StepPredictor(d.step_us);
  tasks_.push_back(std::move(ts));
  return static_cast<uint32_t>(tasks_.size() - 1);
}

const TaskState &Session::taskAt(uint32_t t, const char *call) const {
  if (t >= tasks_.size())
    invalid(std::string(call) + ": task " + std::to_string(t) + " does not exist (the session has " +
            std::to_string(tasks_.size()) + " tasks)");
  return tasks_[t];
}

pfrt_session_task_stats Session::taskStats(uint32_t t) const {
  const TaskState &ts = taskAt(t, "pfrt_session_task_get");
  checkNoBubble("pfrt_session_task_get");
  sync();
  pfrt_session_task_stats o{};
  o.name = ts.name.c_str();
  o.step_us = ts.stepUs;
  o.memory_bytes = ts.memoryBytes;
  o.max_steps = ts.maxSteps;
  o.steps = ts.totalSteps();
  o.samples = ts.baseSamples + ts.samples;
  o.steps_this_run = ts.steps;
  o.samples_this_run = ts.samples;
  o.measured_us_p50 = ts.predictor.quantile(0.5);
  o.measured_us_p90 = ts.predictor.quantile(0.9);
  o.measured_us_max = ts.measuredMax;
  o.measured_us_mean =
      ts.measuredSteps ? ts.measuredSum / static_cast<double>(ts.measuredSteps) : 0;
  o.predicted_us = ts.predictor.predict();
  o.task_us = ts.taskUs;
  o.skipped_no_fit = ts.skippedNoFit;
  o.skipped_memory = ts.skippedMemory;
  o.overruns = ts.overruns;
  o.overrun_us = ts.overrunUs;
  o.done = ts.done() ? 1 : 0;
  o.failed = ts.failed ? 1 : 0;
  o.error_status = ts.errorStatus;
  return o;
}

void Session::setTaskState(uint32_t t, const void *data, size_t size) {
  taskAt(t, "pfrt_session_task_state_set");
  checkNoBubble("pfrt_session_task_state_set");
  sync();
  if (!data && size)
    invalid("pfrt_session_task_state_set: data is NULL");
  // The state goes into the checkpoint, which is read back whole (at most 16 x 256 MiB).
  if (size > pipefill::kMaxInputBytes)
    invalid("pfrt_session_task_state_set: " + std::to_string(size) +
            " bytes of state; a task's state is at most " +
            std::to_string(pipefill::kMaxInputBytes) + " bytes (it is saved in the checkpoint)");
  tasks_[t].state.assign(static_cast<const char *>(data), size);
}

const std::string &Session::taskState(uint32_t t) const {
  taskAt(t, "pfrt_session_task_state_get");
  checkNoBubble("pfrt_session_task_state_get");
  sync();
  return tasks_[t].state;
}

} // namespace session
} // namespace pfrt
