#include "runtime/FillQueue.h"

#include <algorithm>

namespace pfrt {

FillQueue::Own FillQueue::ownWork(const pfrt_fill_chunk_desc &f, int64_t iteration,
                                  const FillJob &job, uint64_t stride, WorkItem &own) const {
  int64_t logical = 0;
  if (!chunkRunsIn(f, iteration, &logical))
    return Own::NotThisIteration;
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
    bool known = flights.count(sb) != 0;
    for (const WorkItem &w : backlog)
      known = known || w.sampleBegin == sb;
    if (!known)
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

FillQueue::Ran FillQueue::run(StreamCtx &ctx, Backend &backend, Flight &flight, uint32_t job,
                              const JobShape &shape, uint32_t passes, const WorkItem &item,
                              const RunConfig &config, double deadlineUs, double predictedUs,
                              bool timed) {
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
  Ran ran;
  ran.batch = flight.batch;
  if (timed)
    ran.startUs = backend.streamNowUs(ctx);
  data->run(ctx, flight.data, ex);
  if (timed) {
    ran.endUs = backend.streamNowUs(ctx);
    backend.lastWorkSpan(ctx, ran.startUs, ran.endUs);
    predictor.add(item.passBegin, item.passEnd, item.batch, item.plannedUs,
                  (ran.endUs - ran.startUs) / config.timeScale);
  }
  flight.next = item.passEnd;
  if (ex.completes) {
    ran.completed = true;
    flights.erase(item.sampleBegin); // `flight` is gone
  }
  return ran;
}

} // namespace pfrt
