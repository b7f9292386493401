//===- SimDriver.cpp - pipefill-sim: options and the run ------------------===//
#include "algo/cluster/SimDriver.h"

#include "algo/cluster/Analysis.h"
#include "algo/cluster/Report.h"
#include "algo/cost/ModelProto.h"
#include "algo/cost/ModelZoo.h"
#include "algo/jobspec/JobSpecReader.h"
#include "support/Files.h"
#include "proto/pipefill.pb.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace pb = google::protobuf;

namespace pipefill::cluster {

const char *kSimUsage = R"(pipefill-sim: cluster-scale PipeFill simulation

usage:
  pipefill-sim JOB.pbtxt --trace TRACE.csv [options]   replay a fill-job queue
  pipefill-sim JOB.pbtxt [options]                      per-stage fill rates only
  pipefill-sim --study JOB.pbtxt [options]              the scale study
  pipefill-sim --gen-trace OUT.csv [JOB.pbtxt] [options] write a synthetic trace
  pipefill-sim --list-models                            fill-model zoo, GPU presets

JOB.pbtxt (or --model-config FILE) is a JobSpec (proto/pipefill.proto) with
a `model { ... }` block; its pipeline.schedule and virtual_stages, planner { }
and hardware { } fields are used, and its fill_job entries can be named in
traces next to the zoo models.

main job:
  --gpus N                 total GPUs; dp = N / (tp x pp) (default: model.dp)
                           (study: a list, default 1024,2048,4096,8192)
  --schedule S             gpipe | 1f1b | interleaved_1f1b | zb_h1
                           (default: the JobSpec's pipeline.schedule)
  --schedules S,S          study: schedules to compare (default gpipe,1f1b)
  --recompute MODE         auto | on | off (default auto: recompute only
                           when the main job would not fit in memory)
fill jobs:
  --trace FILE             CSV: arrival_s,model,samples,priority
  --policy P               fifo | sjf | efficiency | all (default all)
  --gpus-per-job G         GPUs one fill job occupies, all of one stage
                           (default: tp, i.e. the TP ranks of one stage of
                           one replica)
  --horizon-s S            window for utilization (default: last arrival)
  --aging-s S              efficiency policy: serve jobs waiting this long
                           first (default 14400)
  --tolerance T            efficiency policy: pairs within T of the best
                           score are ties, served oldest first (default 0.02)
  --models A,B             models to plan without a trace (default: all)
  --fill-efficiency E      fill kernels' fraction of peak (default: the
                           main job's efficiency)
output:
  --json FILE              JSON report ("-" for stdout)
  --svg FILE               SVG chart
  --markdown FILE          study: markdown table
  --per-job                include every job's outcome in the JSON
  --quiet                  no terminal summary
trace generation (--gen-trace):
  --jobs N (1000)  --rate JOBS_PER_HOUR (60)  --seed S (1)
  --median-gpu-s X (1800)  --sigma Y (1.0)  --high-priority-fraction F (0.1)
  --gpu PRESET (A100-80GB, or the JobSpec's)
  --models A,B  --weights W,W
)";

namespace {

int fail(const std::string &message) {
  std::cerr << "pipefill-sim: error: " << message << "\n";
  return 1;
}

std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      cur += c;
    }
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

bool toDouble(const std::string &s, double &v) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno == 0 && std::isfinite(v);
}

bool toInt(const std::string &s, long long &v) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return end == s.c_str() + s.size() && errno == 0;
}

} // namespace

namespace {

/// One argument of the command line: its name, an inline value (--x=v) and
/// the arguments after it; the need* readers set `error` when they fail.
class SimArgCursor {
public:
  SimArgCursor(const std::vector<std::string> &args, size_t &i,
               std::string &error)
      : args(args), i(i), error(error), a(args[i]) {
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        hasInline = true;
      }
    }
  }

  const std::string &name() const { return a; }

  bool need(std::string &out) {
    if (hasInline) {
      out = value;
      return true;
    }
    if (i + 1 >= args.size()) {
      error = a + " needs a value";
      return false;
    }
    out = args[++i];
    return true;
  }
  bool needDouble(double &out, bool positive) {
    std::string v;
    if (!need(v))
      return false;
    if (!toDouble(v, out) || (positive ? !(out > 0) : out < 0)) {
      error = a + " needs a " + (positive ? "positive" : "non-negative") +
              " number (got '" + v + "')";
      return false;
    }
    return true;
  }
  bool needInt(long long &out, long long min) {
    std::string v;
    if (!need(v))
      return false;
    if (!toInt(v, out) || out < min) {
      error = a + " needs an integer >= " + std::to_string(min) + " (got '" +
              v + "')";
      return false;
    }
    return true;
  }
  /// Sets the error and returns false.
  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }

