// The runtime's load-time refusal of a StreamProgram, for a caller that never catches exceptions
// (the compiler: pipefill-translate --to-stream-program / --to-cpp and pipefill-compile refuse
// what pipefill-run would refuse, at the IR op that made the offending instruction). The check is
// pfrt_program_load's own code (ProgramIO.cpp: the field limits, the builder calls, validate()),
// not a second copy of its rules. Part of pfrt_program: plain C++, no MLIR, nothing thrown out.
#ifndef PFRT_PROGRAM_CHECK_H
#define PFRT_PROGRAM_CHECK_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace pipefill::rt {
class DeviceProgram;
class StreamProgram;
} // namespace pipefill::rt

namespace pfrt {

// What a refusal points at, as indices into the StreamProgram's repeated fields; -1 where it is
// not that precise. An op: device, stream and op set; a stream: device and stream; a device:
// device only; a fill job: job (and layer for one of its layers); else the program.
struct ProgramSite {
  int64_t device = -1, stream = -1, op = -1;
  int64_t job = -1, layer = -1;
};

struct ProgramRefusal {
  // The runtime's message without the source prefix, e.g. "device 0 stream 1 ('fill1') op 0
  // (wait): waits on event 0 which is never recorded".
  std::string message;
  ProgramSite site;
};

// Whether pfrt_program_load would accept a file holding `program`; the refusal if not. (What it
// checks on the file itself, its size and parse, is the writer's business.)
std::optional<ProgramRefusal> checkProgram(const pipefill::rt::StreamProgram &program);

// The same check for a program written a device at a time, never whole in memory: begin() with
// every field but the devices, then each device in order, then finish(). It refuses the programs
// checkProgram refuses (of a program with several defects it may name another one first: the
// field limits are checked a part at a time). After the first refusal the rest is ignored and
// finish() returns it.
class ProgramChecker {
public:
  ProgramChecker();
  ~ProgramChecker();
  ProgramChecker(const ProgramChecker &) = delete;
  ProgramChecker &operator=(const ProgramChecker &) = delete;

  void begin(const pipefill::rt::StreamProgram &head);
  void addDevice(const pipefill::rt::DeviceProgram &device);
  // Whether a part added so far was refused (finish() says why).
  bool refused() const;
  std::optional<ProgramRefusal> finish();

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace pfrt

#endif // PFRT_PROGRAM_CHECK_H
