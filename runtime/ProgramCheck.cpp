// ProgramCheck.h: pfrt_program_load's own steps (ProgramIO.cpp), their Error turned into a value.
#include "runtime/ProgramCheck.h"

#include "proto/stream_program.pb.h"
#include "runtime/Program.h"
#include "runtime/ProgramIO.h"

#include <new>

namespace pfrt {
namespace {

// The source name the loader prefixes to every message; taken off again for the caller.
const std::string kSource = "StreamProgram";

ProgramRefusal refusalOf(const Error &e) {
  std::string message = e.what();
  const std::string prefix = kSource + ": ";
  if (message.compare(0, prefix.size(), prefix) == 0)
    message.erase(0, prefix.size());
  return {message, e.site()};
}

// Runs one step of the load; the refusal it throws, or the failure to run it, as a value.
template <class F> std::optional<ProgramRefusal> refusalFrom(F &&step) {
  try {
    step();
    return std::nullopt;
  } catch (const Error &e) {
    return refusalOf(e);
  } catch (const std::bad_alloc &) {
    return ProgramRefusal{"out of memory while checking the program", {}};
  } catch (const std::exception &e) {
    return ProgramRefusal{std::string("internal error while checking the program: ") + e.what(),
                          {}};
  }
}

} // namespace

std::optional<ProgramRefusal> checkProgram(const pipefill::rt::StreamProgram &program) {
  return refusalFrom([&] {
    checkProgramLimits(program, kSource, nullptr);
    ProgramPtr built(buildFromProto(program, kSource));
  });
}

struct ProgramChecker::State {
  ProgramPtr program;
  uint32_t devices = 0;
  std::optional<ProgramRefusal> refusal;
};

ProgramChecker::ProgramChecker() : state_(std::make_unique<State>()) {}
ProgramChecker::~ProgramChecker() = default;

void ProgramChecker::begin(const pipefill::rt::StreamProgram &head) {
  state_->refusal = refusalFrom([&] {
    checkProgramLimits(head, kSource, nullptr);
    state_->program = beginProgram(head, kSource);
  });
}

void ProgramChecker::addDevice(const pipefill::rt::DeviceProgram &device) {
  if (state_->refusal || !state_->program)
    return;
  state_->refusal = refusalFrom([&] {
    checkDeviceLimits(device, state_->devices, kSource);
    addDeviceProgram(state_->program.get(), device, kSource);
  });
  ++state_->devices;
}

bool ProgramChecker::refused() const { return state_->refusal.has_value(); }

std::optional<ProgramRefusal> ProgramChecker::finish() {
  if (!state_->refusal && state_->program)
    state_->refusal = refusalFrom([&] { finishProgram(*state_->program, kSource); });
  else if (!state_->refusal)
    state_->refusal = ProgramRefusal{"internal error: ProgramChecker::begin was not called", {}};
  state_->program.reset();
  return state_->refusal;
}

} // namespace pfrt
