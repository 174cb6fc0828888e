// The CUDA kernels of delta_rule_kernels.cu compiled as C++ for the CPU emulation
// (cuda_emulation.h); built with TRIBUTARY_CUDA_EMULATION only.
#include "engine/backend/cuda/delta_rule_kernels.cu"