private:
  const std::vector<std::string> &args;
  size_t &i;
  std::string &error;
  std::string a, value;
  bool hasInline = false;
};

/// The result of a parse*Option group: handled, failed (error set), or not
/// an option of the group.
enum class Parsed { Ok, Error, NotMine };

Parsed result(bool ok) { return ok ? Parsed::Ok : Parsed::Error; }

/// Modes, the job file and the main job.
Parsed parseMainOption(SimArgCursor &c, SimArgs &o) {
  const std::string &a = c.name();
  std::string v;
  long long n = 0;
  if (a == "--help" || a == "-h") {
    o.help = true;
  } else if (a == "--study") {
    o.study = true;
  } else if (a == "--list-models") {
    o.listModels = true;
  } else if (a == "--gen-trace") {
    return result(c.need(o.genTrace));
  } else if (a == "--model-config" || a == "--job") {
    return result(c.need(o.job));
  } else if (a == "--gpus") {
    if (!c.need(v))
      return Parsed::Error;
    o.gpus.clear();
    for (const std::string &item : splitList(v)) {
      if (!toInt(item, n) || n < 1 || n > (1 << 24))
        return result(c.fail("--gpus needs positive integers (got '" + item + "')"));
      o.gpus.push_back(int(n));
    }
    if (o.gpus.empty())
      return result(c.fail("--gpus needs at least one GPU count"));
  } else if (a == "--schedule") {
    return result(c.need(o.schedule));
  } else if (a == "--schedules") {
    if (!c.need(v))
      return Parsed::Error;
    o.schedules = splitList(v);
  } else if (a == "--recompute") {
    return result(c.need(o.recompute));
  } else {
    return Parsed::NotMine;
  }
  return Parsed::Ok;
}

/// Fill jobs: the trace, the policy and its knobs.
Parsed parseFillOption(SimArgCursor &c, SimArgs &o) {
  const std::string &a = c.name();
  std::string v;
  long long n = 0;
  if (a == "--trace") {
    return result(c.need(o.trace));
  } else if (a == "--policy") {
    return result((o.policyGiven = true) && c.need(o.policy));
  } else if (a == "--gpus-per-job") {
    if (!c.needInt(n, 1))
      return Parsed::Error;
    if (n > (1 << 24)) // more GPUs than any cluster the simulator models: an error, not a clamp
      return result(c.fail("--gpus-per-job must be at most 16777216 (got " + std::to_string(n) +
                           ")"));
    o.gpusPerJob = int(n);
  } else if (a == "--horizon-s") {
    return result(c.needDouble(o.horizonS, true));
  } else if (a == "--aging-s") {
    return result(c.needDouble(o.agingS, true));
  } else if (a == "--tolerance") {
    if (!c.needDouble(o.tolerance, false))
      return Parsed::Error;
    if (o.tolerance >= 1)
      return result(c.fail("--tolerance must be in [0, 1)"));
  } else if (a == "--models") {
    if (!c.need(v))
      return Parsed::Error;
    o.models = splitList(v);
  } else if (a == "--fill-efficiency") {
    if (!c.needDouble(o.fillEfficiency, true))
      return Parsed::Error;
    if (o.fillEfficiency > 1)
      return result(c.fail("--fill-efficiency must be in (0, 1]"));
  } else {
    return Parsed::NotMine;
  }
  return Parsed::Ok;
}

/// Output files and the terminal summary.
Parsed parseOutputOption(SimArgCursor &c, SimArgs &o) {
  const std::string &a = c.name();
  if (a == "--json")
    return result(c.need(o.json));
  if (a == "--svg")
    return result(c.need(o.svg));
  if (a == "--markdown")
    return result(c.need(o.markdown));
  if (a == "--per-job") {
    o.perJob = true;
    return Parsed::Ok;
  }
  if (a == "--quiet" || a == "-q") {
    o.quiet = true;
    return Parsed::Ok;
  }
  return Parsed::NotMine;
}

