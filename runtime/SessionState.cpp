// Sessions: iteration ends, fill checkpoints (save and load), stats, the job rows and the JSON
// report of a session.
#include "runtime/SessionImpl.h"

#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"
#include "runtime/Report.h"
#include "proto/stream_program.pb.h"
#include "support/Checked.h"
#include "support/Json.h"

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace pfrt {
namespace session {

using pipefill::JsonWriter;

namespace {
// Why a device state's weights (none, or one tensor per LayerShape::weightSizes()) do not fit
// the job; empty if they do.
std::string weightsProblem(const JobShape &shape, const pipefill::rt::FillDeviceState &ds) {
  if (!ds.weights_size())
    return "";
  std::vector<size_t> sizes;
  for (const LayerShape &ls : shape.layers)
    for (size_t n : ls.weightSizes())
      sizes.push_back(n);
  if (static_cast<size_t>(ds.weights_size()) != sizes.size())
    return "has " + std::to_string(ds.weights_size()) + " weight tensors, the job " +
           std::to_string(sizes.size());
  for (int k = 0; k < ds.weights_size(); ++k)
    if (static_cast<size_t>(ds.weights(k).values_size()) != sizes[k])
      return "weight tensor " + std::to_string(k) + " has " +
             std::to_string(ds.weights(k).values_size()) + " values, expected " +
             std::to_string(sizes[k]);
  return "";
}
} // namespace

void Session::iterationEnd() {
  checkNoBubble("pfrt_session_iteration_end");
  ++loopIteration_;
  nextBubble_ = 0;
  loopBubbles_ = 0;
  if (queued_) {
    auto c = std::make_shared<DeviceCommand>();
    c->iterationEnd = true;
    enqueue(c, nullptr);
    return;
  }
  advanceIteration();
}

void Session::advanceIteration() {
  if (device_)
    backend_->resyncClock(rank_); // the worker: no edge is being resolved
  // Chunks of bubbles not begun this iteration wait for later bubbles, in plan order.
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (!slotDone_[s]) {
      slotDone_[s] = true;
      deferSlot(slots_[s]);
    }
  // What the plan scheduled on this rank in the iteration that ends.
  for (const Slot &slot : slots_) {
    const pfrt_fill_chunk_desc &f =
        program_.devices[rank_].streams[slot.stream].ops[slot.op].fill;
    JobState &js = jobs_[f.job];
    js.samplesPlanned +=
        samplesCompletedBy(f, iteration_, js.passes, js.stride, program_.jobs[f.job].samples);
  }
  slotDone_.assign(slots_.size(), false);
  roomUs_[1] = roomUs_[0];
  roomUs_[0] = 0;
  ++iteration_;
}

void Session::checkIterationStart(const char *call) const {
  // The iteration's place in the plan has moved once a planned bubble was begun or an unplanned
  // one took planned chunks forward (after sync(): CUDA's worker marks those). Bubbles that ran
  // only deferred work or tasks leave it at the start.
  bool moved = nextBubble_ > 0;
  for (size_t s = 0; s < slotDone_.size() && !moved; ++s)
    moved = slotDone_[s];
  if (!moved)
    return;
  invalid(std::string(call) + " in the middle of iteration " + std::to_string(loopIteration_) +
          " (" + std::to_string(loopBubbles_) +
          " bubble(s) begun since it started): a checkpoint holds the fill between iterations "
          "(a load restarts the iteration); call it after pfrt_session_iteration_end or before "
          "the iteration's first bubble");
}

void Session::saveCheckpoint(const std::string &path) {
  checkNoBubble("pfrt_session_checkpoint_save");
  if (path.empty())
    invalid("checkpoint path is empty");
  sync();
  checkIterationStart("pfrt_session_checkpoint_save");
  std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
  pipefill::rt::FillCheckpoint cp;
  cp.set_program_fingerprint(programFingerprint(program_));
  cp.set_iterations_done(static_cast<uint32_t>(iteration_));
  cp.set_max_dim(config_.maxDim);
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    JobState &js = jobs_[j];
    pipefill::rt::FillJobCheckpoint *jc = cp.add_jobs();
    jc->set_name(program_.jobs[j].name);
    JobData::Accum a = js.data ? js.data->accumulators() : JobData::Accum{};
    jc->set_samples_done(js.baseSamples + js.samples);
    jc->set_steps_done(js.baseSteps + js.steps);
    jc->set_checksum(js.baseChecksum + a.checksum);
    jc->set_loss_sum(js.baseLoss + a.lossSum);
    if (!js.data)
      continue;
    pipefill::rt::FillDeviceState *ds = jc->add_devices();
    ds->set_device(rank_);
    js.save(*ds, program_.jobs[j].kind == PFRT_FILL_TRAINING);
  }
  for (const TaskState &ts : tasks_) {
    pipefill::rt::FillTaskCheckpoint *tc = cp.add_tasks();
    tc->set_name(ts.name);
    tc->set_steps_done(ts.totalSteps());
    tc->set_samples_done(ts.baseSamples + ts.samples);
    tc->set_state(ts.state);
  }
  writeCheckpointFile(path, cp, cp.program_fingerprint());
}

void Session::loadCheckpoint(const std::string &path) {
  checkNoBubble("pfrt_session_checkpoint_load");
  if (path.empty())
    invalid("checkpoint path is empty");
  sync();
  checkIterationStart("pfrt_session_checkpoint_load");
  std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  switch (readCheckpointFile(path, programFingerprint(program_), cp, problem)) {
  case CheckpointStatus::Ok:
    break;
  case CheckpointStatus::Missing:
    throw Error(PFRT_ERROR_IO, "checkpoint " + path + " does not exist");
  case CheckpointStatus::Foreign:
    invalid("checkpoint " + path + " " + problem);
  case CheckpointStatus::Bad:
    throw Error(PFRT_ERROR_PARSE, "checkpoint " + path + " " + problem);
  }
  const std::string what = "checkpoint " + path + " ";
  if (cp.max_dim() != config_.maxDim)
    invalid(what + "was written with workload dimension cap " + std::to_string(cp.max_dim()) +
            " but this session uses " + std::to_string(config_.maxDim));
  if (cp.jobs_size() != static_cast<int>(jobs_.size()))
    throw Error(PFRT_ERROR_PARSE, what + "has " + std::to_string(cp.jobs_size()) +
                                      " jobs, the program " + std::to_string(jobs_.size()));
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    if (jc.name() != program_.jobs[j].name)
      throw Error(PFRT_ERROR_PARSE, what + "names job " + std::to_string(j) + " '" + jc.name() +
                                        "', the program '" + program_.jobs[j].name + "'");
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      if (ds.device() != rank_ || !jobs_[j].onRank)
        invalid(what + "holds job '" + jc.name() + "' state of device " +
                std::to_string(ds.device()) + ": it is not a session checkpoint of rank " +
                std::to_string(rank_));
      const std::string weights = weightsProblem(jobs_[j].shape, ds);
      if (!weights.empty())
        throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' " + weights);
      for (const pipefill::rt::InFlightBatch &b : ds.in_flight()) {
        std::string bad = checkInFlightShape(jobs_[j].shape, b);
        if (!bad.empty())
          throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' batch at sample " +
                                            std::to_string(b.sample_begin()) + ": " + bad);
      }
      for (const pipefill::rt::DeferredChunk &dc : ds.deferred()) {
        const std::string bad = FillQueue::deferredChunkProblem(dc, jobs_[j].passes);
        if (!bad.empty())
          throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' has " + bad);
      }
      const std::string held = FillQueue::heldProblem(ds, cp.iterations_done());
      if (!held.empty())
        throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' has " + held);
    }
  }
  std::vector<const pipefill::rt::FillTaskCheckpoint *> taskCps(tasks_.size(), nullptr);
  for (const pipefill::rt::FillTaskCheckpoint &tc : cp.tasks()) {
    uint32_t t = 0;
    while (t < tasks_.size() && tasks_[t].name != tc.name())
      ++t;
    if (t == tasks_.size())
      invalid(what + "holds fill task '" + tc.name() +
              "', which this session does not have: add it (pfrt_session_task_add) before "
              "loading the checkpoint");
    if (taskCps[t])
      throw Error(PFRT_ERROR_PARSE, what + "names fill task '" + tc.name() + "' twice");
    taskCps[t] = &tc;
  }
  // Checked: replace the state.
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    TaskState &ts = tasks_[t];
    ts.baseSteps = taskCps[t] ? taskCps[t]->steps_done() : 0;
    ts.baseSamples = taskCps[t] ? taskCps[t]->samples_done() : 0;
    ts.state = taskCps[t] ? taskCps[t]->state() : std::string();
    ts.steps = ts.samples = 0;
  }
  createJobData();
  if (device_) {
    backend_->warmUp();
    backend_->begin(hostNowUs()); // frees the new jobs' pool reservations; no edge is pending
  }
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    JobState &js = jobs_[j];
    js.baseSamples = jc.samples_done();
    js.baseSteps = jc.steps_done();
    js.baseChecksum = jc.checksum();
    js.baseLoss = jc.loss_sum();
    js.samples = js.steps = 0;
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      const std::string bad = js.restore(ds, js.passes); // checked above: never fails here
      if (!bad.empty())
        throw Error(PFRT_ERROR_PARSE, what + "job '" + program_.jobs[j].name + "' " + bad);
    }
    // A checkpoint without this rank's state (one pipefill-run wrote with --no-fill) ran no
    // fill here: the plan has not begun, and its iterations count as held (as in pfrt_run).
    if (js.onRank && jc.devices().empty())
      js.restoreUnfilled(rank_, cp.iterations_done(), js.passes);
  }
  iteration_ = loopIteration_ = cp.iterations_done();
  resetRooms();
  nextBubble_ = 0;
  loopBubbles_ = 0;
  slotDone_.assign(slots_.size(), false);
}

