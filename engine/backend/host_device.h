// TRIBUTARY_HOST_DEVICE marks a function that host code and CUDA kernels
// both call (headers shared with the .cu files); plain C++ elsewhere.
#ifndef TRIBUTARY_ENGINE_BACKEND_HOST_DEVICE_H_
#define TRIBUTARY_ENGINE_BACKEND_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define TRIBUTARY_HOST_DEVICE __host__ __device__
#else
#define TRIBUTARY_HOST_DEVICE
#endif

#endif  // TRIBUTARY_ENGINE_BACKEND_HOST_DEVICE_H_
