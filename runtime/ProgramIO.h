// The interpreter: StreamProgram protobuf <-> builder API.
#ifndef PFRT_PROGRAM_IO_H
#define PFRT_PROGRAM_IO_H

#include "runtime/Program.h"
#include "runtime/pfrt_tables.h"

#include <google/protobuf/text_format.h>

#include <memory>
#include <string>

namespace pipefill::rt {
class DeviceProgram;
class StreamProgram;
}

namespace pfrt {

// Parses a StreamProgram (text or binary; `sourceName` decides by extension, else the content)
// and replays it through the pfrt_* builder calls into a new program. Throws Error naming the
// source (and line:column for text-format errors).
pfrt_program *loadProgram(const std::string &data, const std::string &sourceName);

// Drives the builder API from a parsed StreamProgram (beginProgram, addDeviceProgram for each
// device, finishProgram).
pfrt_program *buildFromProto(const pipefill::rt::StreamProgram &proto, const std::string &sourceName);

// The steps of buildFromProto, for a program that arrives a device at a time (ProgramCheck.h).
struct ProgramDeleter {
  void operator()(pfrt_program *p) const { pfrt_program_destroy(p); }
};
using ProgramPtr = std::unique_ptr<pfrt_program, ProgramDeleter>;
// Every field but the devices (which `proto` need not hold).
ProgramPtr beginProgram(const pipefill::rt::StreamProgram &proto, const std::string &sourceName);
// The next device: its streams, events and ops.
void addDeviceProgram(pfrt_program *program, const pipefill::rt::DeviceProgram &device,
                      const std::string &sourceName);
// validate(), its refusal prefixed with the source.
void finishProgram(const pfrt_program &program, const std::string &sourceName);

// The field limits (support/Limits.cpp) that loadProgram checks before building: of a whole
// program (`tree`: the text's positions, or null), or of device `index` alone (with the count of
// devices; the checks of the whole program are those of its parts).
void checkProgramLimits(const pipefill::rt::StreamProgram &proto, const std::string &sourceName,
                        const google::protobuf::TextFormat::ParseInfoTree *tree);
void checkDeviceLimits(const pipefill::rt::DeviceProgram &device, uint32_t index,
                       const std::string &sourceName);
// Replays static tables (runtime/pfrt_tables.h, what --to-cpp generates); see Tables.cpp.
pfrt_program *buildFromTables(const pfrt_program_tables &tables);

// Converts the internal program back to the protobuf.
void toProto(const Program &program, pipefill::rt::StreamProgram *proto);

// Stable hash of the program (iterations excluded), used to match checkpoints.
uint64_t programFingerprint(const Program &program);

// Reads a whole file; throws Error(PFRT_ERROR_IO) naming it.
std::string readFile(const std::string &path);
// Writes a whole file (a regular file through a temporary one and a rename: a reader never sees
// it half written); throws Error(PFRT_ERROR_IO) naming it.
void writeFile(const std::string &path, const std::string &data);

} // namespace pfrt

#endif // PFRT_PROGRAM_IO_H
