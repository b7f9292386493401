// Built instead of CudaBackend.cu when the build has no CUDA compiler.
#include "runtime/Backend.h"

namespace pfrt {

std::unique_ptr<Backend> createCudaBackend() { return nullptr; }
int cudaDeviceCount() { return 0; }
CudaHotPathStats cudaHotPathStats() { return {}; }

} // namespace pfrt
