#include "runtime/Executor.h"

#include "runtime/FillPredictor.h"
#include "runtime/CheckpointFile.h"

#include "runtime/ProgramIO.h"
#include "runtime/Workload.h"
#include "proto/stream_program.pb.h"

#include <algorithm>
#include <cmath>
#include <climits>
#include <deque>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace pfrt {

double hostNowUs() {
  using namespace std::chrono;
  static const steady_clock::time_point epoch = steady_clock::now();
  return duration<double, std::micro>(steady_clock::now() - epoch).count();
}

namespace {
// Default fill-workload dimension cap of the host backend (2 cores shared by every stream).
constexpr uint32_t kHostDefaultMaxDim = 128;

// Thrown inside a stream thread to unwind it after another thread failed.
struct AbortRun {};
} // namespace

struct Executor::EventState {
  std::mutex m;
  std::condition_variable cv;
  int64_t recorded = 0;  // generations recorded (record of iteration i makes it i + 1)
  int64_t waitsDone = 0; // waits enqueued, all generations
  uint32_t waiters = 0;  // wait ops per iteration
};

// Publishes a send's message through the transport (now or later, from a backend callback).
class Executor::ChannelPublisher : public Publisher {
public:
  ChannelPublisher(Transport &transport, const ChannelKey &key, int64_t gen)
      : transport_(transport), key_(key), gen_(gen) {}
  void publish(const Message &message) override { transport_.publish(key_, gen_, message); }
  std::unique_ptr<Publisher> clone() const override {
    return std::make_unique<ChannelPublisher>(transport_, key_, gen_);
  }

private:
  Transport &transport_;
  ChannelKey key_;
  int64_t gen_;
};

struct Executor::JobRun {
  JobShape shape;
  uint64_t baseSamples = 0, baseSteps = 0;
  double baseChecksum = 0, baseLoss = 0;
  std::atomic<uint64_t> samplesThisRun{0}, stepsThisRun{0}, chunksRun{0}, chunksSkipped{0};
  std::atomic<uint64_t> chunksDeferred{0}, chunksSplit{0}, chunksStoppedOnDevice{0};
  std::map<uint32_t, FillQueue> devices;
  // Per device: the room of the bubbles the job's slots took there (real us from when its fill
  // stream took the bubble to the deadline): the largest in the last loop iteration it took one
  // in, us[0], and in the one before, us[1] (the plan's longest bubble of its slots until then).
  // A queued chunk predicted longer fits none of the job's bubbles as things stand: runFill passes
  // over it (docs/runtime.md §4b). A job's chunks on a device are on one stream
  // (Validator::checkFillChunk), so only that stream's thread touches its entry, as with `devices`.
  struct Rooms {
    double us[2] = {0, 0};
    int64_t iteration = INT64_MIN; // of us[0]
    void took(int64_t it, double roomUs) {
      if (it != iteration) {
        if (iteration != INT64_MIN)
          us[1] = us[0];
        us[0] = 0;
        iteration = it;
      }
      us[0] = std::max(us[0], roomUs);
    }
    double longest() const { return std::max(us[0], us[1]); }
  };
  std::map<uint32_t, Rooms> rooms;
};

// When each bubble of a device began and ended on its main stream (host clock), per iteration.
// A bubble's edges on the main stream: host-clock times, or edge tokens (CUDA) that the fill
// side resolves once the GPU has passed them (Backend::markEdge / edgeTimeUs).
struct Executor::BubbleClock {
  using Key = std::pair<uint32_t, int64_t>; // bubble id, iteration
  struct Edge {
    double us = -1;      // host clock; -1: not known yet (token pending, or not reached)
    int64_t token = -1;  // backend edge token, -1: none
    bool set = false;    // the main stream has reached (enqueued) this edge
  };
  struct Times {
    Edge begin, end;
    // Consecutive bubbles, with no main compute between them (an iteration's tail bubble and the
    // next iteration's warm-up bubble): the bubble before this one and the one after it. Nothing
    // runs on this device between their markers, so the boundary between two of them cannot be
    // observed here; it is where the plan puts it (see beginUs).
    Key prev{0, -1}, next{0, -1};
  };
  std::mutex m;
  std::condition_variable cv;
  std::map<Key, Times> times;
  std::vector<Key> open; // the bubbles the main stream is in: one, or a chain of consecutive ones
  int64_t droppedBelow = 0;             // bubbles of earlier iterations were dropped (long over)
  std::map<uint32_t, double> plannedUs;      // bubble id -> planned duration
  // Bubble id -> how many bubbles follow it on the main stream before the next compute (into the
  // next iteration: a tail bubble is followed by the warm-up bubble). Each opens an edge before
  // main resumes, so the device-side gate takes the bubble as over only past that many more.
  std::map<uint32_t, int64_t> chainedAfter;
  double timeScale = 1;

  // Drops every bubble's iterations before `iteration`. The map is ordered by bubble id first
  // (lengthFactor walks one bubble's past iterations), so each bubble's range goes on its own.
  void dropBefore(int64_t iteration) {
    for (auto it = times.begin(); it != times.end();) {
      const uint32_t id = it->first.first;
      it = times.erase(it, times.lower_bound({id, iteration}));
      if (id == UINT32_MAX)
        break;
      it = times.lower_bound({id + 1, INT64_MIN});
    }
  }

  double plannedRealUs(uint32_t bubbleId) const {
    auto it = plannedUs.find(bubbleId);
    return it == plannedUs.end() ? 0 : it->second * timeScale;
  }
  // Where a bubble begins: its marker, or, for one that follows another with no compute between,
  // the planned end of the one before (but not before its own marker, nor after main resumed).
  // -1 while an edge it depends on is not known. Under m.
  double beginUs(const Key &key) const {
    auto it = times.find(key);
    if (it == times.end() || it->second.begin.us < 0)
      return -1;
    const Times &t = it->second;
    if (t.prev.second < 0 || !times.count(t.prev))
      return t.begin.us;
    const double prev = beginUs(t.prev);
    if (prev < 0)
      return -1;
    return chainedBubbleBegin(t.begin.us, prev, plannedRealUs(t.prev.first), t.end.us);
  }
  // Where it ends: where the next bubble of its chain begins, else where main resumed (-1: not
  // known yet). Under m.
  double endUs(const Key &key) const {
    auto it = times.find(key);
    if (it == times.end())
      return -1;
    if (it->second.next.second >= 0 && times.count(it->second.next))
      return beginUs(it->second.next);
    return it->second.end.us;
  }

  // How long this bubble is predicted to last, relative to its plan: the smallest measured /
  // planned of its last kHistory iterations whose both edges are known (1 before any). A pipeline
  // running slower than planned stretches its bubbles (and one whose stage runs behind its peers
  // shortens them); the plan alone would overrun the short ones and leave the long ones part
  // empty. The minimum keeps one long outlier from admitting chunks that do not fit. Under m.
  double lengthFactor(uint32_t bubbleId, int64_t iteration) const {
    constexpr int kHistory = 5;
    const double planned = plannedRealUs(bubbleId);
    if (!(planned > 0))
      return 1;
    double factor = -1;
    int seen = 0;
    for (auto it = times.lower_bound({bubbleId, iteration}); it != times.begin() && seen < kHistory;) {
      --it;
      if (it->first.first != bubbleId)
        break;
      const double begin = beginUs(it->first), end = endUs(it->first);
      if (begin < 0 || end < 0)
        continue;
      const double ratio = (end - begin) / planned;
      factor = seen++ == 0 ? ratio : std::min(factor, ratio);
    }
    return seen ? std::max(factor, 0.0) : 1.0;
  }
};

Executor::Executor(const Program &program, const ProgramInfo &info, const RunConfig &config)
    : program_(program), info_(info), config_(config) {}

Executor::~Executor() = default;

void Executor::fail(const Error &error) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!hasError_) {
      hasError_ = true;
      errorStatus_ = error.status();
      errorMessage_ = error.what();
    }
  }
  abort_ = true;
  for (auto &dev : events_)
    for (auto &e : dev) {
      std::lock_guard<std::mutex> lock(e->m);
      e->cv.notify_all();
    }
  if (transport_)
    transport_->wakeAll();
  {
    std::lock_guard<std::mutex> lock(cpMutex_);
    cpCv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(stopMutex_);
    stopCv_.notify_all();
  }
  for (auto &bc : bubbleClocks_)
    if (bc) {
      std::lock_guard<std::mutex> lock(bc->m);
      bc->cv.notify_all();
    }
}

