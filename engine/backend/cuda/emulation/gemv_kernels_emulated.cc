// The CUDA kernels of gemv_kernels.cu compiled as C++ for the CPU emulation
// (cuda_emulation.h); built with TRIBUTARY_CUDA_EMULATION only.
#include "engine/backend/cuda/gemv_kernels.cu"
