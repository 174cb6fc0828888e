// The CUDA runtime, cuBLAS and cuBLASLt headers, or, in a build with
// TRIBUTARY_CUDA_EMULATION, the CPU emulation of the subset this backend uses
// (emulation/cuda_emulation.h): the same backend and kernel sources then run
// on the CPU, so their logic is tested on machines without a GPU.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_API_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_API_H_

#if defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/emulation/cuda_emulation.h"
#else
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_API_H_