/// Trace generation (--gen-trace).
Parsed parseGenOption(SimArgCursor &c, SimArgs &o) {
  const std::string &a = c.name();
  std::string v;
  long long n = 0;
  if (a == "--jobs") {
    if (!c.needInt(n, 0))
      return Parsed::Error;
    if (n > kMaxGeneratedJobs)
      return result(c.fail("--jobs must be at most " + std::to_string(kMaxGeneratedJobs) +
                           " (got " + std::to_string(n) + ")"));
    o.gen.jobs = int(n);
  } else if (a == "--rate") {
    return result(c.needDouble(o.gen.jobsPerHour, true));
  } else if (a == "--seed") {
    if (!c.needInt(n, 0))
      return Parsed::Error;
    o.gen.seed = uint64_t(n);
  } else if (a == "--median-gpu-s") {
    return result(c.needDouble(o.gen.medianGpuSeconds, true));
  } else if (a == "--sigma") {
    return result(c.needDouble(o.gen.sigma, false));
  } else if (a == "--high-priority-fraction") {
    if (!c.needDouble(o.gen.highPriorityFraction, false))
      return Parsed::Error;
    if (o.gen.highPriorityFraction > 1)
      return result(c.fail("--high-priority-fraction must be in [0, 1]"));
  } else if (a == "--gpu") {
    return result(c.need(o.gpu));
  } else if (a == "--weights") {
    if (!c.need(v))
      return Parsed::Error;
    for (const std::string &item : splitList(v)) {
      double w = 0;
      if (!toDouble(item, w) || w < 0)
        return result(c.fail("--weights needs non-negative numbers (got '" + item + "')"));
      o.weights.push_back(w);
    }
  } else {
    return Parsed::NotMine;
  }
  return Parsed::Ok;
}

} // namespace

namespace {

/// Refuses outputs that name an input (the JobSpec, the --trace read) or each other: the file
/// would be overwritten with exit 0 (pipefill::overlappingFiles). And options that would do
/// nothing: --markdown without the study, a replay's options without a trace, outputs of
/// --list-models.
bool checkSimOptions(const SimArgs &o, std::string &error) {
  error = overlappingFiles({{"--json", o.json},
                            {"--svg", o.svg},
                            {"--markdown", o.markdown},
                            {"--gen-trace", o.genTrace}},
                           {{"the job file", o.job}, {"--trace", o.trace}});
  if (!error.empty())
    return false;
  if (!o.markdown.empty() && !o.study) {
    error = "--markdown writes the study's table: it needs --study";
    return false;
  }
  // Options of a trace replay without a trace did nothing, with exit 0 (an SVG of empty charts).
  if (!o.study && o.trace.empty() && o.genTrace.empty() && !o.listModels) {
    const char *needsTrace = o.perJob        ? "--per-job"
                             : o.policyGiven ? "--policy"
                             : !o.svg.empty() ? "--svg"
                                              : nullptr;
    if (needsTrace) {
      error = std::string(needsTrace) + " is for a trace replay: it needs --trace FILE (or --study)";
      return false;
    }
  }
  if (o.listModels && (!o.json.empty() || !o.svg.empty())) {
    error = "--list-models prints the catalog; it writes no --json or --svg";
    return false;
  }
  return true;
}

} // namespace

bool parseSimArgs(int argc, char **argv, SimArgs &o, std::string &error) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    SimArgCursor c(args, i, error);
    Parsed r = Parsed::NotMine;
    for (auto group : {parseMainOption, parseFillOption, parseOutputOption,
                       parseGenOption})
      if (r == Parsed::NotMine)
        r = group(c, o);
    if (r == Parsed::Error)
      return false;
    if (r == Parsed::Ok)
      continue;
    const std::string &a = c.name();
    if (a.rfind("-", 0) == 0 && a.size() > 1) {
      error = "unknown option '" + a + "' (see --help)";
      return false;
    }
    if (!o.job.empty()) {
      error = "more than one job file given ('" + o.job + "' and '" + a + "')";
      return false;
    }
    o.job = a;
  }
  return checkSimOptions(o, error);
}

