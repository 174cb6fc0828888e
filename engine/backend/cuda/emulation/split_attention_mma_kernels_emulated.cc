// The CUDA kernels of split_attention_mma_kernels.cu compiled as C++ for the
// CPU emulation (cuda_emulation.h); built with TRIBUTARY_CUDA_EMULATION only.
#include "engine/backend/cuda/split_attention_mma_kernels.cu"