void Executor::bubbleBegins(StreamCtx &ctx, Backend &backend, uint32_t bubbleId) {
  BubbleClock &bc = *bubbleClocks_[ctx.device];
  BubbleClock::Edge edge;
  edge.token = backend.markEdge(ctx, edge.us);
  edge.set = true;
  {
    std::lock_guard<std::mutex> lock(bc.m);
    const BubbleClock::Key key{bubbleId, ctx.iteration};
    BubbleClock::Times &t = bc.times[key];
    t.begin = edge;
    // Main has not resumed since the last bubble began: this one continues the chain.
    if (!bc.open.empty() && bc.times.count(bc.open.back())) {
      t.prev = bc.open.back();
      bc.times[t.prev].next = key;
    } else {
      bc.open.clear();
    }
    bc.open.push_back(key);
    // Keep the map small on long runs: a fill thread asking about a dropped bubble (it lags the
    // main stream by more than kKeep iterations) learns that the bubble is long over.
    constexpr int64_t kKeep = 64;
    if (ctx.iteration - kKeep > bc.droppedBelow) {
      bc.droppedBelow = ctx.iteration - kKeep;
      bc.dropBefore(bc.droppedBelow);
    }
  }
  bc.cv.notify_all();
}

void Executor::mainResumes(StreamCtx &ctx, Backend &backend) {
  BubbleClock &bc = *bubbleClocks_[ctx.device];
  {
    std::lock_guard<std::mutex> lock(bc.m);
    if (bc.open.empty())
      return;
  }
  BubbleClock::Edge edge;
  edge.token = backend.markEdge(ctx, edge.us);
  edge.set = true;
  {
    std::lock_guard<std::mutex> lock(bc.m);
    for (const BubbleClock::Key &key : bc.open)
      if (bc.times.count(key))
        bc.times[key].end = edge;
    bc.open.clear();
  }
  bc.cv.notify_all();
}

double Executor::bubbleDeadline(Backend &backend, uint32_t device, uint32_t bubbleId,
                                int64_t iteration, int64_t *beginToken) {
  BubbleClock &bc = *bubbleClocks_[device];
  const BubbleClock::Key key{bubbleId, iteration};
  BubbleClock::Times t;
  {
    std::unique_lock<std::mutex> lock(bc.m);
    // The main stream never waits on fill, so it reaches the bubble marker.
    bc.cv.wait(lock, [&] {
      return bc.times.count(key) || iteration < bc.droppedBelow || abort_.load();
    });
    if (abort_)
      throw AbortRun{};
    if (!bc.times.count(key))
      return -std::numeric_limits<double>::infinity(); // long over: nothing fits
    t = bc.times[key];
  }
  if (beginToken) // the gate's reference edge: the last bubble begin before main resumes
    *beginToken = t.begin.token >= 0 ? t.begin.token + bc.chainedAfter[bubbleId] : -1;
  // Resolve device-side edges outside the lock: a begin edge by waiting for the stream to get
  // there (fill must not start before its bubble), an end edge only if it has already passed.
  // A chained bubble's begin depends on the bubbles before it, its end on the one after it.
  auto resolve = [&](const BubbleClock::Key &k, bool blockBegin) {
    BubbleClock::Times e;
    {
      std::lock_guard<std::mutex> lock(bc.m);
      auto it = bc.times.find(k);
      if (it == bc.times.end())
        return false;
      e = it->second;
    }
    bool changed = false;
    if (e.begin.us < 0 && e.begin.token >= 0 && e.begin.set &&
        backend.edgeTimeUs(device, e.begin.token, blockBegin, e.begin.us))
      changed = true;
    if (e.end.set && e.end.us < 0 && e.end.token >= 0 &&
        backend.edgeTimeUs(device, e.end.token, /*block=*/false, e.end.us))
      changed = true;
    if (changed) {
      std::lock_guard<std::mutex> lock(bc.m);
      auto it = bc.times.find(k);
      if (it != bc.times.end()) {
        if (e.begin.us >= 0 && it->second.begin.token == e.begin.token)
          it->second.begin.us = e.begin.us;
        if (e.end.us >= 0 && it->second.end.token == e.end.token)
          it->second.end.us = e.end.us;
      }
    }
    return e.begin.us >= 0;
  };
  if (!resolve(key, /*blockBegin=*/true))
    return -std::numeric_limits<double>::infinity(); // its edge was reused: long over
  for (BubbleClock::Key k = t.prev; k.second >= 0;) {
    resolve(k, /*blockBegin=*/true); // earlier on the same stream: already passed
    std::lock_guard<std::mutex> lock(bc.m);
    auto it = bc.times.find(k);
    k = it == bc.times.end() ? BubbleClock::Key{0, -1} : it->second.prev;
  }
  BubbleClock::Key next{0, -1};
  {
    std::lock_guard<std::mutex> lock(bc.m);
    auto it = bc.times.find(key);
    if (it != bc.times.end())
      next = it->second.next;
  }
  if (next.second >= 0)
    resolve(next, /*blockBegin=*/false);
  std::lock_guard<std::mutex> lock(bc.m);
  double begin = bc.beginUs(key);
  if (begin < 0) { // an earlier bubble of its chain is not known: its own marker (resolved above)
    auto it = bc.times.find(key);
    begin = it != bc.times.end() ? it->second.begin.us : t.begin.us;
  }
  double deadline = begin + bc.plannedRealUs(bubbleId) * bc.lengthFactor(bubbleId, iteration);
  const double end = bc.endUs(key);
  if (end >= 0) // main already resumed (or the next bubble of its chain began): it is over
    deadline = std::min(deadline, end);
  return deadline;
}

void Executor::memoryAdd(uint32_t device, int64_t bytes) {
  int64_t now = used_[device].fetch_add(bytes) + bytes;
  int64_t peak = peak_[device].load();
  while (now > peak && !peak_[device].compare_exchange_weak(peak, now)) {
  }
}

void Executor::waitForEventConsumers(uint32_t device, uint32_t event, int64_t gen, int64_t ring) {
  EventState &e = *events_[device][event];
  if (gen < ring || e.waiters == 0)
    return;
  std::unique_lock<std::mutex> lock(e.m);
  // Waits of generations < gen - ring + 1 must all be enqueued.
  int64_t need = (gen - ring + 1) * static_cast<int64_t>(e.waiters);
  e.cv.wait(lock, [&] { return e.waitsDone >= need || abort_.load(); });
  if (abort_)
    throw AbortRun{};
}

void Executor::waitForChannelConsumers(uint32_t src, uint32_t dst, uint32_t tag, int64_t gen,
                                       int64_t ring) {
  if (!transport_->waitConsumed(ChannelKey{src, dst, tag}, gen, ring, abort_))
    throw AbortRun{};
}

void Executor::chooseBackends() {
  const uint32_t numDevices = static_cast<uint32_t>(program_.devices.size());
  backendOf_.assign(numDevices, nullptr);
  result_.deviceBackend.assign(numDevices, "host");
  if (config_.stage >= 0 && static_cast<uint32_t>(config_.stage) >= numDevices)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "stage " + std::to_string(config_.stage) + " is out of range: the program has " +
                    std::to_string(numDevices) + " devices");
  pfrt_backend kind = config_.backend;
  if (kind != PFRT_BACKEND_AUTO && kind != PFRT_BACKEND_HOST && kind != PFRT_BACKEND_CUDA)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "unknown backend " + std::to_string(static_cast<int>(kind)));
  int gpus = 0;
  if (kind != PFRT_BACKEND_HOST) {
    cuda_ = createCudaBackend();
    gpus = cuda_ ? cudaDeviceCount() : 0;
    if (kind == PFRT_BACKEND_CUDA && !cuda_)
      throw Error(PFRT_ERROR_UNAVAILABLE,
                  "backend 'cuda' requested but this runtime was built without CUDA");
    if (kind == PFRT_BACKEND_CUDA && gpus <= 0)
      throw Error(PFRT_ERROR_UNAVAILABLE,
                  "backend 'cuda' requested but no CUDA device is present "
                  "(cudaGetDeviceCount returned 0 or an error); use --backend host or auto");
    if (kind == PFRT_BACKEND_AUTO)
      kind = gpus > 0 ? PFRT_BACKEND_CUDA : PFRT_BACKEND_HOST;
  }
  if (config_.maxDim == 0 && kind == PFRT_BACKEND_HOST)
    config_.maxDim = kHostDefaultMaxDim;
  host_ = createHostBackend();
  fillOn_.assign(numDevices, false);
  bool fill = config_.fill && !config_.profile;
  if (fill && kind == PFRT_BACKEND_HOST)
    checkHostFillFits(program_, config_.maxDim);
  config_.emulated.assign(numDevices, false);
  config_.replayScalesPeers = false;
  if (kind == PFRT_BACKEND_HOST) {
    cuda_.reset();
    result_.backend = "host";
    result_.measuredTime = !config_.modelledTime;
    result_.timeScale = config_.timeScale;
    // Measured time on a machine smaller than the pipeline: replay (one real stage, the others
    // emulated at their planned times) is the default, so the real stage is measured honestly.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (!config_.modelledTime && config_.stage < 0 && config_.rank < 0 && numDevices > 1 &&
        numDevices > cores)
      config_.stage = 0;
    if (config_.stage >= 0 && numDevices > 1)
      result_.replayDevice = config_.stage;
    for (uint32_t d = 0; d < numDevices; ++d) {
      backendOf_[d] = host_.get();
      fillOn_[d] = fill && isLocal(d) &&
                   (config_.stage < 0 || static_cast<uint32_t>(config_.stage) == d);
      if (config_.stage >= 0 && static_cast<uint32_t>(config_.stage) != d) {
        result_.deviceBackend[d] = "emulated";
        config_.emulated[d] = true;
      }
    }
    if (config_.stage < 0 || numDevices <= 1)
      result_.replayDevice = -1;
    config_.replayScalesPeers = result_.replayDevice >= 0 && !config_.modelledTime;
  } else {
    result_.measuredTime = true;
    result_.timeScale = 1.0;
    config_.timeScale = 1.0; // the CUDA backend measures real time; emulated peers follow it
    bool replay = config_.stage >= 0 || static_cast<uint32_t>(gpus) < numDevices;
    if (config_.rank >= 0) {
      // One process per rank: this rank's device on its GPU; the others are other processes.
      result_.backend = "cuda";
      for (uint32_t d = 0; d < numDevices; ++d) {
        backendOf_[d] = isLocal(d) ? cuda_.get() : host_.get();
        fillOn_[d] = fill && isLocal(d);
        result_.deviceBackend[d] = "cuda";
      }
    } else if (!replay) {
      result_.backend = "cuda";
      for (uint32_t d = 0; d < numDevices; ++d) {
        backendOf_[d] = cuda_.get();
        fillOn_[d] = fill;
        result_.deviceBackend[d] = "cuda";
      }
    } else {
      uint32_t real = config_.stage >= 0 ? static_cast<uint32_t>(config_.stage) : 0;
      result_.backend = numDevices > 1 ? "cuda-replay" : "cuda";
      result_.replayDevice = numDevices > 1 ? static_cast<int32_t>(real) : -1;
      for (uint32_t d = 0; d < numDevices; ++d) {
        bool isReal = d == real;
        backendOf_[d] = isReal ? cuda_.get() : host_.get();
        fillOn_[d] = fill && isReal;
        result_.deviceBackend[d] = isReal ? "cuda" : "emulated";
        config_.emulated[d] = !isReal;
      }
    }
  }
  result_.deviceFill = fillOn_;
}