namespace {

bool writeFile(const std::string &path, const std::string &text) {
  if (path == "-") {
    std::cout << text;
    return bool(std::cout);
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  return bool(out);
}

/// A JobSpec read by the shared front end, with pipefill-sim's view of
/// locations ("FILE:LINE:COL: " of a field, or "FILE: ").
struct LoadedJob {
  jobspec::JobSource src;
  const std::string &path = src.file;
  JobSpec &spec = src.spec;

  std::string where(const std::string &block, const std::string &name,
                    int index = -1, int blockIndex = -1) const {
    SourcePos p;
    if (block.empty()) {
      p = src.top(name, index);
    } else {
      SourcePos blockPos = src.top(block, blockIndex);
      const pb::FieldDescriptor *bf = JobSpec::descriptor()->FindFieldByName(block);
      if (!bf || !bf->message_type())
        return at(blockPos);
      const pb::Reflection *r = spec.GetReflection();
      if (bf->is_repeated() ? std::max(blockIndex, 0) >= r->FieldSize(spec, bf)
                            : !r->HasField(spec, bf))
        return at(blockPos);
      const pb::Message &msg =
          bf->is_repeated() ? r->GetRepeatedMessage(spec, bf, std::max(blockIndex, 0))
                            : r->GetMessage(spec, bf);
      p = fieldPos(msg, src.sub(block, bf->is_repeated() ? std::max(blockIndex, 0) : -1), name,
                   index, blockPos);
    }
    return at(p);
  }
  std::string at(SourcePos p) const {
    return p.known() ? path + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": "
                     : path + ": ";
  }
};

/// Reads the JobSpec through the front end shared with the importer: syntax,
/// limits, hardware, planner and fill-job rules, with the same messages.
bool loadJob(const std::string &path, LoadedJob &job, std::string &error) {
  Diagnostics d;
  bool ok = jobspec::loadJobSpec(path, job.src, d) &&
            jobspec::checkHardware(job.src, /*requireMemory=*/false, d);
  ok = ok && jobspec::checkFillJobs(job.src, d);
  if (!ok)
    error = d.str();
  return ok;
}

fill::Job fillJobFromProto(const FillJob &fj) {
  fill::Job job;
  job.name = fj.name();
  job.kind = fj.kind() == TRAINING ? fill::JobKind::Training
                                   : fill::JobKind::Inference;
  job.samples = fj.samples();
  job.priority = fj.has_priority() ? fj.priority() : 1;
  for (const FillLayer &l : fj.layer()) {
    int repeat = l.has_repeat() ? l.repeat() : 1;
    for (int r = 0; r < repeat; ++r) {
      fill::Layer layer;
      layer.name = repeat > 1 ? l.name() + "." + std::to_string(r) : l.name();
      layer.forwardUsPerSample = l.forward_us_per_sample();
      layer.weightBytes = l.weight_bytes();
      layer.activationBytesPerSample = l.activation_bytes_per_sample();
      layer.backwardUsPerSample = l.backward_us_per_sample();
      layer.gradBytes = l.grad_bytes();
      layer.optimizerBytes = l.optimizer_bytes();
      job.layers.push_back(layer);
    }
  }
  return job;
}

std::string lower(std::string s) {
  for (char &c : s)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The setup of the main job from the JobSpec (+ command-line overrides).
bool buildSetup(const LoadedJob &lj, const SimArgs &o, PipelineSetup &setup,
                std::string &error) {
  const JobSpec &spec = lj.spec;
  if (!spec.has_model()) {
    error = lj.path +
            ": error: pipefill-sim needs a 'model { layers hidden heads "
            "seq_length vocab tp pp global_batch ... }' block with the main "
            "job's dimensions";
    return false;
  }
  if (spec.stage_size() > 0) {
    error = lj.where("", "stage", 0) +
            "error: 'stage' entries must be absent when a 'model' block "
            "gives the dimensions (the cost model derives the stage costs)";
    return false;
  }
  std::string field;
  if (!cost::configFromProto(spec.model(), setup.model, error, &field)) {
    std::string where = field.empty() ? lj.where("", "model")
                                      : lj.where("model", field);
    error = where + "error: " + error;
    return false;
  }
  // Schedule: command line, else the JobSpec, else 1F1B.
  setup.schedule = sched::ScheduleKind::OneFOneB;
  if (!o.schedule.empty()) {
    if (!sched::parseScheduleKind(o.schedule, setup.schedule)) {
      error = "pipefill-sim: error: unknown schedule '" + o.schedule +
              "'; expected gpipe, 1f1b, interleaved_1f1b or zb_h1";
      return false;
    }
  } else if (spec.pipeline().schedule() != SCHEDULE_UNSPECIFIED) {
    sched::parseScheduleKind(Schedule_Name(spec.pipeline().schedule()),
                             setup.schedule);
  }
  // Chunks per device for the interleaved schedule (default 2); the other
  // schedules ignore it.
  setup.virtualStages = spec.pipeline().has_virtual_stages()
                            ? spec.pipeline().virtual_stages()
                            : 2;
  if (!parseRecompute(o.recompute, setup.recompute)) {
    error = "pipefill-sim: error: --recompute must be auto, on or off (got '" +
            o.recompute + "')";
    return false;
  }
  // pipeline.stages / microbatches, when given, must agree with the model.
  const Pipeline &p = spec.pipeline();
  if (p.has_stages() && p.stages() != setup.model.pp) {
    error = lj.where("pipeline", "stages") + "error: pipeline.stages (" +
            std::to_string(p.stages()) + ") disagrees with model.pp (" +
            std::to_string(setup.model.pp) + ")";
    return false;
  }
  if (p.has_microbatches() && o.gpus.empty()) {
    int m = 0;
    std::string e;
    if (cost::microbatchCount(setup.model, m, e) && m != p.microbatches()) {
      error = lj.where("pipeline", "microbatches") +
              "error: pipeline.microbatches (" +
              std::to_string(p.microbatches()) +
              ") disagrees with model.global_batch / (dp x micro_batch_size) "
              "= " +
              std::to_string(m);
      return false;
    }
  }
  // Planner options.
  const Planner &pl = spec.planner();
  if (pl.has_min_bubble_us())
    setup.planner.minBubbleUs = pl.min_bubble_us();
  if (pl.has_reserve_bytes())
    setup.planner.reserveBytes = pl.reserve_bytes();
  if (pl.has_context_switch_us())
    setup.planner.fill.contextSwitchUs = pl.context_switch_us();
  if (pl.has_safety_margin())
    setup.planner.fill.safetyMargin = pl.safety_margin();
  if (pl.batch_sizes_size() > 0)
    setup.planner.fill.batchSizes.assign(pl.batch_sizes().begin(),
                                         pl.batch_sizes().end());
  // Hardware overrides.
  const Hardware &hw = spec.hardware();
  HardwareOverrides &ho = setup.hardware;
  if (hw.has_gpu_memory_bytes()) {
    ho.gpuMemoryBytes = hw.gpu_memory_bytes();
  }
  if (hw.has_pcie_bandwidth_gbps())
    ho.pcieGBps = hw.pcie_bandwidth_gbps();
  if (hw.has_hbm_bandwidth_gbps()) {
    ho.hbmGBps = hw.hbm_bandwidth_gbps();
  }
  if (hw.has_kernel_launch_us())
    ho.kernelLaunchUs = hw.kernel_launch_us();
  if (hw.has_p2p_latency_us())
    ho.p2pLatencyUs = hw.p2p_latency_us();
  if (hw.has_p2p_bandwidth_gbps())
    ho.p2pBandwidthGBps = hw.p2p_bandwidth_gbps();
  return true;
}

/// The models traces may name: the JobSpec's fill jobs, then the zoo.
struct ModelCatalog {
  std::map<std::string, fill::Job> jobSpecJobs; ///< lower-case name -> job
  cost::ZooOptions zoo;

  std::string resolve(const std::string &name) const {
    auto it = jobSpecJobs.find(lower(name));
    if (it != jobSpecJobs.end())
      return it->second.name;
    return cost::canonicalZooName(name);
  }
  std::string known() const {
    std::string k;
    for (const auto &kv : jobSpecJobs)
      k += kv.second.name + ", ";
    return k + cost::zooNames();
  }
  bool get(const std::string &canonical, fill::Job &out,
           std::string &error) const {
    auto it = jobSpecJobs.find(lower(canonical));
    if (it != jobSpecJobs.end()) {
      out = it->second;
      return true;
    }
    return cost::zooJob(canonical, zoo, out, error);
  }
  ModelResolver resolver() const {
    return {[this](const std::string &n) { return resolve(n); }, known()};
  }
};

void buildCatalog(const JobSpec *spec, double peakTflops, double efficiency,
                  ModelCatalog &cat) {
  cat.zoo.peakTflops = peakTflops;
  cat.zoo.efficiency = efficiency;
  if (spec)
    for (const FillJob &fj : spec->fill_job())
      cat.jobSpecJobs[lower(fj.name())] = fillJobFromProto(fj);
}

bool modelsFromNames(const ModelCatalog &cat,
                     const std::vector<std::string> &names,
                     std::vector<fill::Job> &out, std::string &error) {
  std::set<std::string> seen;
  for (const std::string &n : names) {
    std::string canonical = cat.resolve(n);
    if (canonical.empty()) {
      error = "pipefill-sim: error: unknown model '" + n +
              "'; known models: " + cat.known();
      return false;
    }
    if (!seen.insert(canonical).second)
      continue;
    fill::Job job;
    if (!cat.get(canonical, job, error))
      return false;
    out.push_back(job);
  }
  return true;
}

std::vector<std::string> allModelNames(const ModelCatalog &cat) {
  std::vector<std::string> names;
  for (const auto &kv : cat.jobSpecJobs)
    names.push_back(kv.second.name);
  for (const cost::ZooEntry &e : cost::zooEntries())
    names.push_back(e.name);
  return names;
}

} // namespace

int simListModels() {
  std::cout << "fill-model zoo (names are case-insensitive):\n";
  for (const cost::ZooEntry &e : cost::zooEntries()) {
    fill::Job job;
    std::string error;
    cost::zooJob(e.name, cost::ZooOptions(), job, error);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f ms/sample on A100",
                  fill::usefulUsPerSample(job) / 1e3);
    std::cout << "  " << e.name << std::string(18 - std::min<size_t>(17, e.name.size()), ' ')
              << (e.kind == fill::JobKind::Training ? "training " : "inference")
              << "  " << e.description << " (" << buf << ")\n";
  }
  std::cout << "\nGPU presets:\n";
  for (const cost::GpuPreset &p : cost::gpuPresets()) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  %-10s %5.0f TFLOP/s bf16, %4.0f GB/s HBM, %s, PCIe %g "
                  "GB/s, IB %g GB/s, efficiency %.0f%%",
                  p.name.c_str(), p.peakTflops, p.hbmGBps,
                  fill::formatBytes(p.memoryBytes).c_str(), p.pcieGBps,
                  p.interNodeGBps, 100 * p.defaultEfficiency);
    std::cout << buf << "\n";
  }
  return 0;
}