pfrt_session_stats Session::stats() const {
  // The worker updates the counters while a bubble is open: read them between bubbles.
  checkNoBubble("pfrt_session_get_stats");
  sync(); // CUDA: the worker's numbers of the bubbles queued so far
  pfrt_session_stats s{};
  s.rank = rank_;
  s.iterations = static_cast<uint64_t>(iteration_);
  s.bubbles = bubblesRun_;
  s.unplanned_bubbles = unplannedRun_;
  for (const JobState &js : jobs_) {
    s.chunks_run += js.chunksRun;
    s.chunks_deferred += js.chunksDeferred;
    s.chunks_split += js.chunksSplit;
    s.chunks_stopped_on_device += js.chunksStoppedOnDevice;
    s.chunks_skipped += js.chunksSkipped;
    s.chunks_pending += js.backlog.size();
    s.samples_completed += js.baseSamples + js.samples;
  }
  s.fill_us = fillUs_;
  s.overrun_count = overrunCount_;
  s.overrun_us = overrunUs_;
  s.end_wait_us = endWaitUs_;
  s.end_wait_us_max = endWaitUsMax_;
  s.tasks = static_cast<uint32_t>(tasks_.size());
  for (const TaskState &ts : tasks_) {
    s.task_steps += ts.totalSteps();
    s.task_samples =
        pipefill::satAddU(s.task_samples, pipefill::satAddU(ts.baseSamples, ts.samples));
    s.task_us += ts.taskUs;
    s.task_overrun_count += ts.overruns;
    s.task_overrun_us += ts.overrunUs;
  }
  return s;
}

