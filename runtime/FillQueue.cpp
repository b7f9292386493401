#include "runtime/FillQueue.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace pfrt {

void Backlog::push_back(const WorkItem &w) {
  items_.push_back(w);
  ++batches_[w.sampleBegin];
}

void Backlog::push_front(const WorkItem &w) {
  items_.push_front(w);
  ++batches_[w.sampleBegin];
}

void Backlog::pop_front() {
  auto it = batches_.find(items_.front().sampleBegin);
  if (--it->second == 0)
    batches_.erase(it);
  items_.pop_front();
}

void Backlog::erase(size_t i) {
  auto it = batches_.find(items_.at(i).sampleBegin);
  if (--it->second == 0)
    batches_.erase(it);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Backlog::replace(size_t i, const WorkItem &w) {
  WorkItem &old = items_.at(i);
  auto it = batches_.find(old.sampleBegin);
  if (--it->second == 0)
    batches_.erase(it);
  old = w;
  ++batches_[w.sampleBegin];
}

size_t Backlog::firstNotParked(size_t i, const std::vector<uint64_t> &parked) const {
  while (i < items_.size() &&
         std::find(parked.begin(), parked.end(), items_[i].sampleBegin) != parked.end())
    ++i;
  return i;
}

void Backlog::clear() {
  items_.clear();
  batches_.clear();
}

uint64_t samplesCompletedBy(const pfrt_fill_chunk_desc &f, int64_t planIt, uint32_t passes,
                            uint64_t stride, uint64_t total) {
  int64_t logical = 0;
  if (f.layer_end != passes || !chunkRunsIn(f, planIt, &logical) || logical < 0)
    return 0;
  const uint64_t sb = f.sample_begin + static_cast<uint64_t>(logical) * stride;
  if (total && sb >= total)
    return 0;
  return total ? std::min<uint64_t>(f.batch, total - sb) : f.batch;
}

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
} // namespace

uint64_t batchSamplesIn(const pfrt_fill_chunk_desc &f, int64_t from, int64_t to, uint64_t stride,
                        uint64_t total) {
  const int64_t period = f.period ? f.period : 1, phase = f.phase;
  from = std::max<int64_t>(from, phase);
  if (to <= from)
    return 0;
  // Run m is in iteration phase + m * period, of logical iteration m + iteration_offset.
  int64_t m0 = std::max<int64_t>(ceilDiv(from - phase, period), -int64_t(f.iteration_offset));
  int64_t m1 = ceilDiv(to - phase, period);
  const uint64_t batch = f.batch;
  if (!total)
    return m1 > m0 ? static_cast<uint64_t>(m1 - m0) * batch : 0;
  if (f.sample_begin >= total)
    return 0;
  if (stride == 0) // every run begins at sample_begin
    return m1 > m0 ? static_cast<uint64_t>(m1 - m0) * std::min<uint64_t>(batch, total - f.sample_begin)
                   : 0;
  // Runs whose batch begins before `total`: logical < ceil((total - sample_begin) / stride).
  const uint64_t logicals = (total - f.sample_begin + stride - 1) / stride;
  m1 = std::min<int64_t>(m1, static_cast<int64_t>(logicals) - int64_t(f.iteration_offset));
  if (m1 <= m0)
    return 0;
  uint64_t samples = static_cast<uint64_t>(m1 - m0) * batch;
  // The last runs may be cut at `total` (their begin increases with m).
  for (int64_t m = m1 - 1; m >= m0; --m) {
    const uint64_t sb = f.sample_begin + static_cast<uint64_t>(m + f.iteration_offset) * stride;
    if (total - sb >= batch)
      break;
    samples -= batch - (total - sb);
  }
  return samples;
}