namespace {

bool writeOutputs(const SimArgs &o, const std::string &json,
                  const std::string &svg, const std::string &markdown,
                  std::string &error) {
  if (!o.json.empty() && !writeFile(o.json, json)) {
    error = o.json + ": error: cannot write the JSON report";
    return false;
  }
  if (!o.svg.empty() && !writeFile(o.svg, svg)) {
    error = o.svg + ": error: cannot write the SVG chart";
    return false;
  }
  if (!o.markdown.empty() && !writeFile(o.markdown, markdown)) {
    error = o.markdown + ": error: cannot write the markdown table";
    return false;
  }
  return true;
}

/// True when a report goes to stdout (then the terminal table is left out).
bool toStdout(const SimArgs &o) {
  return o.json == "-" || o.svg == "-" || o.markdown == "-";
}

} // namespace

int simGenTrace(const SimArgs &o) {
  std::string error;
  LoadedJob lj;
  cost::GpuPreset preset;
  std::string gpu = o.gpu.empty() ? "A100-80GB" : o.gpu;
  double efficiency = 0;
  if (!o.job.empty()) {
    if (!loadJob(o.job, lj, error)) {
      std::cerr << error << "\n";
      return 1;
    }
    if (o.gpu.empty() && lj.spec.model().has_gpu())
      gpu = lj.spec.model().gpu();
    if (lj.spec.model().has_efficiency())
      efficiency = lj.spec.model().efficiency();
  }
  if (!cost::findGpuPreset(gpu, preset, error))
    return fail(error);
  if (!efficiency)
    efficiency = preset.defaultEfficiency;
  if (o.fillEfficiency > 0)
    efficiency = o.fillEfficiency;
  ModelCatalog cat;
  buildCatalog(o.job.empty() ? nullptr : &lj.spec, preset.peakTflops,
               efficiency, cat);
  std::vector<std::string> names =
      o.models.empty() ? allModelNames(cat) : o.models;
  std::vector<fill::Job> jobs;
  if (!modelsFromNames(cat, names, jobs, error)) {
    std::cerr << error << "\n";
    return 1;
  }
  std::vector<std::string> modelNames;
  std::vector<double> useful;
  for (const fill::Job &j : jobs) {
    modelNames.push_back(j.name);
    useful.push_back(fill::usefulUsPerSample(j) * 1e-6);
  }
  TraceGenOptions gen = o.gen;
  gen.weights = o.weights;
  std::vector<TraceJob> trace;
  if (!generateTrace(gen, modelNames, useful, trace, error))
    return fail(error);
  char header[512];
  std::snprintf(header, sizeof header,
                "# synthetic fill-job trace: %d jobs, Poisson arrivals at "
                "%g jobs/hour, log-normal work (median %g GPU-s dedicated on "
                "%s at %.0f%% of peak, sigma %g), seed %llu\n",
                gen.jobs, gen.jobsPerHour, gen.medianGpuSeconds,
                preset.name.c_str(), 100 * efficiency, gen.sigma,
                static_cast<unsigned long long>(gen.seed));
  std::ostringstream cmd;
  cmd << "# regenerate: pipefill-sim --gen-trace OUT.csv"
      << (o.job.empty() ? " --gpu " + preset.name : " " + o.job)
      << " --jobs " << gen.jobs << " --rate " << gen.jobsPerHour << " --seed "
      << gen.seed << " --median-gpu-s " << gen.medianGpuSeconds
      << " --sigma " << gen.sigma << " --high-priority-fraction "
      << gen.highPriorityFraction;
  if (!o.models.empty()) {
    cmd << " --models ";
    for (size_t i = 0; i < o.models.size(); ++i)
      cmd << (i ? "," : "") << o.models[i];
  }
  if (!o.weights.empty()) {
    cmd << " --weights ";
    for (size_t i = 0; i < o.weights.size(); ++i)
      cmd << (i ? "," : "") << o.weights[i];
  }
  if (o.fillEfficiency > 0)
    cmd << " --fill-efficiency " << o.fillEfficiency;
  cmd << "\n";
  if (!writeFile(o.genTrace, header + cmd.str() + formatTrace(trace)))
    return fail("cannot write " + o.genTrace);
  if (!o.quiet && o.genTrace != "-")
    std::cout << "wrote " << trace.size() << " jobs to " << o.genTrace
              << "\n";
  return 0;
}