void Executor::setupJobs() {
  jobs_.clear();
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    auto jr = std::make_unique<JobRun>();
    jr->shape = makeJobShape(program_, j, config_.maxDim);
    for (const auto &ds : info_.jobs[j].streamOnDevice) {
      uint32_t d = ds.first;
      if (!fillOn_[d])
        continue;
      FillQueue &q = jr->devices[d];
      q.data = backendOf_[d]->createJob(d, j, jr->shape);
      q.holdAt = FillQueue::holdThreshold(program_.devices[d].streams[ds.second], j);
      jr->rooms[d].us[1] = longestPlannedBubbleUs(d, ds.second, j) * config_.timeScale;
    }
    jobs_.push_back(std::move(jr));
  }
}

double Executor::longestPlannedBubbleUs(uint32_t d, uint32_t stream, uint32_t job) const {
  std::map<uint32_t, double> planned; // bubble id -> planned duration
  for (const Op &op : program_.devices[d].streams[info_.devices[d].mainStream].ops)
    if (op.kind == OpKind::Bubble)
      planned[op.bubble.bubble_id] = op.bubble.planned_duration_us;
  double longest = 0;
  for (const Op &op : program_.devices[d].streams[stream].ops)
    if (op.kind == OpKind::Fill && op.fill.job == job && planned.count(op.fill.bubble_id))
      longest = std::max(longest, planned[op.fill.bubble_id]);
  return longest;
}

void Executor::planSamples() {
  // What the plan schedules in [first_, end_) on the devices that run for real, assuming every
  // chunk runs. Emulated devices (replay mode) run no fill: counting their plan would make a
  // replay run's measured/planned ratio compare one stage's work with the whole pipeline's.
  result_.jobs.resize(program_.jobs.size());
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    const FillJob &job = program_.jobs[j];
    const ProgramInfo::JobInfo &ji = info_.jobs[j];
    uint64_t planned = 0, inFlight = 0;
    for (const auto &ds : ji.streamOnDevice) {
      if (ds.first < config_.emulated.size() && config_.emulated[ds.first])
        continue;
      const Stream &st = program_.devices[ds.first].streams[ds.second];
      for (const Op &op : st.ops)
        if (op.kind == OpKind::Fill && op.fill.job == j && op.fill.layer_end == ji.passes)
          planned += batchSamplesIn(op.fill, first_, end_, ji.stride, job.samples);
      inFlight += samplesInFlightAt(st, j, end_, ji.passes, ji.stride, job.samples);
    }
    result_.jobs[j].samplesPlanned = planned;
    result_.jobs[j].samplesInFlightPlanned = inFlight;
  }
}

void Executor::loadCheckpoint() {
  const std::string &path = config_.checkpointPath;
  if (path.empty())
    return;
  const uint64_t fp = programFingerprint(program_);
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  CheckpointStatus status = readCheckpointFile(path, fp, cp, problem);
  if (status == CheckpointStatus::Ok)
    problem = checkpointContentProblem(cp);
  if (status == CheckpointStatus::Missing)
    return;
  if (status == CheckpointStatus::Ok && problem.empty()) {
    restoreCheckpoint(cp);
    return;
  }
  const std::string what = "checkpoint " + path + " " + problem;
  if (config_.checkpointRecovery == PFRT_CHECKPOINT_RESTART) {
    const std::string bad = path + ".bad";
    if (std::rename(path.c_str(), bad.c_str()) != 0)
      throw Error(PFRT_ERROR_IO, what + "; cannot move it to " + bad);
    std::fprintf(stderr, "pfrt: warning: %s; moved to %s, starting clean\n", what.c_str(),
                 bad.c_str());
    return;
  }
  if (config_.checkpointRecovery == PFRT_CHECKPOINT_PREVIOUS) {
    const std::string prev = path + ".prev";
    pipefill::rt::FillCheckpoint older;
    std::string why;
    CheckpointStatus st = readCheckpointFile(prev, fp, older, why);
    if (st == CheckpointStatus::Ok)
      why = checkpointContentProblem(older);
    if (st == CheckpointStatus::Ok && why.empty()) {
      std::fprintf(stderr, "pfrt: warning: %s; resuming from %s (iteration %u)\n",
                   what.c_str(), prev.c_str(), older.iterations_done());
      restoreCheckpoint(older);
      return;
    }
    throw Error(PFRT_ERROR_PARSE, what + "; the previous one (" + prev + ") " +
                                      (st == CheckpointStatus::Missing ? "does not exist" : why));
  }
  // A checkpoint of another workload cap is good: the cap it names resumes it. Moving it aside
  // (restart) would throw its work away.
  if (status == CheckpointStatus::Ok && cp.max_dim() != config_.maxDim)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                what + " (run with max_dim " + std::to_string(cp.max_dim()) + " to resume it)");
  const bool foreign = status == CheckpointStatus::Foreign;
  throw Error(foreign ? PFRT_ERROR_INVALID_ARGUMENT : PFRT_ERROR_PARSE,
              what + " (resume from the previous checkpoint or start clean with "
                     "checkpoint_recovery PFRT_CHECKPOINT_PREVIOUS or PFRT_CHECKPOINT_RESTART)");
}

std::string Executor::checkpointContentProblem(const pipefill::rt::FillCheckpoint &cp) const {
  if (cp.max_dim() != config_.maxDim)
    return "was written with workload dimension cap " + std::to_string(cp.max_dim()) +
           " but this run uses " + std::to_string(config_.maxDim);
  if (cp.jobs_size() != static_cast<int>(program_.jobs.size()))
    return "has " + std::to_string(cp.jobs_size()) + " jobs, the program " +
           std::to_string(program_.jobs.size());
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    const FillJob &job = program_.jobs[j];
    const std::string where = "job " + std::to_string(j) + " ('" + job.name + "')";
    if (jc.name() != job.name)
      return "names job " + std::to_string(j) + " '" + jc.name() + "', the program '" + job.name +
             "'";
    if (job.samples && jc.samples_done() > job.samples)
      return where + " has " + std::to_string(jc.samples_done()) + " samples done of " +
             std::to_string(job.samples);
    const JobShape shape = makeJobShape(program_, j, config_.maxDim);
    std::vector<size_t> weightSizes;
    for (const LayerShape &ls : shape.layers)
      for (size_t n : ls.weightSizes())
        weightSizes.push_back(n);
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      if (ds.device() >= program_.devices.size())
        return where + " names device " + std::to_string(ds.device());
      if (ds.weights_size()) {
        if (static_cast<size_t>(ds.weights_size()) != weightSizes.size())
          return where + " has " + std::to_string(ds.weights_size()) + " weight tensors, the job " +
                 std::to_string(weightSizes.size());
        for (int k = 0; k < ds.weights_size(); ++k)
          if (static_cast<size_t>(ds.weights(k).values_size()) != weightSizes[k])
            return where + " weight tensor " + std::to_string(k) + " has " +
                   std::to_string(ds.weights(k).values_size()) + " values, expected " +
                   std::to_string(weightSizes[k]);
      }
      // Checked here, not only by FillQueue::restore, so that --on-bad-checkpoint previous and
      // restart apply to deferred chunks too.
      for (const pipefill::rt::DeferredChunk &dc : ds.deferred()) {
        const std::string bad = FillQueue::deferredChunkProblem(dc, job.passes());
        if (!bad.empty())
          return where + " has " + bad;
      }
      const std::string held = FillQueue::heldProblem(ds, cp.iterations_done());
      if (!held.empty())
        return where + " has " + held;
      for (const pipefill::rt::InFlightBatch &b : ds.in_flight()) {
        std::string bad = checkInFlightShape(shape, b);
        if (!bad.empty())
          return where + " in-flight batch at sample " + std::to_string(b.sample_begin()) + ": " +
                 bad;
      }
    }
  }
  return "";
}

