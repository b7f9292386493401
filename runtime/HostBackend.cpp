// Host backend: a thread per stream, condition variables as events (in the executor), in-process
// channels for send/recv, CPU BLAS for the fill workloads.
//
// Two time models (pfrt_time_model):
// - MEASURED (default): a device that runs for real executes its main-stage compute as real CPU
//   work (host::runWorkUnits, calibrated once per process to the planned time) timed on the
//   clock; fill chunks (including GEMM_CHAIN stand-ins, as calibrated work units) are real and
//   timed on the clock. Sends, receives, copies and self-idling bubbles stay MODELLED at their
//   planned times; a device emulated in replay mode runs entirely at its planned times.
// - MODELLED (fast, for tests): main compute, transfers, copies and idle bubbles last exactly
//   their planned duration on a scaled clock; only fill kernels are real.
//
// Each stream thread carries its *intended* time: a modelled op ends at intended + duration and the
// thread sleeps until then; waits and receives move the intended time to the record's / send's
// intended time; real work starts no earlier than the intended time and moves it to the clock when
// it ends. The timeline records intended times for modelled ops and clock times for real work, so
// a loaded host never distorts the modelled parts; how far threads lagged behind the model is
// reported as lag. In MODELLED mode a fill chunk made only of GEMM_CHAIN layers is a modelled
// stand-in (planned time on the scaled clock). Reports divide by time_scale.
#include "runtime/Backend.h"
#include "runtime/FillPredictor.h"
#include "runtime/HostKernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <deque>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>
#include <cstring>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pfrt {
namespace {

void sleepUntilUs(double deadlineUs) {
  double now = hostNowUs();
  while (now < deadlineUs) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(deadlineUs - now));
    now = hostNowUs();
  }
}

// Host replay (one stage real, the others emulated): the emulated stages stand for the same
// hardware as the real one, so an emulated compute lasts its planned time x the real stage's
// measured / planned ratio for that compute kind (the median of its last kWindow computes of the
// kind; before the first, of any kind; before any, 1). A real stage running 6% over its plan thus
// stretches the emulated pipeline by 6%, as it would stretch a pipeline of stages like it, instead
// of falling behind peers that keep the plan and losing its bubbles to them.
class PeerSpeed {
public:
  void record(pfrt_compute_kind kind, double ratio) {
    if (!(ratio > 0) || !std::isfinite(ratio))
      return;
    std::lock_guard<std::mutex> lock(m_);
    push(byKind_[slot(kind)], ratio);
    push(all_, ratio);
  }
  double ratio(pfrt_compute_kind kind) const {
    std::lock_guard<std::mutex> lock(m_);
    const std::deque<double> &w = byKind_[slot(kind)];
    if (!w.empty())
      return sortedMedian(sortedSample(w));
    return all_.empty() ? 1.0 : sortedMedian(sortedSample(all_));
  }
  // Whether any compute was timed (before that, every ratio is the default 1).
  bool any() const {
    std::lock_guard<std::mutex> lock(m_);
    return !all_.empty();
  }
  // Of any kind.
  double overall() const {
    std::lock_guard<std::mutex> lock(m_);
    return all_.empty() ? 1.0 : sortedMedian(sortedSample(all_));
  }

private:
  static constexpr size_t kWindow = 16;
  static constexpr size_t kKinds = 8;
  static size_t slot(pfrt_compute_kind kind) {
    return std::min(static_cast<size_t>(kind), kKinds - 1);
  }
  static void push(std::deque<double> &w, double v) {
    w.push_back(v);
    if (w.size() > kWindow)
      w.pop_front();
  }
  mutable std::mutex m_;
  std::array<std::deque<double>, kKinds> byKind_;
  std::deque<double> all_;
};

struct HostStreamState {
  double intended = 0;   // host-clock microseconds
  double realStart = 0;  // clock at the current op's start
  bool realWork = false; // the current op did real work: it is timed on the real clock
  double workStart = 0, workEnd = 0; // the last fill chunk (modelled or clock times)
};

class HostBatch : public BatchData {
public:
  std::vector<float> act; // activations, or the gradient during a training backward
  double loss = 0;
  std::vector<std::vector<float>> stashX, stashH;

