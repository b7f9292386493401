// PFRT_HOST_DEVICE: plain C++ that CUDA kernels call too (nvcc sees __host__ __device__; host
// compilers see nothing), for the runtime's small shared rules (CudaGemmPlan.h, DeviceGate.h).
#ifndef PFRT_HOST_DEVICE_H
#define PFRT_HOST_DEVICE_H

#if defined(__CUDACC__)
#define PFRT_HOST_DEVICE __host__ __device__
#else
#define PFRT_HOST_DEVICE
#endif

#endif // PFRT_HOST_DEVICE_H