void Executor::restoreCheckpoint(const pipefill::rt::FillCheckpoint &cp) {
  const std::string &path = config_.checkpointPath;
  first_ = cp.iterations_done();
  result_.resumed = true;
  carried_.assign(program_.jobs.size(), Carried{});
  std::set<uint32_t> restored; // devices of job j the checkpoint names
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    JobRun &jr = *jobs_[j];
    jr.baseSamples = jc.samples_done();
    jr.baseSteps = jc.steps_done();
    jr.baseChecksum = jc.checksum();
    jr.baseLoss = jc.loss_sum();
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      auto it = jr.devices.find(ds.device());
      if (it == jr.devices.end()) {
        // The device does not run fill in this run: its batches in flight and deferred chunks
        // wait, unchanged, in every checkpoint this run writes, and count as pending.
        Carried &c = carried_[j];
        c.states.push_back(ds.SerializeAsString());
        for (const pipefill::rt::InFlightBatch &b : ds.in_flight())
          c.samplesPending += b.batch();
        for (const pipefill::rt::DeferredChunk &d : ds.deferred()) {
          ++c.chunksPending;
          if (d.layer_begin() == 0)
            c.samplesPending += d.batch();
        }
        c.held.emplace_back(ds.device(), ds.iterations_held());
        continue;
      }
      const std::string bad = it->second.restore(ds, info_.jobs[j].passes);
      if (!bad.empty())
        throw Error(PFRT_ERROR_PARSE,
                    "checkpoint " + path + ": job '" + program_.jobs[j].name + "' " + bad);
      restored.insert(ds.device());
    }
    // A device the checkpoint does not name ran no fill (--no-fill, --stage, a session of another
    // rank): it starts at the plan's first iteration, as a device carried through such a run does
    // (documented in docs/runtime.md).
    for (auto &[device, queue] : jr.devices)
      if (!restored.count(device))
        queue.restoreUnfilled(device, cp.iterations_done(), info_.jobs[j].passes);
    restored.clear();
  }
}

std::string Executor::historyCheckpoint(const std::string &file, int64_t iteration,
                                        pipefill::rt::FillCheckpoint *out) const {
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  const CheckpointStatus st = readCheckpointFile(file, programFingerprint(program_), cp, problem);
  if (st == CheckpointStatus::Missing)
    return "does not exist";
  if (st == CheckpointStatus::Ok)
    problem = checkpointContentProblem(cp);
  if (!problem.empty())
    return problem;
  if (static_cast<int64_t>(cp.iterations_done()) != iteration)
    return "is at iteration " + std::to_string(cp.iterations_done());
  if (out)
    *out = std::move(cp);
  return "";
}

// Each rank writes its own checkpoint after its own iterations, so ranks that were killed (a stop
// request stops them together, agreedStopBefore) can be some iterations apart: fill streams run
// behind main by different amounts (killed ranks of four.pb: iterations 87 to 101). Each rank
// keeps its last kCheckpointHistory checkpoints as CHECKPOINT.itN; all resume at the latest
// iteration every rank has. Ranks with none in common fail, listing what each has.
void Executor::agreeOnCheckpointIteration() {
  const std::string &path = config_.checkpointPath;
  // A rank whose devices run no fill has no state to restore: it resumes at any iteration (it
  // writes only at the end of a run, so it has no history to offer).
  const bool stateless = fillStreams() == 0;
  std::vector<uint32_t> mine = checkpointHistory(path);
  // Recovering from bad checkpoints (--on-bad-checkpoint previous|restart): a damaged file of the
  // history is not offered, so the ranks agree on an iteration each of them can restore (a
  // rank's latest checkpoint is a hard link of its newest history file: damaged together).
  if (config_.checkpointRecovery != PFRT_CHECKPOINT_FAIL && !stateless)
    mine.erase(std::remove_if(mine.begin(), mine.end(),
                              [&](uint32_t n) {
                                return n != first_ &&
                                       !historyCheckpoint(path + ".it" + std::to_string(n), n)
                                            .empty();
                              }),
               mine.end());
  if (first_ > 0 && std::find(mine.begin(), mine.end(), first_) == mine.end())
    mine.push_back(static_cast<uint32_t>(first_));
  // "<s|f> <first> <iterations...>"
  std::string encoded = std::string(stateless ? "s " : "f ") + std::to_string(first_) + ' ';
  for (uint32_t n : mine)
    encoded += std::to_string(n) + ' ';
  const std::vector<std::string> parts = transport_->allGather(encoded);
  struct Rank {
    bool stateless = false;
    int64_t first = 0;
    std::vector<uint32_t> have;
  };
  std::vector<Rank> ranks(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    std::istringstream in(parts[r]);
    std::string kind;
    in >> kind >> ranks[r].first;
    ranks[r].stateless = kind == "s";
    for (uint32_t n; in >> n;)
      ranks[r].have.push_back(n);
  }
  // The latest iteration every rank with fill state has. When none of them has a checkpoint they
  // start clean (0); a clean start for some of them only would throw the others' progress away.
  int64_t target = -1;
  bool anyState = false, anyStateful = false;
  for (const Rank &r : ranks) {
    anyStateful |= !r.stateless;
    anyState |= !r.stateless && !r.have.empty();
  }
  if (!anyStateful) {
    for (const Rank &r : ranks) // no rank has state: any common iteration will do
      target = std::max(target, r.first);
  } else if (!anyState) {
    target = 0;
  } else {
    for (const Rank &r : ranks)
      for (uint32_t n : r.stateless ? std::vector<uint32_t>{} : r.have) {
        bool everywhere = true;
        for (const Rank &q : ranks)
          everywhere &= q.stateless || std::find(q.have.begin(), q.have.end(), n) != q.have.end();
        if (everywhere)
          target = std::max<int64_t>(target, n);
      }
  }
  if (target == first_)
    return;
  if (target < 0) {
    std::string list;
    for (size_t r = 0; r < ranks.size(); ++r) {
      list += (r ? "; rank " : "rank ") + std::to_string(r) + ": ";
      if (ranks[r].stateless)
        list += "any (no fill state)";
      else if (ranks[r].have.empty())
        list += "none";
      for (size_t k = 0; k < ranks[r].have.size() && !ranks[r].stateless; ++k)
        list += (k ? "," : "") + std::to_string(ranks[r].have[k]);
    }
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "the ranks' checkpoints have no iteration in common (" + list +
                    "): the ranks cannot resume at one iteration (move the checkpoints away "
                    "to start clean)");
  }
  if (stateless) {
    first_ = target; // nothing to restore: the iteration is all it has to agree on
    return;
  }
  const std::string older = path + ".it" + std::to_string(target);
  const std::string why = "the ranks' latest common checkpoint is at iteration " +
                          std::to_string(target) + ", this rank's (" +
                          std::to_string(config_.rank) + ") at " + std::to_string(first_);
  pipefill::rt::FillCheckpoint cp;
  const std::string problem = historyCheckpoint(older, target, &cp);
  if (!problem.empty())
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                why + ", but " + older + " " + problem +
                    (config_.checkpointRecovery == PFRT_CHECKPOINT_FAIL
                         ? " (checkpoint_recovery PFRT_CHECKPOINT_PREVIOUS or "
                           "PFRT_CHECKPOINT_RESTART resumes every rank at the latest iteration "
                           "all of them can restore)"
                         : ""));
  std::fprintf(stderr, "pfrt: %s; resuming from %s\n", why.c_str(), older.c_str());
  // The newer checkpoint's state is in the queues: start them again, then restore the older one.
  setupJobs();
  restoreCheckpoint(cp);
}