  std::vector<std::vector<float>> save() override {
    std::vector<std::vector<float>> out;
    out.push_back(act);
    out.push_back({static_cast<float>(loss)});
    for (const auto &v : stashX)
      out.push_back(v);
    for (const auto &v : stashH)
      out.push_back(v);
    return out;
  }
};

class HostJobData : public JobData {
public:
  HostJobData(const JobShape &shape, bool measured) : shape_(shape), measured_(measured) {
    for (uint32_t l = 0; l < shape.numLayers(); ++l)
      weights_.push_back(initLayerWeights(shape, l));
  }

  uint32_t run(StreamCtx &ctx, std::unique_ptr<BatchData> &batchPtr,
               const FillExec &ex) override {
    HostStreamState &st = *static_cast<HostStreamState *>(ctx.backendData);
    const uint32_t L = shape_.numLayers();
    // A chunk of calibrated stand-ins only is modelled like main compute (planned time on the
    // scaled clock from the stream's intended time); real layers are timed on the real clock.
    const bool allChain = !measured_ && gemmChainOnly(shape_, ex.passBegin, ex.passEnd);
    if (!allChain)
      st.realWork = true;
    st.workStart = allChain ? st.intended : hostNowUs();
    auto standIn = [&](const LayerShape &ls, double plannedUs) {
      const double us = plannedUs * ex.timeScale;
      if (measured_) {
        // A fixed amount of calibrated work: contention makes it take longer, as it would.
        host::runWorkUnits(host::workUnitsFor(us));
      } else if (allChain) {
        st.intended += us;
        emulateUntil(ls, st.intended);
      } else {
        emulateUntil(ls, hostNowUs() + us);
      }
    };
    const bool training = shape_.kind == PFRT_FILL_TRAINING;
    if (ex.begins || !batchPtr) {
      auto b = std::make_unique<HostBatch>();
      b->act.resize(shape_.inputElems(ex.batch));
      makeInput(shape_, ex.sampleBegin, ex.batch, b->act.data());
      if (training) {
        b->stashX.resize(L);
        b->stashH.resize(L);
      }
      batchPtr = std::move(b);
    }
    HostBatch &b = static_cast<HostBatch &>(*batchPtr);
    if (ex.activationsHost) {
      // Parked in host memory between chunks: the host backend models the round trip as a copy.
      std::vector<float> staged(b.act);
      b.act.swap(staged);
    }
    const int rows = static_cast<int>(ex.batch * shape_.rows);
    uint32_t end = ex.passEnd;
    for (uint32_t p = ex.passBegin; p < ex.passEnd; ++p) {
      if (p > ex.passBegin && ex.keepGoing && !ex.keepGoing(p)) {
        end = p;
        break;
      }
      if (p < L) {
        const LayerShape &ls = shape_.layers[p];
        std::vector<std::vector<float>> staged;
        const std::vector<std::vector<float>> *w = &weights_[p];
        if (ex.weightsStreamed) {
          staged = weights_[p]; // "copy from pinned host memory"
          w = &staged;
        }
        switch (ls.kind) {
        case PFRT_LAYER_ENCODER: {
          std::vector<float> y(b.act.size());
          host::encoderForward(false, ls, host::encoderWeights(*w), b.act.data(), y.data(),
                               static_cast<int>(ex.batch));
          b.act.swap(y);
          break;
        }
        case PFRT_LAYER_MLP: {
          std::vector<float> hpre(size_t(rows) * ls.mid), y(size_t(rows) * ls.out);
          host::mlpForward(false, ls, (*w)[0].data(), (*w)[1].data(), b.act.data(), hpre.data(),
                           y.data(), rows);
          if (training) {
            b.stashX[p] = std::move(b.act);
            b.stashH[p] = std::move(hpre);
          }
          b.act = std::move(y);
          break;
        }
        case PFRT_LAYER_GEMM_CHAIN:
          standIn(ls, ls.usPerSample * ex.batch);
          break;
        }
        if (training && p == L - 1) {
          std::vector<float> target(b.act.size()), dy(b.act.size());
          makeTarget(shape_, ex.sampleBegin, ex.batch, target.data());
          b.loss = host::mseLoss(b.act.data(), target.data(), dy.data(), b.act.size(),
                                 static_cast<int>(ex.batch));
          b.act.swap(dy);
        }
      } else {
        const uint32_t l = 2 * L - 1 - p;
        const LayerShape &ls = shape_.layers[l];
        if (ls.kind == PFRT_LAYER_MLP) {
          std::vector<std::vector<float>> &w = weights_[l];
          std::vector<float> dw1(w[0].size()), dw2(w[1].size());
          std::vector<float> dx(l > 0 ? size_t(rows) * ls.in : 0);
          host::mlpBackward(false, ls, w[0].data(), w[1].data(), b.stashX[l].data(),
                            b.stashH[l].data(), b.act.data(), l > 0 ? dx.data() : nullptr,
                            dw1.data(), dw2.data(), rows);
          host::sgdUpdate(w[0].data(), dw1.data(), w[0].size(), shape_.learningRate);
          host::sgdUpdate(w[1].data(), dw2.data(), w[1].size(), shape_.learningRate);
          b.act.swap(dx);
          b.stashX[l].clear();
          b.stashH[l].clear();
        } else {
          standIn(ls, ls.backwardUsPerSample * ex.batch);
        }
      }
    }
    st.workEnd = allChain ? st.intended : hostNowUs();
    if (!allChain) // real work moves the stream's time to the clock now, not only at markEnd, so
      st.intended = std::max(st.intended, st.workEnd); // the bound sees it before the next chunk
    if (ex.completes && end == ex.passEnd) {
      if (training) {
        lossSum_ += b.loss;
        checksum_ += b.loss;
      } else {
        checksum_ += outputChecksum(shape_, ex.sampleBegin, ex.batch, b.act.data());
      }
    }
    return end;
  }

