// The CUDA kernels of sampling_kernels.cu compiled as C++ for the CPU emulation
// (cuda_emulation.h); built with TRIBUTARY_CUDA_EMULATION only.
#include "engine/backend/cuda/sampling_kernels.cu"