void Executor::writeCheckpoint(int64_t iterationsDone) {
  const std::string &path = config_.checkpointPath;
  pipefill::rt::FillCheckpoint cp;
  cp.set_program_fingerprint(programFingerprint(program_));
  cp.set_iterations_done(static_cast<uint32_t>(iterationsDone));
  cp.set_max_dim(config_.maxDim);
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    JobRun &jr = *jobs_[j];
    pipefill::rt::FillJobCheckpoint *jc = cp.add_jobs();
    jc->set_name(program_.jobs[j].name);
    double checksum = jr.baseChecksum, loss = jr.baseLoss;
    for (auto &dj : jr.devices) {
      JobData::Accum a = dj.second.data->accumulators();
      checksum += a.checksum;
      loss += a.lossSum;
    }
    jc->set_samples_done(jr.baseSamples + jr.samplesThisRun.load());
    jc->set_steps_done(jr.baseSteps + jr.stepsThisRun.load());
    jc->set_checksum(checksum);
    jc->set_loss_sum(loss);
    for (auto &dj : jr.devices) {
      pipefill::rt::FillDeviceState *ds = jc->add_devices();
      ds->set_device(dj.first);
      dj.second.save(*ds, program_.jobs[j].kind == PFRT_FILL_TRAINING);
    }
    if (j < carried_.size())
      for (size_t k = 0; k < carried_[j].states.size(); ++k) {
        pipefill::rt::FillDeviceState *ds = jc->add_devices();
        ds->ParseFromString(carried_[j].states[k]);
        ds->set_iterations_held(carried_[j].held[k].second + (iterationsDone - first_));
      }
  }
  writeCheckpointFile(path, cp, cp.program_fingerprint());
  if (config_.rank >= 0)
    keepCheckpointHistory(path, static_cast<uint32_t>(iterationsDone), kCheckpointHistory);
}

void Executor::checkpointBarrier(StreamCtx &ctx, Backend &backend) {
  backend.syncStream(ctx);
  std::unique_lock<std::mutex> lock(cpMutex_);
  int64_t gen = cpGeneration_;
  if (++cpArrived_ == cpParticipants_) {
    // Every fill stream has finished this iteration and waits here: the state is consistent.
    writeCheckpoint(ctx.iteration + 1);
    cpArrived_ = 0;
    ++cpGeneration_;
    cpCv_.notify_all();
    return;
  }
  cpCv_.wait(lock, [&] { return cpGeneration_ != gen || abort_.load(); });
  if (abort_)
    throw AbortRun{};
}

bool Executor::stopBefore(uint32_t d, uint32_t s, int64_t iteration) {
  if (!config_.stopRequest)
    return false;
  if (config_.rank >= 0 && transport_->world() > 1)
    return agreedStopBefore(d, s, iteration);
  std::lock_guard<std::mutex> lock(stopMutex_);
  // The first stream to see the request fixes the stop point past every iteration begun so far,
  // so no stream waits on a peer that has already stopped.
  if (stopAt_ == INT64_MAX && config_.stopRequest->load())
    stopAt_ = std::max(maxBegun_ + 1, first_);
  if (iteration >= stopAt_)
    return true;
  maxBegun_ = std::max(maxBegun_, iteration);
  return false;
}

bool Executor::agreedStopBefore(uint32_t d, uint32_t s, int64_t iteration) {
  if (s != info_.devices[d].mainStream) {
    std::unique_lock<std::mutex> lock(stopMutex_);
    stopCv_.wait(lock, [&] { return decided_ >= iteration || abort_.load(); });
    if (abort_)
      throw AbortRun{};
    return iteration >= stopAt_;
  }
  // The vote of iteration - lag: every rank reads the same results in the same order, so the
  // first round with a stop vote ends every rank's run at the same iteration.
  bool stop = false;
  if (iteration - kStopVoteLag >= first_ &&
      !transport_->voteResult(iteration - kStopVoteLag, stop, abort_))
    throw AbortRun{};
  if (!stop)
    transport_->postVote(iteration, config_.stopRequest->load() != 0);
  {
    std::lock_guard<std::mutex> lock(stopMutex_);
    if (stop)
      stopAt_ = iteration;
    decided_ = iteration;
  }
  stopCv_.notify_all();
  return stop;
}

void Executor::iterationDone(uint32_t d, uint32_t s, int64_t iteration) {
  if (!config_.progressFn || d + 1 != program_.devices.size() ||
      s != info_.devices[d].mainStream)
    return;
  config_.progressFn(config_.progressUser, static_cast<uint32_t>(iteration + 1 - first_),
                     static_cast<uint32_t>(end_ - first_),
                     (hostNowUs() - result_.runStartUs) * 1e-6);
}

void Executor::runFill(StreamCtx &ctx, const Op &op, Backend &backend, TimeSlot &slot) {
  const uint32_t d = ctx.device;
  if (!fillOn_[d])
    return;
  const pfrt_fill_chunk_desc &f = op.fill;
  JobRun &jr = *jobs_[f.job];
  const FillJob &job = program_.jobs[f.job];
  const ProgramInfo::JobInfo &ji = info_.jobs[f.job];
  FillQueue &dj = jr.devices.at(d);
  // This slot's own planned work, if any.
  WorkItem own;
  const FillQueue::Own kind = dj.ownWork(f, ctx.iteration, job, ji.stride, own);
  if (kind == FillQueue::Own::NotThisIteration)
    return; // not this iteration's part of a periodic plan
  if (kind == FillQueue::Own::Skipped)
    ++jr.chunksSkipped;
  // Held: fill is two iterations behind; the deferred work runs, nothing new begins.
  const bool hasOwn = kind == FillQueue::Own::Ready;
  if (!hasOwn && dj.backlog.empty())
    return;
  const bool bound = config_.fillBounded && backend.boundsOnHost();
  int64_t bubbleToken = -1; // its begin edge on the device (CUDA), for the device-side bound
  double deadline =
      bound ? bubbleDeadline(backend, d, f.bubble_id, ctx.iteration, &bubbleToken) : 0.0;
  if (hasOwn)
    dj.backlog.push_back(own); // behind older deferred work: plan order is kept
  // In plan order, except that a chunk no bubble of the job can hold as things stand (longer than
  // `rooms`) waits without holding up the work of other batches behind it: `parked` are the
  // batches passed over (their later passes wait too), `i` the first item not passed over. The
  // slot's own chunk is the backlog's last item while ownQueued; everything before it is deferred.
  JobRun::Rooms &rooms = jr.rooms.at(d);
  std::vector<uint64_t> parked;
  bool ownQueued = hasOwn, started = false, took = false;
  for (size_t i = 0; (i = dj.backlog.firstNotParked(i, parked)) < dj.backlog.size();) {
    const WorkItem item = dj.backlog.at(i);
    const bool isOwn = ownQueued && i + 1 == dj.backlog.size();
    double predicted = -1;
    if (bound) {
      if (started) // the main stream may have resumed while the last chunk ran
        deadline = bubbleDeadline(backend, d, f.bubble_id, ctx.iteration);
      predicted = dj.predictor.predict(item.passBegin, item.passEnd, item.batch, item.plannedUs);
      const double now = backend.streamNowUs(ctx);
      if (!took) { // the bubble's room, all of it, when the fill stream takes it
        rooms.took(ctx.iteration, deadline - now);
        took = true;
      }
      if (now + predicted * config_.timeScale > deadline) {
        // It does not fit what is left of the bubble. Its longest head that does runs now (or,
        // for an inference chunk with no head that fits, its first samples that do); the rest
        // (or all of it) waits for a later bubble, first in line.
        WorkItem head;
        const double roomUs = (deadline - now) / config_.timeScale;
        if (dj.splitToFit(i, jr.shape, roomUs, config_.fillSplit, &head, &predicted) ==
            FillQueue::Split::None) {
          if (predicted * config_.timeScale <= rooms.longest())
            break; // a bubble of the job can hold it: it waits first in line
          parked.push_back(item.sampleBegin);
          ++i;
          continue;
        }
        ++jr.chunksSplit;
        if (!started) {
          backend.markStart(ctx, slot);
          started = true;
        }
        if (execItem(ctx, backend, jr, dj, f.job, head, deadline, predicted, !isOwn, f,
                     bubbleToken) == ItemRan::Cut)
          break; // the bubble is over: what is left of the chunk is first in line again
        continue;
      }
    } else if (config_.fillBounded) {
      predicted = dj.predictor.predict(item.passBegin, item.passEnd, item.batch, item.plannedUs);
    }
    dj.backlog.erase(i);
    if (!started) {
      backend.markStart(ctx, slot);
      started = true;
    }
    if (execItem(ctx, backend, jr, dj, f.job, item, bound ? deadline : 0.0, predicted, !isOwn,
                 f, bubbleToken) == ItemRan::Cut)
      break; // its rest is queued (first in line): the own chunk, if it was, still waits
    if (isOwn)
      ownQueued = false;
  }
  if (started)
    backend.markEnd(ctx, slot);
  if (ownQueued)
    ++jr.chunksDeferred; // the slot's own chunk (or what is left of it) is still queued
}