  Accum accumulators() override { return {checksum_, lossSum_}; }

  std::vector<std::vector<float>> saveWeights() override {
    std::vector<std::vector<float>> out;
    for (const auto &layer : weights_)
      for (const auto &t : layer)
        out.push_back(t);
    return out;
  }

  void loadWeights(const std::vector<std::vector<float>> &w) override {
    size_t k = 0;
    for (auto &layer : weights_)
      for (auto &t : layer) {
        if (k >= w.size() || w[k].size() != t.size())
          throw Error(PFRT_ERROR_PARSE, "checkpoint: fill-job weights do not match the job's "
                                        "layer shapes");
        t = w[k++];
      }
  }

  std::unique_ptr<BatchData> loadBatch(const std::vector<std::vector<float>> &t,
                                       uint32_t batch) override {
    const uint32_t L = shape_.numLayers();
    auto b = std::make_unique<HostBatch>();
    if (t.size() < 2)
      throw Error(PFRT_ERROR_PARSE, "checkpoint: malformed in-flight batch");
    (void)batch;
    b->act = t[0];
    b->loss = t[1].empty() ? 0 : t[1][0];
    if (shape_.kind == PFRT_FILL_TRAINING) {
      if (t.size() != 2 + 2 * size_t(L))
        throw Error(PFRT_ERROR_PARSE, "checkpoint: malformed in-flight training batch");
      b->stashX.assign(t.begin() + 2, t.begin() + 2 + L);
      b->stashH.assign(t.begin() + 2 + L, t.end());
    }
    return b;
  }

private:
  // GEMM_CHAIN stand-in: real GEMMs until the host clock reaches deadlineUs (at least one).
  void emulateUntil(const LayerShape &ls, double deadlineUs) {
    const int n = static_cast<int>(ls.dim);
    if (chainA_.size() != size_t(n) * n) {
      chainA_.assign(size_t(n) * n, 0.001f);
      chainB_.assign(size_t(n) * n, 0.001f);
      chainC_.assign(size_t(n) * n, 0.0f);
    }
    const double deadline = deadlineUs;
    do {
      host::gemm(false, false, false, n, n, n, 1.0f, chainA_.data(), n, chainB_.data(), n, 0.0f,
                 chainC_.data(), n);
    } while (hostNowUs() < deadline);
  }