uint64_t samplesInFlightAt(const Stream &st, uint32_t job, int64_t end, uint32_t passes,
                           uint64_t stride, uint64_t total) {
  uint64_t begun = 0, completed = 0;
  for (const Op &op : st.ops) {
    if (op.kind != OpKind::Fill || op.fill.job != job)
      continue;
    if (op.fill.layer_begin == 0)
      begun += batchSamplesIn(op.fill, 0, end, stride, total);
    if (op.fill.layer_end == passes)
      completed += batchSamplesIn(op.fill, 0, end, stride, total);
  }
  return begun > completed ? begun - completed : 0;
}

bool FillQueue::planIteration(int64_t iteration, int64_t *planIt) {
  if (iteration != decidedFor_) {
    decidedFor_ = iteration;
    holding_ = holdAt > 0 && backlog.size() >= holdAt;
    if (holding_)
      ++held;
  }
  *planIt = iteration - held;
  return !holding_;
}

size_t FillQueue::holdThreshold(const Stream &st, uint32_t job) {
  double perIteration = 0;
  for (const Op &op : st.ops)
    if (op.kind == OpKind::Fill && op.fill.job == job)
      perIteration += 1.0 / (op.fill.period ? op.fill.period : 1);
  return std::max<size_t>(2, static_cast<size_t>(std::ceil(2 * perIteration)));
}

uint64_t FillQueue::heldSamples(const Stream &st, uint32_t job, uint32_t passes, uint64_t stride,
                                uint64_t total, int64_t held, int64_t loopEnd) {
  // What the chunks that complete a batch complete in the held plan iterations, in closed form.
  uint64_t n = 0;
  for (const Op &op : st.ops)
    if (op.kind == OpKind::Fill && op.fill.job == job && op.fill.layer_end == passes)
      n += batchSamplesIn(op.fill, std::max<int64_t>(0, loopEnd - held), loopEnd, stride, total);
  return n;
}

FillQueue::Own FillQueue::ownWork(const pfrt_fill_chunk_desc &f, int64_t iteration,
                                  const FillJob &job, uint64_t stride, WorkItem &own) {
  int64_t planIt = 0, logical = 0;
  const bool begins = planIteration(iteration, &planIt);
  if (!chunkRunsIn(f, planIt, &logical))
    return Own::NotThisIteration;
  if (!begins)
    return Own::Held;
  if (logical < 0)
    return Own::Skipped;
  const uint64_t sb = f.sample_begin + static_cast<uint64_t>(logical) * stride;
  if (job.samples && sb >= job.samples)
    return Own::Skipped;
  own.sampleBegin = sb;
  own.batch = job.samples ? static_cast<uint32_t>(std::min<uint64_t>(f.batch, job.samples - sb))
                          : f.batch;
  own.passBegin = f.layer_begin;
  own.passEnd = f.layer_end;
  own.plannedUs = f.planned_us;
  own.weightsStreamed = f.weights_streamed != 0;
  own.activationsHost = f.activations_on_host != 0;
  own.peakBytes = f.peak_bytes;
  if (f.layer_begin > 0) {
    // A continuation needs its batch in flight or queued before it; otherwise the batch was begun
    // before a resume without its state (or never): nothing to continue.
    if (!flights.count(sb) && !backlog.holds(sb))
      return Own::Skipped;
    auto fl = flights.find(sb);
    if (fl != flights.end() && backlog.empty() && fl->second.next != f.layer_begin)
      return Own::Skipped;
  }
  return Own::Ready;
}

Flight *FillQueue::admit(const WorkItem &item, bool *begunTwice) {
  *begunTwice = false;
  auto found = flights.find(item.sampleBegin);
  if (item.passBegin == 0) {
    if (found != flights.end()) {
      *begunTwice = true;
      return nullptr;
    }
    Flight fl;
    fl.batch = item.batch;
    return &flights.emplace(item.sampleBegin, std::move(fl)).first->second;
  }
  if (found == flights.end() || found->second.next != item.passBegin)
    return nullptr;
  return &found->second;
}