Executor::ItemRan Executor::execItem(StreamCtx &ctx, Backend &backend, JobRun &jr,
                                     FillQueue &dj, uint32_t job, const WorkItem &item,
                                     double deadlineUs, double predictedUs, bool deferred,
                                     const pfrt_fill_chunk_desc &slotChunk,
                                     int64_t bubbleToken) {
  const uint32_t d = ctx.device;
  const FillJob &fj = program_.jobs[job];
  bool begunTwice = false;
  Flight *flight = dj.admit(item, &begunTwice);
  if (begunTwice)
    throw Error(PFRT_ERROR_INTERNAL, opLocation(program_, d, ctx.stream, 0) +
                                         ": fill batch at sample " +
                                         std::to_string(item.sampleBegin) + " begun twice");
  if (!flight) {
    ++jr.chunksSkipped;
    return ItemRan::Skipped;
  }
  // Bounded with heads of chunks: between passes the chunk re-reads its bubble's deadline (earlier
  // once main has resumed) and stops when its next pass no longer fits (FillQueue::run).
  std::function<double()> deadlineNow;
  if (deadlineUs > 0 && config_.fillSplit)
    deadlineNow = [&] { return bubbleDeadline(backend, d, slotChunk.bubble_id, ctx.iteration); };
  memoryAdd(d, static_cast<int64_t>(item.peakBytes));
  const FillQueue::Ran ran =
      dj.run(ctx, backend, *flight, job, jr.shape, info_.jobs[job].passes, item, config_,
             deadlineUs, predictedUs, /*timed=*/backend.boundsOnHost(), deadlineNow, bubbleToken);
  memoryAdd(d, -static_cast<int64_t>(item.peakBytes));
  if (ran.deviceStop)
    ++jr.chunksStoppedOnDevice;
  if (ran.passEnd == item.passBegin)
    return ItemRan::Cut; // the device ran none of it: the bubble is over
  ++jr.chunksRun;
  if (ran.cut)
    ++jr.chunksSplit;
  if (ran.completed) {
    jr.samplesThisRun += ran.batch;
    if (fj.kind == PFRT_FILL_TRAINING)
      ++jr.stepsThisRun;
  }
  const double t0 = ran.startUs, t1 = ran.endUs;
  RunResult::ChunkRun cr;
  cr.device = d;
  cr.job = job;
  cr.stream = ctx.stream;
  cr.bubbleId = slotChunk.bubble_id;
  cr.iteration = ctx.iteration;
  cr.passBegin = item.passBegin;
  cr.passEnd = ran.passEnd;
  cr.batch = item.batch;
  cr.plannedUs = ran.plannedUs;
  cr.predictedUs = predictedUs;
  cr.start = t0;
  cr.end = t1;
  cr.deferred = deferred;
  cr.cpuUs = ran.cpuUs;
  {
    std::lock_guard<std::mutex> lock(chunkRunsMutex_);
    result_.chunkRuns.push_back(cr);
  }
  return ran.cut ? ItemRan::Cut : ItemRan::Ran;
}

// A receive: the message of this iteration from the transport, then the backend's wait for it.
void Executor::execRecv(StreamCtx &ctx, Backend &backend, const Op &op, uint32_t index,
                        TimeSlot &slot) {
  backend.markStart(ctx, slot);
  const ChannelKey key{op.peer, ctx.device, op.tag};
  const int64_t gen = ctx.iteration;
  Message m;
  try {
    if (!transport_->take(key, gen, m, abort_))
      throw AbortRun{};
  } catch (const Error &e) {
    throw Error(e.status(),
                opLocation(program_, ctx.device, ctx.stream, index) + ": " + e.what());
  }
  backend.recv(ctx, op, m);
  transport_->consumed(key, gen);
  backend.markEnd(ctx, slot);
}

// Record: the backend's event, then the waiters of this generation are released.
void Executor::execRecord(StreamCtx &ctx, Backend &backend, const Op &op, TimeSlot &slot) {
  backend.markStart(ctx, slot);
  backend.record(ctx, op.event, ctx.iteration);
  EventState &e = *events_[ctx.device][op.event];
  {
    std::lock_guard<std::mutex> lock(e.m);
    e.recorded = ctx.iteration + 1;
  }
  e.cv.notify_all();
  backend.markEnd(ctx, slot);
}

// Wait: until the record of this generation was enqueued, then the backend's wait on it.
void Executor::execWait(StreamCtx &ctx, Backend &backend, const Op &op, TimeSlot &slot) {
  backend.markStart(ctx, slot);
  EventState &e = *events_[ctx.device][op.event];
  const int64_t gen = ctx.iteration;
  {
    std::unique_lock<std::mutex> lock(e.m);
    e.cv.wait(lock, [&] { return e.recorded >= gen + 1 || abort_.load(); });
    if (abort_)
      throw AbortRun{};
  }
  backend.wait(ctx, op.event, gen);
  {
    std::lock_guard<std::mutex> lock(e.m);
    ++e.waitsDone;
  }
  e.cv.notify_all();
  backend.markEnd(ctx, slot);
}

void Executor::streamThread(uint32_t d, uint32_t s) {
  Backend &backend = *backendOf_[d];
  const Device &dev = program_.devices[d];
  const Stream &st = dev.streams[s];
  StreamCtx ctx;
  ctx.exec = this;
  ctx.device = d;
  ctx.stream = s;
  ctx.program = &program_;
  ctx.dev = &dev;
  ctx.s = &st;
  bool began = false;
  try {
    backend.threadBegin(ctx);
    began = true;
    const size_t nops = st.ops.size();
    const bool participant = fillOn_[d] && info_.devices[d].streamHasFill[s] && cpParticipants_;
    const bool clocked = st.role == PFRT_STREAM_MAIN && bubbleClocks_[d] != nullptr;
    for (int64_t k = 0; first_ + k < end_ && !stopBefore(d, s, first_ + k); ++k) {
      ctx.iteration = first_ + k;
      const int64_t gen = ctx.iteration;
      for (size_t i = 0; i < nops; ++i) {
        if (abort_)
          throw AbortRun{};
        const Op &op = st.ops[i];
        TimeSlot &slot = result_.slots[d][s][k * nops + i];
        ctx.slot = &slot;
        switch (op.kind) {
        case OpKind::Compute:
          if (clocked)
            mainResumes(ctx, backend);
          backend.markStart(ctx, slot);
          backend.compute(ctx, op, effectivePlannedUs(dev, op));
          backend.markEnd(ctx, slot);
          break;
        case OpKind::Send: {
          backend.markStart(ctx, slot);
          ChannelPublisher pub(*transport_, ChannelKey{d, op.peer, op.tag}, gen);
          backend.send(ctx, op, effectivePlannedUs(dev, op),
                       isLocal(op.peer) && backendOf_[op.peer] == &backend, pub);
          backend.markEnd(ctx, slot);
          break;
        }
        case OpKind::Recv:
          execRecv(ctx, backend, op, static_cast<uint32_t>(i), slot);
          break;
        case OpKind::Record:
          execRecord(ctx, backend, op, slot);
          break;
        case OpKind::Wait:
          execWait(ctx, backend, op, slot);
          break;
        case OpKind::Bubble:
          if (clocked)
            bubbleBegins(ctx, backend, op.bubble.bubble_id);
          backend.markStart(ctx, slot);
          if (op.bubble.emulate_idle)
            backend.idle(ctx, op.bubble.planned_duration_us);
          backend.markEnd(ctx, slot);
          break;
        case OpKind::Fill:
          runFill(ctx, op, backend, slot);
          break;
        case OpKind::Copy:
          backend.markStart(ctx, slot);
          backend.copy(ctx, op, effectivePlannedUs(dev, op));
          backend.markEnd(ctx, slot);
          break;
        case OpKind::Alloc:
          backend.markStart(ctx, slot);
          memoryAdd(d, static_cast<int64_t>(op.bytes));
          backend.alloc(ctx, op);
          backend.markEnd(ctx, slot);
          break;
        case OpKind::Free: {
          backend.markStart(ctx, slot);
          uint64_t bytes = bufferBytes_[d].at(op.buffer);
          memoryAdd(d, -static_cast<int64_t>(bytes));
          backend.free(ctx, op);
          backend.markEnd(ctx, slot);
          break;
        }
        }
      }
      backend.iterationEnd(ctx);
      if (participant)
        checkpointBarrier(ctx, backend);
      iterationDone(d, s, ctx.iteration);
      if (config_.verbose && st.role == PFRT_STREAM_MAIN && d + 1 == program_.devices.size()) {
        std::lock_guard<std::mutex> lock(logMutex_);
        std::fprintf(stderr, "pfrt: iteration %lld enqueued on the last device\n",
                     static_cast<long long>(ctx.iteration));
      }
    }
    backend.threadEnd(ctx);
  } catch (const AbortRun &) {
    if (began) {
      try {
        backend.threadEnd(ctx);
      } catch (...) {
      }
    }
  } catch (const Error &e) {
    fail(e);
    if (began) {
      try {
        backend.threadEnd(ctx);
      } catch (...) {
      }
    }
  } catch (const std::exception &e) {
    fail(Error(PFRT_ERROR_INTERNAL, opLocation(program_, d, s, 0) + ": " + e.what()));
  }
}