  JobShape shape_;
  bool measured_ = false;
  std::vector<std::vector<std::vector<float>>> weights_; // [layer][tensor]
  std::vector<float> chainA_, chainB_, chainC_;
  double checksum_ = 0, lossSum_ = 0;
};

class HostBackend : public Backend {
public:
  std::string name() const override { return "host"; }
  bool measuresTime() const override { return !config_.modelledTime; }

  void prepare(const Program &program, const ProgramInfo &info, const RunConfig &config,
               const std::vector<uint32_t> &devices) override {
    (void)program;
    (void)devices;
    config_ = config;
    waiters_.clear();
    for (const ProgramInfo::DeviceInfo &d : info.devices)
      waiters_.push_back(d.eventWaiters);
    host::initBlas();
    if (!config_.modelledTime)
      host::workUnitUs(); // calibrate before the clock starts (once per process)
    start_ = hostNowUs();
  }
  void begin(double originUs) override { start_ = originUs; }
  void threadBegin(StreamCtx &ctx) override {
    // Pinning may fail (a CPU that does not exist): before the state is allocated, since
    // threadEnd does not run for a thread whose threadBegin threw.
    const bool real = isReal(ctx.device);
    const bool fill = ctx.s->role != PFRT_STREAM_MAIN;
    const int32_t pin = fill && config_.fillCpu >= 0 ? config_.fillCpu : config_.cpu;
    if (real && pin >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (pin < CPU_SETSIZE)
        CPU_SET(pin, &set);
      if (pin >= CPU_SETSIZE || pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                    std::string("cannot pin ") + (fill ? "fill " : "") +
                        "stream threads to CPU " + std::to_string(pin));
    }
    if (fill && config_.fillIdlePriority && real) {
      // The lowest scheduling class: runs only when main has nothing to run on the core. (Only
      // where main compute is real: in the modelled model there is no contention to protect.)
      sched_param param{};
      if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0)
        setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    }
    auto *state = new HostStreamState;
    state->intended = start_;
    ctx.backendData = state;
  }
  void threadEnd(StreamCtx &ctx) override {
    delete static_cast<HostStreamState *>(ctx.backendData);
    ctx.backendData = nullptr;
  }
  void markStart(StreamCtx &ctx, TimeSlot &slot) override {
    HostStreamState &st = state(ctx);
    st.realStart = hostNowUs();
    slot.start = st.intended;
  }
  void markEnd(StreamCtx &ctx, TimeSlot &slot) override {
    HostStreamState &st = state(ctx);
    const double now = hostNowUs();
    if (st.realWork) {
      // Real work (fill chunks, a framework's compute) is timed on the clock.
      slot.start = std::max(st.realStart, slot.start);
      slot.end = now;
      st.intended = std::max(st.intended, now);
      st.realWork = false;
    } else {
      slot.end = st.intended;
      double lag = now - st.intended;
      double seen = lag_.load();
      while (lag > seen && !lag_.compare_exchange_weak(seen, lag)) {
      }
    }
  }
  double lagUs() const override { return lag_.load(); }
  double emulatedSpeedRatio() const override {
    // 0 (the peers kept their planned times) until a compute was timed here.
    return config_.replayScalesPeers && peerSpeed_.any() ? peerSpeed_.overall() : 0;
  }

  void compute(StreamCtx &ctx, const Op &op, double plannedUs) override {
    if (isReal(ctx.device)) {
      HostStreamState &st = state(ctx);
      sleepUntilUs(st.intended); // inputs are (modelled to be) there
      const double start = hostNowUs();
      st.realStart = std::max(st.realStart, start);
      st.realWork = true;
      const double us = plannedUs * config_.timeScale;
      // A framework's compute (compute_fn; refused with the modelled time model) replaces the
      // calibrated chain and is timed the same way; emulated devices hold their planned time.
      if (config_.computeFn)
        config_.computeFn(config_.computeUser, ctx.device, op.compute, op.microbatch, op.chunk,
                          plannedUs, nullptr);
      else
        host::runWorkUnits(host::workUnitsFor(us));
      if (us > 0)
        peerSpeed_.record(op.compute, (hostNowUs() - start) / us);
      return;
    }
    hold(ctx, scalesWithRealStage(ctx.device) ? plannedUs * peerSpeed_.ratio(op.compute)
                                              : plannedUs);
  }
  // Measured: the clock (or the intended time if that is later). Modelled: the intended time
  // alone, so the bubble bound decides on the modelled clock and a loaded machine (threads
  // lagging the clock) does not change which chunks run.
  double streamNowUs(StreamCtx &ctx) override {
    if (config_.modelledTime)
      return state(ctx).intended;
    return std::max(hostNowUs(), state(ctx).intended);
  }
  double fillThreadCpuUs() override { return host::threadCpuUs(); }
  bool lastWorkSpan(StreamCtx &ctx, double &start, double &end) override {
    HostStreamState &st = state(ctx);
    start = st.workStart;
    end = st.workEnd;
    return true;
  }
  void idle(StreamCtx &ctx, double plannedUs) override { hold(ctx, plannedUs); }
  void record(StreamCtx &ctx, uint32_t event, int64_t gen) override {
    if (waiters_[ctx.device][event] == 0)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    eventTimes_[{ctx.device, event, gen}] = {state(ctx).intended, 0};
  }
  void wait(StreamCtx &ctx, uint32_t event, int64_t gen) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = eventTimes_.find({ctx.device, event, gen});
    if (it == eventTimes_.end())
      return;
    HostStreamState &st = state(ctx);
    st.intended = std::max(st.intended, it->second.first);
    if (++it->second.second >= waiters_[ctx.device][event])
      eventTimes_.erase(it);
  }
  void send(StreamCtx &ctx, const Op &, double plannedUs, bool, Publisher &publisher) override {
    // Sends are asynchronous, as the compiler's simulation assumes (a copy
    // engine / communication stream moves the data): the sending stream goes
    // on at once and the data is ready planned_us later at the receiver.
    Message m;
    m.readyUs = state(ctx).intended + plannedUs * config_.timeScale;
    publisher.publish(m);
  }
  void recv(StreamCtx &ctx, const Op &, const Message &message) override {
    HostStreamState &st = state(ctx);
    // A message from a GPU carries no intended time: it is there now.
    double ready = message.readyUs >= 0 ? message.readyUs : hostNowUs();
    st.intended = std::max(st.intended, ready);
  }
  void copy(StreamCtx &ctx, const Op &, double plannedUs) override { hold(ctx, plannedUs); }
  void alloc(StreamCtx &, const Op &) override {}
  void free(StreamCtx &, const Op &) override {}
  std::unique_ptr<JobData> createJob(uint32_t device, uint32_t, const JobShape &shape) override {
    return std::make_unique<HostJobData>(shape, isReal(device));
  }
  void iterationEnd(StreamCtx &) override {}
  void syncStream(StreamCtx &) override {}
  void finish() override {}