bool FillQueue::fittingHead(const WorkItem &item, const JobShape &shape, double roomUs,
                            WorkItem *head, double *predictedUs) const {
  if (item.passEnd <= item.passBegin + 1 || !(roomUs > 0))
    return false;
  const uint32_t n = item.passEnd - item.passBegin;
  const std::vector<double> heads = plannedHeadsUs(item, shape);
  for (uint32_t k = n - 1; k >= 1; --k) {
    const double planned = heads[k];
    const double predicted =
        predictor.predict(item.passBegin, item.passBegin + k, item.batch, planned);
    if (predicted <= roomUs) {
      *head = item;
      head->passEnd = item.passBegin + k;
      head->plannedUs = planned;
      *predictedUs = predicted;
      return true;
    }
  }
  return false;
}

FillQueue::Split FillQueue::splitToFit(size_t i, const JobShape &shape, double roomUs,
                                       bool split, WorkItem *part, double *predictedUs) {
  const WorkItem item = backlog.at(i);
  if (split && fittingHead(item, shape, roomUs, part, predictedUs)) {
    dropHead(backlog.at(i), *part);
    return Split::Head;
  }
  predictor.refused(item.passBegin, item.passEnd, item.batch, item.plannedUs, roomUs);
  if (split && fittingBatch(item, shape, roomUs, part, predictedUs)) {
    backlog.replace(i, batchRest(item, *part));
    return Split::Samples;
  }
  return Split::None;
}

bool FillQueue::fittingBatch(const WorkItem &item, const JobShape &shape, double roomUs,
                             WorkItem *part, double *predictedUs) const {
  if (shape.kind != PFRT_FILL_INFERENCE || item.passBegin != 0 || item.passEnd != shape.passes ||
      item.batch < 2 || !(roomUs > 0) || flights.count(item.sampleBegin))
    return false;
  for (uint32_t k = item.batch / 2; k >= 1; k /= 2) {
    const double planned = item.plannedUs * k / item.batch;
    const double predicted = predictor.predict(item.passBegin, item.passEnd, k, planned);
    if (predicted <= roomUs) {
      *part = item;
      part->batch = k;
      part->plannedUs = planned;
      *predictedUs = predicted;
      return true;
    }
  }
  return false;
}

WorkItem FillQueue::batchRest(const WorkItem &item, const WorkItem &part) {
  WorkItem rest = item;
  rest.sampleBegin = item.sampleBegin + part.batch;
  rest.batch = item.batch - part.batch;
  rest.plannedUs = std::max(0.0, item.plannedUs - part.plannedUs);
  return rest;
}

std::vector<double> FillQueue::plannedHeadsUs(const WorkItem &item, const JobShape &shape) {
  const uint32_t n = item.passEnd > item.passBegin ? item.passEnd - item.passBegin : 0;
  std::vector<double> upTo(n + 1, 0.0); // planned cost of the first k passes
  for (uint32_t k = 0; k < n; ++k)
    upTo[k + 1] = upTo[k] + plannedPassUs(shape, item.passBegin + k, item.batch);
  const bool byCost = upTo[n] > 0;
  for (uint32_t k = 0; k <= n; ++k)
    upTo[k] = item.plannedUs * (byCost ? upTo[k] / upTo[n] : n ? double(k) / n : 1.0);
  return upTo;
}

void FillQueue::dropHead(WorkItem &item, const WorkItem &head) {
  item.passBegin = head.passEnd;
  item.plannedUs = std::max(0.0, item.plannedUs - head.plannedUs);
}

void FillQueue::pushRest(const WorkItem &item, const Ran &ran) {
  // The passes not run: merged with the chunk's rest where it waits when `item` was its head (at
  // the front, or behind chunks passed over: Backlog::firstNotParked), else first in line.
  WorkItem rest = item;
  rest.passBegin = ran.passEnd;
  rest.plannedUs = std::max(0.0, item.plannedUs - ran.plannedUs);
  if (backlog.holds(item.sampleBegin))
    for (size_t i = 0; i < backlog.size(); ++i) {
      WorkItem &w = backlog.at(i);
      if (w.sampleBegin == item.sampleBegin && w.passBegin == item.passEnd) {
        w.passBegin = rest.passBegin;
        w.plannedUs += rest.plannedUs;
        return;
      }
    }
  backlog.push_front(rest);
}