pfrt_report_job Session::job(uint32_t j) const {
  checkNoBubble("pfrt_session_get_job");
  sync();
  if (j >= jobs_.size())
    invalid("job " + std::to_string(j) + " does not exist (the program has " +
            std::to_string(jobs_.size()) + " fill jobs)");
  const JobState &js = jobs_[j];
  pfrt_report_job out{};
  out.name = program_.jobs[j].name.c_str();
  out.kind = program_.jobs[j].kind;
  out.samples_completed = js.baseSamples + js.samples;
  out.samples_this_run = js.samples;
  out.samples_planned = js.samplesPlanned;
  JobData::Accum a = js.data ? js.data->accumulators() : JobData::Accum{};
  out.checksum = js.baseChecksum + a.checksum;
  out.steps = js.baseSteps + js.steps;
  out.weights_checksum = js.data && out.kind == PFRT_FILL_TRAINING
                             ? tensorsChecksum(js.data->saveWeights())
                             : 0;
  out.iterations_held = static_cast<uint64_t>(js.held);
  if (js.onRank) {
    const Stream &st = program_.devices[rank_].streams[info_.jobs[j].streamOnDevice.at(rank_)];
    out.samples_held = FillQueue::heldSamples(st, j, js.passes, js.stride,
                                              program_.jobs[j].samples, js.held,
                                              js.loopEnd(iteration_));
    out.samples_in_flight_planned =
        samplesInFlightAt(st, j, iteration_, js.passes, js.stride, program_.jobs[j].samples);
  }
  return out;
}