private:
  // The device runs real main compute (measured time model, not emulated).
  bool isReal(uint32_t device) const {
    return !config_.modelledTime &&
           !(device < config_.emulated.size() && config_.emulated[device]);
  }
  // An emulated device of a host replay, whose compute follows the real stage's speed (PeerSpeed).
  bool scalesWithRealStage(uint32_t device) const {
    return !config_.modelledTime && config_.replayScalesPeers &&
           device < config_.emulated.size() && config_.emulated[device];
  }
  static HostStreamState &state(StreamCtx &ctx) {
    return *static_cast<HostStreamState *>(ctx.backendData);
  }
  // The op lasts plannedUs (modelled) from the stream's intended time.
  void hold(StreamCtx &ctx, double plannedUs) {
    HostStreamState &st = state(ctx);
    if (plannedUs > 0)
      st.intended += plannedUs * config_.timeScale;
    sleepUntilUs(st.intended);
  }

  RunConfig config_;
  PeerSpeed peerSpeed_;
  double start_ = 0;
  std::atomic<double> lag_{0};
  std::vector<std::vector<uint32_t>> waiters_;
  std::mutex mutex_;
  // (device, event, generation) -> (intended record time, waits served)
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, std::pair<double, uint32_t>> eventTimes_;
};

} // namespace

std::unique_ptr<Backend> createHostBackend() { return std::make_unique<HostBackend>(); }

} // namespace pfrt
