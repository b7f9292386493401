// libFuzzer target: JobSpec text through the front end (parse, limits, rules, model expansion),
// then, for small accepted pipelines, schedule expansion, simulation and bubble extraction.
#include "algo/jobspec/JobSpecReader.h"
#include "algo/schedule/Schedule.h"

#include <cstddef>
#include <cstdint>

using namespace pipefill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  jobspec::JobSource job;
  Diagnostics diags;
  std::string text(reinterpret_cast<const char *>(data), size);
  if (!jobspec::readJobSpec("fuzz.pbtxt", text, job, diags) ||
      !jobspec::checkCompileJob(job, diags))
    return 0;
  const JobSpec &spec = job.spec;
  const Pipeline &pipe = spec.pipeline();
  int v = pipe.has_virtual_stages() ? pipe.virtual_stages() : 1;
  if (int64_t(pipe.stages()) * pipe.microbatches() * v > 4096)
    return 0; // large pipelines are benchmarked, not fuzzed
  sched::PipelineSpec ps;
  ps.stages = pipe.stages();
  ps.microbatches = pipe.microbatches();
  ps.virtualStages = v;
  switch (pipe.schedule()) {
  case GPIPE: ps.schedule = sched::ScheduleKind::GPipe; break;
  case INTERLEAVED_1F1B: ps.schedule = sched::ScheduleKind::Interleaved1F1B; break;
  case ZB_H1: ps.schedule = sched::ScheduleKind::ZBH1; break;
  default: ps.schedule = sched::ScheduleKind::OneFOneB; break;
  }
  for (int s = 0; s < ps.stages; ++s) {
    const StageCost &c = spec.stage(spec.stage_size() == 1 ? 0 : s);
    sched::StageCost sc;
    sc.forwardUs = c.forward_us();
    sc.backwardUs = c.backward_us();
    sc.backwardWeightUs = c.backward_weight_us();
    sc.activationBytes = c.activation_bytes();
    sc.stashBytes = c.stash_bytes();
    sc.staticBytes = c.static_bytes();
    ps.costs.push_back(sc);
  }
  ps.p2pLatencyUs = spec.hardware().p2p_latency_us();
  ps.p2pBandwidthGBps = spec.hardware().p2p_bandwidth_gbps();
  std::string error;
  if (!sched::validateSpec(ps, error))
    return 0;
  sched::Schedule schedule;
  if (!sched::expandSchedule(ps, schedule, error))
    return 0;
  sched::SimResult result;
  if (!sched::simulate(ps, schedule, result, error))
    return 0;
  sched::findBubbles(ps, schedule, result, spec.hardware().gpu_memory_bytes(), 50, 0);
  return 0;
}