const std::string &Session::reportJson() {
  checkNoBubble("pfrt_session_report_json");
  const pfrt_session_stats s = stats();
  JsonWriter w;
  w.beginObject();
  w.value("rank", s.rank);
  w.value("ranks", ranks());
  w.value("time_measured", true);
  w.value("time_scale", config_.timeScale);
  w.value("fill_policy", !config_.fillBounded ? "unbounded"
                         : config_.fillSplit ? "bounded"
                                             : "bounded-whole");
  w.value("iterations", s.iterations);
  w.value("bubbles", s.bubbles);
  w.value("unplanned_bubbles", s.unplanned_bubbles);
  writeChunkCounts(w, {s.chunks_run, s.chunks_deferred, s.chunks_skipped, s.chunks_pending,
                       s.chunks_split, s.chunks_stopped_on_device});
  w.value("samples_completed", s.samples_completed);
  w.value("fill_us", s.fill_us);
  w.value("overrun_count", s.overrun_count);
  w.value("overrun_us", s.overrun_us);
  w.value("end_wait_us", s.end_wait_us);
  w.value("end_wait_us_max", s.end_wait_us_max);
  w.beginArray("jobs");
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pfrt_report_job rj = job(j);
    const JobState &js = jobs_[j];
    w.beginObject();
    w.value("name", rj.name);
    w.value("kind", fillKindName(rj.kind));
    w.value("on_rank", js.onRank);
    w.value("samples_completed", rj.samples_completed);
    w.value("samples_this_run", rj.samples_this_run);
    w.value("samples_planned", rj.samples_planned);
    w.value("samples_in_flight_planned", rj.samples_in_flight_planned);
    w.value("checksum", rj.checksum);
    w.value("steps", rj.steps);
    writeChunkCounts(w, {js.chunksRun, js.chunksDeferred, js.chunksSkipped, js.backlog.size(),
                         js.chunksSplit, js.chunksStoppedOnDevice});
    w.value("iterations_held", rj.iterations_held);
    w.value("samples_held", rj.samples_held);
    w.beginArray("chunk_shapes");
    for (const auto &kv : js.shapes) {
      w.beginObject();
      w.value("layer_begin", std::get<0>(kv.first));
      w.value("layer_end", std::get<1>(kv.first));
      w.value("batch", std::get<2>(kv.first));
      w.value("runs", kv.second.runs);
      w.value("planned_us", kv.second.plannedUs);
      w.value("predicted_us_last", kv.second.predictedUsLast);
      w.value("measured_us_mean", kv.second.measuredUsSum / static_cast<double>(kv.second.runs));
      w.value("measured_us_max", kv.second.measuredUsMax);
      w.endObject();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();
  w.value("task_steps", s.task_steps);
  w.value("task_samples", s.task_samples);
  w.value("task_us", s.task_us);
  w.value("task_overrun_count", s.task_overrun_count);
  w.value("task_overrun_us", s.task_overrun_us);
  w.beginArray("tasks");
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    const pfrt_session_task_stats ts = taskStats(t);
    w.beginObject();
    w.value("name", ts.name);
    w.value("task", t);
    w.value("step_us", ts.step_us);
    w.value("memory_bytes", ts.memory_bytes);
    w.value("max_steps", ts.max_steps);
    w.value("steps", ts.steps);
    w.value("samples", ts.samples);
    w.value("steps_this_run", ts.steps_this_run);
    w.value("samples_this_run", ts.samples_this_run);
    w.value("measured_us_p50", ts.measured_us_p50);
    w.value("measured_us_p90", ts.measured_us_p90);
    w.value("measured_us_max", ts.measured_us_max);
    w.value("measured_us_mean", ts.measured_us_mean);
    w.value("predicted_us", ts.predicted_us);
    w.value("task_us", ts.task_us);
    w.value("skipped_no_fit", ts.skipped_no_fit);
    w.value("skipped_memory", ts.skipped_memory);
    w.value("overruns", ts.overruns);
    w.value("overrun_us", ts.overrun_us);
    w.value("done", ts.done != 0);
    w.value("failed", ts.failed != 0);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  json_ = w.str();
  return json_;
}

} // namespace session
} // namespace pfrt