namespace {

/// What a run or study reads before it starts: the job and its pipeline, the
/// trace, the models to plan and the queue policies.
struct SimInputs {
  LoadedJob lj;
  PipelineSetup setup;
  std::vector<TraceJob> trace;
  bool haveTrace = false;
  std::vector<fill::Job> models;
  std::vector<Policy> policies;
};

/// The models to plan: --models plus every model of the trace, else the
/// trace's, else all of the catalog.
std::vector<std::string> modelsToPlan(const SimArgs &o, const ModelCatalog &cat,
                                      const SimInputs &in) {
  std::vector<std::string> names = o.models;
  if (names.empty()) {
    if (in.haveTrace) {
      for (const TraceJob &t : in.trace)
        if (std::find(names.begin(), names.end(), t.model) == names.end())
          names.push_back(t.model);
    }
    if (names.empty())
      names = allModelNames(cat);
  } else if (in.haveTrace) {
    // Every model of the trace must be planned.
    for (const TraceJob &t : in.trace)
      if (std::find_if(names.begin(), names.end(), [&](const std::string &n) {
            return cat.resolve(n) == t.model;
          }) == names.end())
        names.push_back(t.model);
  }
  return names;
}

/// Reads the job, trace, models and policies; kSimContinue or the exit code
/// (the error printed).
constexpr int kSimContinue = -1;
int loadSimInputs(const SimArgs &o, SimInputs &in) {
  std::string error;
  if (!loadJob(o.job, in.lj, error) || !buildSetup(in.lj, o, in.setup, error)) {
    std::cerr << error << "\n";
    return 1;
  }
  cost::GpuPreset preset;
  cost::findGpuPreset(in.setup.model.gpu, preset, error);
  double efficiency =
      in.setup.model.efficiency > 0 ? in.setup.model.efficiency
                                    : preset.defaultEfficiency;
  ModelCatalog cat;
  buildCatalog(&in.lj.spec, preset.peakTflops,
               o.fillEfficiency > 0 ? o.fillEfficiency : efficiency, cat);
  in.haveTrace = !o.trace.empty();
  if ((in.haveTrace &&
       !readTraceFile(o.trace, cat.resolver(), in.trace, error)) ||
      !modelsFromNames(cat, modelsToPlan(o, cat, in), in.models, error)) {
    std::cerr << error << "\n";
    return 1;
  }
  if (lower(o.policy) == "all") {
    in.policies = allPolicies();
    return kSimContinue;
  }
  for (const std::string &p : splitList(o.policy)) {
    Policy pol;
    if (lower(p) == "all")
      return fail("--policy all runs every policy; it does not go in a list ('" + o.policy +
                  "')");
    if (!parsePolicy(p, pol))
      return fail("unknown policy '" + p +
                  "'; expected fifo, sjf, efficiency or all");
    in.policies.push_back(pol);
  }
  return kSimContinue;
}

/// --study: the scale study over GPU counts and schedules.
int runStudyMode(const SimArgs &o, SimInputs &in) {
  auto started = std::chrono::steady_clock::now();
  std::string error;
  StudyOptions so;
  if (!o.gpus.empty())
    so.gpus = o.gpus;
  if (!o.schedules.empty()) {
    so.schedules.clear();
    for (const std::string &s : o.schedules) {
      sched::ScheduleKind k;
      if (!sched::parseScheduleKind(s, k))
        return fail("unknown schedule '" + s +
                    "'; expected gpipe, 1f1b, interleaved_1f1b or zb_h1");
      so.schedules.push_back(k);
    }
  } else if (!o.schedule.empty()) {
    so.schedules = {in.setup.schedule};
  }
  so.trace = in.haveTrace ? &in.trace : nullptr;
  so.policies = in.policies;
  so.gpusPerJob = o.gpusPerJob;
  so.horizonS = o.horizonS;
  so.agingS = o.agingS;
  so.efficiencyTolerance = o.tolerance;
  std::vector<StudyPoint> points;
  if (!runStudy(in.setup, in.models, so, points, error))
    return fail(error);
  StudyReport rep;
  rep.name = in.lj.spec.name().empty() ? "job" : in.lj.spec.name();
  rep.base = &in.setup;
  for (const fill::Job &m : in.models)
    rep.models.push_back(m.name);
  rep.points = &points;
  if (!writeOutputs(o, studyJson(rep), studySvg(rep), studyMarkdown(rep),
                    error))
    return fail(error);
  if (!o.quiet && !toStdout(o)) {
    std::cout << studyTable(rep);
    double s = std::chrono::duration<double>(
                   std::chrono::steady_clock::now() - started)
                   .count();
    std::fprintf(stderr, "%zu points in %.2f s\n", points.size(), s);
  }
  bool anyOk = false;
  for (const StudyPoint &p : points)
    anyOk |= p.ok;
  if (!anyOk)
    return fail("no point of the study could run");
  return 0;
}

/// One cluster size: per-stage fill rates and, with a trace, the queue
/// replayed under every policy.
int runOneSize(const SimArgs &o, SimInputs &in) {
  std::string error;
  PipelineSetup &setup = in.setup;
  if (!o.gpus.empty()) {
    if (o.gpus.size() != 1)
      return fail("--gpus takes one count outside --study");
    int perReplica = setup.model.tp * setup.model.pp;
    if (o.gpus[0] % perReplica != 0)
      return fail(std::to_string(o.gpus[0]) +
                  " GPUs is not a multiple of tp x pp = " +
                  std::to_string(perReplica));
    setup.model.dp = o.gpus[0] / perReplica;
  }
  PipelineAnalysis analysis;
  if (!analyzePipeline(setup, in.models, analysis, error)) {
    std::cerr << in.lj.where("", "model") << "error: " << error << "\n";
    return 1;
  }
  RunReport rep;
  rep.name = in.lj.spec.name().empty() ? "job" : in.lj.spec.name();
  rep.traceFile = o.trace;
  rep.analysis = &analysis;
  rep.trace = in.haveTrace ? &in.trace : nullptr;
  rep.perJob = o.perJob;
  if (in.haveTrace) {
    ClusterModel cm = clusterModelFrom(analysis);
    for (Policy p : in.policies) {
      SimOptions so;
      so.policy = p;
      so.gpusPerJob = o.gpusPerJob > 0 ? o.gpusPerJob : setup.model.tp;
      so.horizonS = o.horizonS;
      so.agingS = o.agingS;
      so.efficiencyTolerance = o.tolerance;
      PolicyResult r;
      if (!simulateQueue(cm, in.trace, so, r, error))
        return fail(error);
      rep.policies.push_back(std::move(r));
    }
  }
  if (!writeOutputs(o, runJson(rep), runSvg(rep), "", error))
    return fail(error);
  if (!o.quiet && !toStdout(o))
    std::cout << runTable(rep);
  return 0;
}

} // namespace

int simRun(const SimArgs &o) {
  if (o.job.empty())
    return fail("no job file given (see --help)");
  SimInputs in;
  if (int rc = loadSimInputs(o, in); rc != kSimContinue)
    return rc;
  return o.study ? runStudyMode(o, in) : runOneSize(o, in);
}

} // namespace pipefill::cluster