// One process per rank: the options that exclude it.
void Executor::checkRankOptions(uint32_t numDevices) const {
  if (config_.rank < 0)
    return;
  if (static_cast<uint32_t>(config_.rank) >= numDevices)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "rank " + std::to_string(config_.rank) + " is out of range: the program has " +
                    std::to_string(numDevices) + " devices (one rank per device)");
  if (config_.stage >= 0)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "stage (replay) and one process per rank exclude each other");
}

// Backends prepare the devices this process runs; true when one of them is on CUDA.
bool Executor::prepareBackends(uint32_t numDevices) {
  std::vector<uint32_t> hostDevices, cudaDevices;
  for (uint32_t d = 0; d < numDevices; ++d)
    if (isLocal(d))
      (backendOf_[d] == host_.get() ? hostDevices : cudaDevices).push_back(d);
  if (!hostDevices.empty())
    host_->prepare(program_, info_, config_, hostDevices);
  if (cuda_ && !cudaDevices.empty()) {
    cuda_->prepare(program_, info_, config_, cudaDevices);
    if (const char *how = cuda_->rankTransfer())
      result_.rankTransfer = how;
  }

  return !cudaDevices.empty();
}

// Bubble clocks for devices whose fill the host bounds; the run's bound settings.
void Executor::setupBubbleClocks(uint32_t numDevices) {
  bubbleClocks_.clear();
  bubbleClocks_.resize(numDevices);
  for (uint32_t d = 0; d < numDevices; ++d)
    if (fillOn_[d] && config_.fillBounded && backendOf_[d]->boundsOnHost()) {
      bubbleClocks_[d] = std::make_unique<BubbleClock>();
      bubbleClocks_[d]->timeScale = config_.timeScale;
      const std::vector<Op> &ops = program_.devices[d].streams[info_.devices[d].mainStream].ops;
      bool hasCompute = false;
      for (const Op &op : ops)
        hasCompute |= op.kind == OpKind::Compute;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind != OpKind::Bubble)
          continue;
        bubbleClocks_[d]->plannedUs[ops[i].bubble.bubble_id] = ops[i].bubble.planned_duration_us;
        int64_t after = 0;
        for (size_t j = (i + 1) % ops.size(); hasCompute && ops[j].kind != OpKind::Compute;
             j = (j + 1) % ops.size())
          after += ops[j].kind == OpKind::Bubble;
        bubbleClocks_[d]->chainedAfter[ops[i].bubble.bubble_id] = after;
      }
    }
  result_.fillBounded = config_.fillBounded;
  result_.fillSplit = config_.fillBounded && config_.fillSplit;
  result_.boundedOnHost = true;
  for (uint32_t d = 0; d < numDevices; ++d)
    if (fillOn_[d] && !backendOf_[d]->boundsOnHost())
      result_.boundedOnHost = false;
}

void Executor::noteDeviceBound() {
  bool any = false, all = true;
  for (uint32_t d = 0; d < fillOn_.size(); ++d)
    if (fillOn_[d] && backendOf_[d]) {
      any = true;
      all = all && backendOf_[d]->boundsOnDevice();
    }
  result_.boundedOnDevice = config_.fillBounded && any && all;
}

// Per-run state: events, buffers, the transport's channels, memory, time slots, checkpoint
// participants.
void Executor::setupRunState(uint32_t numDevices) {
  events_.clear();
  events_.resize(numDevices);
  for (uint32_t d = 0; d < numDevices; ++d)
    for (uint32_t e = 0; e < program_.devices[d].events.size(); ++e) {
      auto es = std::make_unique<EventState>();
      es->waiters = info_.devices[d].eventWaiters[e];
      es->recorded = first_;
      es->waitsDone = first_ * es->waiters;
      events_[d].push_back(std::move(es));
    }
  bufferBytes_.assign(numDevices, {});
  for (uint32_t d = 0; d < numDevices; ++d)
    for (const Stream &st : program_.devices[d].streams)
      for (const Op &op : st.ops)
        if (op.kind == OpKind::Alloc)
          bufferBytes_[d][op.buffer] = op.bytes;
  // Every channel of the program, in the same order in every process (MPI: its index is the tag).
  transport_->open(programChannels(program_), first_);

  used_.reset(new std::atomic<int64_t>[numDevices]);
  peak_.reset(new std::atomic<int64_t>[numDevices]);
  for (uint32_t d = 0; d < numDevices; ++d) {
    used_[d] = static_cast<int64_t>(program_.devices[d].desc.static_bytes);
    peak_[d] = used_[d].load();
  }

  // Only this process's devices have a timeline: in rank mode the others' come from their ranks
  // (a rank holding every device's would need the whole run's timeline in every process).
  result_.slots.assign(numDevices, {});
  for (uint32_t d = 0; d < numDevices; ++d)
    for (const Stream &st : program_.devices[d].streams)
      result_.slots[d].emplace_back(isLocal(d) ? st.ops.size() * result_.iterations : 0);

  cpParticipants_ = config_.checkpointPath.empty() ? 0 : fillStreams();
}

uint32_t Executor::fillStreams() const {
  uint32_t n = 0;
  for (uint32_t d = 0; d < program_.devices.size(); ++d)
    for (uint32_t s = 0; s < program_.devices[d].streams.size(); ++s)
      n += fillOn_[d] && info_.devices[d].streamHasFill[s];
  return n;
}

// Ranks that run another program, other iterations or other options disagree on the messages
// between them (a rank waits for a generation its peer never sends) or on what the merged report
// adds up: they used to wait out --peer-timeout (120 s) and fail with a generic message, or merge
// silently. One allGather before the start barrier compares what must agree and names it.
void Executor::checkRanksAgree() {
  auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  const std::vector<std::pair<std::string, std::string>> mine = {
      {"the program (its fingerprint)", std::to_string(programFingerprint(program_))},
      // The backend as chosen (auto resolves per machine): a CUDA rank and a host rank ran the
      // whole run and were refused at the merge.
      {"the backend (--backend, as resolved)", result_.backend},
      // How sends reach other ranks' GPUs: the NCCL ranks' setup is a collective the others
      // never join. Host ranks model every transfer (the option does not apply).
      {"--rank-transfer", result_.backend != "cuda" ? "modelled (host backend)"
                          : config_.rankTransfer == PFRT_RANK_TRANSFER_NCCL     ? "nccl"
                          : config_.rankTransfer == PFRT_RANK_TRANSFER_MODELLED ? "modelled"
                                                                                : "auto"},
      {"--checkpoint", config_.checkpointPath.empty() ? "none" : "given"},
      {"--iterations", std::to_string(config_.iterations)},
      // Profile mode first: without --profile-with-fill it turns fill off, and a rank given
      // --profile-out alone was named as running with --no-fill.
      {"profile mode (--profile-out)", config_.profile ? "on" : "off"},
      {"fill (--no-fill)", config_.fill ? "on" : "off"},
      {"--time-model", config_.modelledTime ? "modelled" : "measured"},
      {"--time-scale", number(config_.timeScale)},
      {"--fill-policy", !config_.fillBounded ? "unbounded"
                        : config_.fillSplit  ? "bounded"
                                             : "bounded-whole"},
      {"--max-dim (effective)", std::to_string(config_.maxDim)},
      // Ranks given another --compare N run other numbers of runs: the ones with fewer waited at
      // exit for ranks that started another run, a hang.
      {"--compare", config_.compareRun},
  };
  std::string encoded;
  for (const auto &kv : mine)
    encoded += kv.second + '\n';
  // Last, this rank's random number: rank 0's names the run in every rank's part (--merge checks
  // that the parts share it).
  std::random_device entropy;
  const uint64_t nonce = (uint64_t(entropy()) << 32 | entropy()) | 1;
  const std::vector<std::string> parts =
      transport_->allGather(encoded + std::to_string(nonce) + '\n');
  if (!parts.empty()) {
    const size_t last = parts[0].rfind('\n', parts[0].size() - 2);
    result_.runId = std::strtoull(parts[0].c_str() + (last == std::string::npos ? 0 : last + 1),
                                  nullptr, 10);
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].compare(0, encoded.size(), encoded) == 0)
      continue;
    std::vector<std::string> theirs;
    size_t at = 0;
    for (size_t nl; (nl = parts[r].find('\n', at)) != std::string::npos; at = nl + 1)
      theirs.push_back(parts[r].substr(at, nl - at));
    for (size_t k = 0; k < mine.size(); ++k)
      if (k >= theirs.size() || theirs[k] != mine[k].second)
        throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                    "rank " + std::to_string(r) + " runs with " + mine[k].first + " " +
                        (k < theirs.size() ? theirs[k] : "?") + ", this rank (" +
                        std::to_string(config_.rank) + ") with " + mine[k].second +
                        ": every rank must run the same program with the same options");
  }
}