FillQueue::Ran FillQueue::run(StreamCtx &ctx, Backend &backend, Flight &flight, uint32_t job,
                              const JobShape &shape, uint32_t passes, const WorkItem &item,
                              const RunConfig &config, double deadlineUs, double predictedUs,
                              bool timed, const std::function<double()> &deadlineNow,
                              int64_t bubbleToken) {
  FillExec ex;
  ex.job = job;
  ex.device = ctx.device;
  ex.shape = &shape;
  ex.passBegin = item.passBegin;
  ex.passEnd = item.passEnd;
  ex.batch = flight.batch;
  ex.sampleBegin = item.sampleBegin;
  ex.weightsStreamed = item.weightsStreamed;
  ex.activationsHost = item.activationsHost;
  ex.begins = item.passBegin == 0;
  ex.completes = item.passEnd == passes;
  ex.plannedUs = item.plannedUs;
  ex.timeScale = config.timeScale;
  ex.bounded = config.fillBounded;
  ex.deadlineUs = deadlineUs;
  ex.predictedUs = predictedUs > 0 ? predictedUs * config.timeScale : 0;
  // Planned time of each head of `item` (heads[k]: its first k passes), for cuts and the device.
  const std::vector<double> heads = plannedHeadsUs(item, shape);
  if (predictedUs > 0) {
    // A pass's share of the chunk's prediction: the chunk's in proportion to planned costs.
    const double perPlannedUs = predictedUs * config.timeScale / std::max(item.plannedUs, 1e-9);
    for (uint32_t k = 0; k + 1 < heads.size(); ++k)
      ex.passNeedUs.push_back(perPlannedUs * (heads[k + 1] - heads[k]));
    if (deadlineNow && item.passEnd > item.passBegin + 1)
      ex.keepGoing = [&](uint32_t p) {
        return backend.streamNowUs(ctx) + ex.passNeedUs[p - item.passBegin] <= deadlineNow();
      };
    ex.splitPasses = static_cast<bool>(deadlineNow);
    ex.bubbleToken = bubbleToken;
  }
  Ran ran;
  ran.batch = flight.batch;
  predictor.admitted(item.passBegin, item.passEnd, item.batch);
  const double cpu0 = timed ? backend.fillThreadCpuUs() : -1;
  if (timed)
    ran.startUs = backend.streamNowUs(ctx);
  ran.passEnd = data->run(ctx, flight.data, ex);
  ran.deviceStop = backend.lastDeviceStop(ctx);
  ran.cut = ran.passEnd < item.passEnd;
  ran.plannedUs = heads[ran.passEnd - item.passBegin];
  if (timed) {
    ran.endUs = backend.streamNowUs(ctx);
    if (cpu0 >= 0)
      ran.cpuUs = backend.fillThreadCpuUs() - cpu0;
    backend.lastWorkSpan(ctx, ran.startUs, ran.endUs);
    if (ran.passEnd > item.passBegin) // a chunk the device skipped whole taught nothing
      predictor.add(item.passBegin, ran.passEnd, item.batch, ran.plannedUs,
                    (ran.endUs - ran.startUs) / config.timeScale);
  }
  if (ran.passEnd == item.passBegin && item.passBegin == 0) {
    // The device skipped a chunk that would have begun its batch: the batch is not in flight
    // (the backend dropped what it had made), so the whole item begins it again later.
    flights.erase(item.sampleBegin); // `flight` is gone
    pushRest(item, ran);
    return ran;
  }
  flight.next = ran.passEnd;
  if (ran.cut) {
    pushRest(item, ran);
  } else if (ex.completes) {
    ran.completed = true;
    flights.erase(item.sampleBegin); // `flight` is gone
  }
  return ran;
}

