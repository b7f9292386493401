// The runtime built without MPI (CMake did not find it): rank mode reports that clearly.
#include "runtime/Transport.h"

namespace pfrt {

std::unique_ptr<Transport> createMpiTransport(int, int, double) {
  throw Error(PFRT_ERROR_UNAVAILABLE,
              "one process per rank needs the MPI transport, but this runtime was built without "
              "MPI (CMake found no MPI: install libopenmpi-dev with scripts/setup.sh and "
              "reconfigure)");
}

bool mpiTransportCompiled() { return false; }

void mpiMarkFailed() {}

void mpiSetGatherChunkForTesting(uint64_t) {}

} // namespace pfrt