// Starts the clocks together and runs one thread per local stream.
void Executor::runThreads(uint32_t numDevices) {
  // The backends' one-time costs first, outside every clock.
  host_->warmUp();
  if (cuda_)
    cuda_->warmUp();
  // One process per rank: every rank starts its clock together (the modelled times of messages
  // between ranks are relative to this common start).
  if (config_.rank >= 0)
    transport_->barrier();
  result_.runStartUs = hostNowUs();
  // Threads take a little while to start; the modelled clock starts when they all could have.
  size_t streams = 0;
  for (const Device &dev : program_.devices)
    streams += dev.streams.size();
  const double origin = result_.runStartUs + 50.0 * static_cast<double>(streams + 1);
  host_->begin(origin);
  if (cuda_)
    cuda_->begin(origin);
  transport_->begin(origin);
  if (result_.iterations > 0) {
    std::vector<std::thread> threads;
    for (uint32_t d = 0; d < numDevices; ++d)
      if (isLocal(d))
        for (uint32_t s = 0; s < program_.devices[d].streams.size(); ++s)
          threads.emplace_back(&Executor::streamThread, this, d, s);
    for (std::thread &t : threads)
      t.join();
  }
}

// Stream priorities, free memory and per-job results after the threads joined.
void Executor::collectResults(uint32_t numDevices) {
  result_.streamPriority.assign(numDevices, {});
  for (uint32_t d = 0; d < numDevices; ++d)
    for (uint32_t s = 0; s < program_.devices[d].streams.size(); ++s) {
      int prio = 0;
      result_.streamPriority[d].push_back(
          backendOf_[d]->streamPriority(d, s, prio) ? prio : INT32_MIN);
    }
  result_.minFreeBytes.assign(numDevices, 0);
  result_.minFreeKnown.assign(numDevices, false);
  result_.minFreeMeasured.assign(numDevices, false);
  for (uint32_t d = 0; d < numDevices; ++d) {
    uint64_t measured = 0;
    if (!isLocal(d))
      continue;
    if (backendOf_[d]->minFreeBytes(d, measured)) {
      result_.minFreeBytes[d] = measured;
      result_.minFreeKnown[d] = true;
      result_.minFreeMeasured[d] = true;
    } else if (program_.devices[d].desc.memory_bytes) {
      int64_t cap = static_cast<int64_t>(program_.devices[d].desc.memory_bytes);
      result_.minFreeBytes[d] = static_cast<uint64_t>(std::max<int64_t>(0, cap - peak_[d].load()));
      result_.minFreeKnown[d] = true;
    }
  }
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    JobRun &jr = *jobs_[j];
    RunResult::Job &out = result_.jobs[j];
    out.name = program_.jobs[j].name;
    out.kind = program_.jobs[j].kind;
    out.shape = jr.shape;
    out.samplesThisRun = jr.samplesThisRun;
    out.samplesCompleted = jr.baseSamples + jr.samplesThisRun;
    out.steps = jr.baseSteps + jr.stepsThisRun;
    out.checksum = jr.baseChecksum;
    out.lossSum = jr.baseLoss;
    out.chunksRun = jr.chunksRun;
    out.chunksSkipped = jr.chunksSkipped;
    out.chunksDeferred = jr.chunksDeferred;
    out.chunksSplit = jr.chunksSplit;
    out.chunksStoppedOnDevice = jr.chunksStoppedOnDevice;
    if (j < carried_.size()) {
      out.chunksPending += carried_[j].chunksPending;
      out.samplesPending += carried_[j].samplesPending;
      for (const auto &dh : carried_[j].held) {
        const int64_t held = dh.second + (end_ - first_);
        out.iterationsHeld += static_cast<uint64_t>(held);
        auto st = info_.jobs[j].streamOnDevice.find(dh.first);
        if (st != info_.jobs[j].streamOnDevice.end())
          out.samplesHeld += FillQueue::heldSamples(
              program_.devices[dh.first].streams[st->second], j, info_.jobs[j].passes,
              info_.jobs[j].stride, program_.jobs[j].samples, held, end_);
      }
    }
    for (auto &dj : jr.devices) {
      out.chunksPending += dj.second.backlog.size();
      for (const auto &fl : dj.second.flights)
        out.samplesPending += fl.second.batch;
      for (const WorkItem &w : dj.second.backlog)
        if (w.passBegin == 0)
          out.samplesPending += w.batch;
      const FillQueue &q = dj.second;
      out.iterationsHeld += static_cast<uint64_t>(q.held);
      out.samplesHeld += FillQueue::heldSamples(
          program_.devices[dj.first].streams[info_.jobs[j].streamOnDevice.at(dj.first)], j,
          info_.jobs[j].passes, info_.jobs[j].stride, program_.jobs[j].samples, q.held,
          q.loopEnd(first_));
    }
    for (auto &dj : jr.devices) {
      JobData::Accum a = dj.second.data->accumulators();
      out.checksum += a.checksum;
      out.lossSum += a.lossSum;
      if (out.kind == PFRT_FILL_TRAINING)
        out.weightsChecksum += tensorsChecksum(dj.second.data->saveWeights());
    }
  }
}

RunResult Executor::run() {
  const uint32_t numDevices = static_cast<uint32_t>(program_.devices.size());
  ownTransport_.reset();
  transport_ = config_.transport;
  if (!transport_) {
    ownTransport_ = createInProcessTransport();
    transport_ = ownTransport_.get();
  }
  checkRankOptions(numDevices);
  chooseBackends();
  result_.local.assign(numDevices, false);
  for (uint32_t d = 0; d < numDevices; ++d)
    result_.local[d] = isLocal(d);
  result_.fillEnabled = config_.fill && !config_.profile;
  result_.profile = config_.profile;
  result_.maxDim = config_.maxDim;
  result_.checkpointPath = config_.checkpointPath;
  // Rank mode: the options first, before the backends are prepared (the CUDA backend's NCCL setup
  // exchanges ids between the ranks that use NCCL only: a rank with other options would join
  // another collective) and before the checkpoint (a rank without --checkpoint would not take
  // part in the checkpoint's agreement below); then each rank's own checkpoint, at one iteration
  // for all.
  if (config_.rank >= 0)
    checkRanksAgree();
  const bool anyCuda = prepareBackends(numDevices);
  setupJobs();
  setupBubbleClocks(numDevices);
  first_ = 0;
  end_ = config_.iterations;
  loadCheckpoint();
  if (config_.rank >= 0 && !config_.checkpointPath.empty())
    agreeOnCheckpointIteration();
  // A checkpoint at or past the target: nothing to run, and the checkpoint stays as it is.
  const bool nothingToDo = first_ >= end_;
  // At most 10^6 iterations per run (a rank's part and the merge hold a run's count), in one
  // process as with ranks; the iteration it starts at is not bounded (a resume past 10^6).
  if (!nothingToDo && end_ - first_ > static_cast<int64_t>(kMaxIterations))
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "--iterations " + std::to_string(end_) + " from iteration " +
                    std::to_string(first_) + " would run " + std::to_string(end_ - first_) +
                    " iterations; a run has at most " + std::to_string(kMaxIterations) +
                    ": run fewer and resume from the checkpoint");
  result_.firstIteration = first_;
  if (nothingToDo)
    end_ = first_;
  result_.iterations = static_cast<uint32_t>(end_ - first_);
  planSamples();
  setupRunState(numDevices);
  runThreads(numDevices);
  try {
    if (hasError_ && cuda_ && anyCuda)
      cuda_->runFailed();
    if (host_)
      host_->finish();
    if (cuda_ && anyCuda)
      cuda_->finish();
    if (!hasError_)
      transport_->finish();
  } catch (const Error &e) {
    fail(e);
  }
  if (hasError_)
    throw Error(errorStatus_, errorMessage_);
  result_.hostLagUs = host_ ? host_->lagUs() : 0;
  noteDeviceBound();
  result_.emulatedSpeedRatio = host_ ? host_->emulatedSpeedRatio() : 0;
  result_.iterationsRequested = result_.iterations;
  if (stopAt_ < end_) {
    // Stopped on request: every stream finished [first_, stopAt_) and nothing after it.
    end_ = stopAt_;
    result_.stopped = true;
    result_.iterations = static_cast<uint32_t>(end_ - first_);
    // The timeline holds the iterations run, not the ones asked for (a rank's part carries it).
    for (uint32_t d = 0; d < result_.slots.size(); ++d)
      for (uint32_t s = 0; s < result_.slots[d].size(); ++s)
        if (!result_.slots[d][s].empty()) {
          result_.slots[d][s].resize(program_.devices[d].streams[s].ops.size() *
                                     result_.iterations);
          result_.slots[d][s].shrink_to_fit();
        }
    planSamples();
  }
  if (!config_.checkpointPath.empty() && !nothingToDo && (cpParticipants_ == 0 || end_ == first_))
    writeCheckpoint(end_);
  collectResults(numDevices);
  return std::move(result_);
}

} // namespace pfrt
