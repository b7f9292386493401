// libFuzzer target: a text-format StreamProgram through the runtime's loader (shared collector,
// limits, builder calls, every validation rule) and the run-size check.
#include "runtime/ProgramIO.h"
#include "runtime/pfrt.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pfrt_program *p = nullptr;
  if (pfrt_program_load_memory(data, size, "fuzz.pbtxt", &p) == PFRT_OK) {
    try {
      pfrt::checkRunFits(p->program, p->program.iterations ? p->program.iterations : 1);
    } catch (const pfrt::Error &) {
    }
    pfrt_program_destroy(p);
  }
  return 0;
}
