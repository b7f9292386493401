// The interpreter: StreamProgram protobuf <-> builder API.
#ifndef PFRT_PROGRAM_IO_H
#define PFRT_PROGRAM_IO_H

#include "runtime/Program.h"
#include "runtime/pfrt_tables.h"

#include <string>

namespace pipefill::rt {
class StreamProgram;
}

namespace pfrt {

// Parses a StreamProgram (text or binary; `sourceName` decides by extension, else the content)
// and replays it through the pfrt_* builder calls into a new program. Throws Error naming the
// source (and line:column for text-format errors).
pfrt_program *loadProgram(const std::string &data, const std::string &sourceName);

// Drives the builder API from a parsed StreamProgram.
pfrt_program *buildFromProto(const pipefill::rt::StreamProgram &proto, const std::string &sourceName);
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