void FillQueue::save(pipefill::rt::FillDeviceState &ds, bool training) const {
  if (training)
    for (const auto &w : data->saveWeights())
      ds.add_weights()->mutable_values()->Add(w.begin(), w.end());
  for (const auto &fl : flights) {
    pipefill::rt::InFlightBatch *b = ds.add_in_flight();
    b->set_sample_begin(fl.first);
    b->set_batch(fl.second.batch);
    b->set_next_layer(fl.second.next);
    if (fl.second.data)
      for (const auto &t : fl.second.data->save())
        b->add_tensors()->mutable_values()->Add(t.begin(), t.end());
  }
  ds.set_iterations_held(held);
  for (const WorkItem &w : backlog) {
    pipefill::rt::DeferredChunk *dc = ds.add_deferred();
    dc->set_sample_begin(w.sampleBegin);
    dc->set_batch(w.batch);
    dc->set_layer_begin(w.passBegin);
    dc->set_layer_end(w.passEnd);
    dc->set_planned_us(w.plannedUs);
    dc->set_weights_streamed(w.weightsStreamed);
    dc->set_activations_on_host(w.activationsHost);
    dc->set_peak_bytes(w.peakBytes);
  }
}

std::string FillQueue::deferredChunkProblem(const pipefill::rt::DeferredChunk &dc,
                                            uint32_t passes) {
  if (dc.batch() == 0)
    return "a deferred chunk of batch 0 at sample " + std::to_string(dc.sample_begin());
  if (dc.layer_end() <= dc.layer_begin() || dc.layer_end() > passes)
    return "a deferred chunk of passes [" + std::to_string(dc.layer_begin()) + ", " +
           std::to_string(dc.layer_end()) + ") at sample " + std::to_string(dc.sample_begin()) +
           "; the job has " + std::to_string(passes);
  return "";
}

std::string FillQueue::heldProblem(const pipefill::rt::FillDeviceState &ds,
                                   uint64_t iterationsDone) {
  const int64_t held = ds.iterations_held();
  if (held >= 0 && static_cast<uint64_t>(held) <= iterationsDone)
    return "";
  return std::to_string(held) + " iterations held after " + std::to_string(iterationsDone) +
         " iterations";
}

void FillQueue::restoreUnfilled(uint32_t device, uint64_t iterationsDone, uint32_t passes) {
  pipefill::rt::FillDeviceState never;
  never.set_device(device);
  never.set_iterations_held(static_cast<int64_t>(iterationsDone));
  restore(never, passes); // nothing in it can be refused
}

std::string FillQueue::restore(const pipefill::rt::FillDeviceState &ds, uint32_t passes) {
  auto toVectors = [](const google::protobuf::RepeatedPtrField<pipefill::rt::FloatTensor> &ts) {
    std::vector<std::vector<float>> out;
    for (const auto &t : ts)
      out.emplace_back(t.values().begin(), t.values().end());
    return out;
  };
  if (ds.iterations_held() < 0)
    return "has " + std::to_string(ds.iterations_held()) + " iterations held";
  resetPlan();
  held = ds.iterations_held();
  if (ds.weights_size())
    data->loadWeights(toVectors(ds.weights()));
  for (const pipefill::rt::InFlightBatch &b : ds.in_flight()) {
    Flight f;
    f.next = b.next_layer();
    f.batch = b.batch();
    f.data = data->loadBatch(toVectors(b.tensors()), b.batch());
    flights[b.sample_begin()] = std::move(f);
  }
  for (const pipefill::rt::DeferredChunk &dc : ds.deferred()) {
    WorkItem w;
    w.sampleBegin = dc.sample_begin();
    w.batch = dc.batch();
    w.passBegin = dc.layer_begin();
    w.passEnd = dc.layer_end();
    w.plannedUs = dc.planned_us();
    w.weightsStreamed = dc.weights_streamed();
    w.activationsHost = dc.activations_on_host();
    w.peakBytes = dc.peak_bytes();
    const std::string bad = deferredChunkProblem(dc, passes);
    if (!bad.empty())
      return "has " + bad;
    backlog.push_back(w);
  }
  return "";
}

} // namespace pfrt
