// Device-side helpers shared by the CUDA kernels: element loads and stores in
// any ElementType (computing in f32 always), warp and block reductions, and
// the launch geometry. Included by the .cu files only.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_COMMON_CUH_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_COMMON_CUH_

#if defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/emulation/cuda_emulation.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include <climits>
#include <cstdint>
#include <tuple>
#include <utility>

#include "engine/backend/cuda/device_layout.h"
#include "engine/backend/cuda/launch_recorder.h"
#include "engine/backend/cuda/programmatic_launch.h"
#include "engine/backend/element_type.h"

namespace tributary {
namespace cuda {

// kernel<<<grid, block, 0, stream>>>(params…), with the programmatic
// dependent launch attribute where the stream has it on
// (programmatic_launch.h), or its CPU emulation (which runs grids one after
// another either way).
template <typename... Params>
void IssueKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                 cudaStream_t stream, const Params&... params) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  ::tributary::cuda_emulation::Launch(kernel, grid, block, stream)(params...);
#else
  if (ProgrammaticLaunch(stream)) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    // An error is left for the caller's launch check (cudaGetLastError).
    (void)cudaLaunchKernelEx(&config, kernel, params...);
    return;
  }
  kernel<<<grid, block, 0, stream>>>(params...);
#endif
}

// One launch: issued at once, or, while a LaunchRecorder is active on this
// thread (a CUDA graph region), recorded with its exact arguments.
template <typename... Params>
struct KernelLaunch {
  void (*kernel)(Params...);
  dim3 grid, block;
  cudaStream_t stream;

  template <typename... Args>
  void operator()(Args&&... args) const {
    std::tuple<Params...> params(Params(std::forward<Args>(args))...);
    LaunchRecorder* recorder = ActiveLaunchRecorder();
    if (recorder == nullptr) {
      std::apply([&](const Params&... p) { IssueKernel(kernel, grid, block, stream, p...); },
                 params);
      return;
    }
    recorder->Add(reinterpret_cast<uintptr_t>(kernel));
    recorder->Add(grid);
    recorder->Add(block);
    std::apply([&](const Params&... p) { (recorder->Add(p), ...); }, params);
    recorder->AddWork([k = kernel, g = grid, b = block, s = stream, params] {
      std::apply([&](const Params&... p) { IssueKernel(k, g, b, s, p...); }, params);
    });
  }
};

template <typename... Params>
KernelLaunch<Params...> MakeLaunch(void (*kernel)(Params...), dim3 grid,
                                   dim3 block, cudaStream_t stream) {
  return KernelLaunch<Params...>{kernel, grid, block, stream};
}

// Launches `kernel` on `stream`: TRIBUTARY_LAUNCH(k, grid, block, s)(args…)
// is k<<<grid, block, 0, s>>>(args…) (or its CPU emulation), recorded
// instead inside a graph region.
#define TRIBUTARY_LAUNCH(kernel, grid, block, stream) \
  ::tributary::cuda::MakeLaunch(kernel, dim3(grid), dim3(block), stream)

// The first thing every kernel does (programmatic_launch.h): wait until the
// grids before it on the stream have completed and their writes are
// visible (griddepcontrol.wait; at once when the kernel was launched
// without the attribute), then let the next grid's blocks be scheduled
// (they wait likewise before reading anything of this one's). Anything
// before it must not read what an earlier kernel writes.
__device__ __forceinline__ void BeginAfterPriorGrids() {
#if !defined(TRIBUTARY_CUDA_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Asks for the 128-byte line at p to be brought into L2 (a weight that no
// kernel writes, ahead of BeginAfterPriorGrids).
__device__ __forceinline__ void PrefetchToL2(const void* p) {
#if !defined(TRIBUTARY_CUDA_EMULATION)
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#else
  (void)p;
#endif
}

constexpr int kWarpSize = 32;
// Threads of a block that reduces one row (norms, the residual add).
constexpr int kRowThreads = 256;
// Threads of a block of independent element-wise work.
constexpr int kElementThreads = 256;

// Element i of `data` (of `type`), widened to f32. The switch is uniform
// across a warp (one type per tensor), so it costs a branch, not divergence.
__device__ __forceinline__ float LoadF32(const void* data, ElementType type,
                                         int64_t i) {
  switch (type) {
    case ElementType::kF32:
      return static_cast<const float*>(data)[i];
    case ElementType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    case ElementType::kF16:
      return __half2float(static_cast<const __half*>(data)[i]);
    case ElementType::kI32:
      return static_cast<float>(static_cast<const int32_t*>(data)[i]);
  }
  return 0.0f;
}

// Stores `value` as element i of `data`, rounded to nearest even.
__device__ __forceinline__ void StoreF32(void* data, ElementType type,
                                         int64_t i, float value) {
  switch (type) {
    case ElementType::kF32:
      static_cast<float*>(data)[i] = value;
      return;
    case ElementType::kBF16:
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(value);
      return;
    case ElementType::kF16:
      static_cast<__half*>(data)[i] = __float2half_rn(value);
      return;
    case ElementType::kI32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value);
      return;
  }
}

// What a store of `value` in `type` would read back as (the rounding the
// stored activation carries).
__device__ __forceinline__ float RoundTo(ElementType type, float value) {
  switch (type) {
    case ElementType::kBF16:
      return __bfloat162float(__float2bfloat16_rn(value));
    case ElementType::kF16:
      return __half2float(__float2half_rn(value));
    default:
      return value;
  }
}

__device__ __forceinline__ float SiluF32(float x) {
  return x / (1.0f + expf(-x));
}
__device__ __forceinline__ float SigmoidF32(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// The log decay of a GDN gate (model-spec §4.3): g = −exp(a_log) ·
// softplus(a + dt_bias), softplus linear above 20 as PyTorch's.
__device__ __forceinline__ float GdnLogDecay(float a_plus_bias, float a_log) {
  const float softplus = a_plus_bias > 20.0f ? a_plus_bias : log1pf(expf(a_plus_bias));
  return -expf(a_log) * softplus;
}

// The factor of an L2 norm with its scale (model-spec §4.4): scale ·
// rsqrt(Σx² + 1e-6), the eps on the sum.
__device__ __forceinline__ float L2NormFactor(float sum_sq, float scale) {
  return scale / sqrtf(sum_sq + 1e-6f);
}

// The factor of a zero-centred RMSNorm over `dim` values: rsqrt(mean(x²) +
// eps).
__device__ __forceinline__ float RmsFactor(float sum_sq, int64_t dim, float eps) {
  return rsqrtf(sum_sq / static_cast<float>(dim) + eps);
}

// The sum over the 32 lanes, in every lane (a butterfly: the same order in
// every lane, so every lane holds the same bits). float or double.
template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The sum over the block, in every thread (float or double). `scratch`
// holds at least blockDim.x / 32 values; blockDim.x must be a multiple of 32. Calls with the
// same scratch must be separated by a __syncthreads() (BlockSum ends with
// one, so back-to-back calls are safe).
template <typename T>
__device__ __forceinline__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < num_warps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// (value, index) of the larger value, the lower index on a tie (the CPU
// reference keeps the first maximum): the residual statistics' max |x| and
// greedy decoding's argmax. NaN never wins: comparisons with it are false.
__device__ __forceinline__ void MaxIndexMerge(float& value, int& index,
                                              float other_value,
                                              int other_index) {
  if (other_value > value || (other_value == value && other_index < index)) {
    value = other_value;
    index = other_index;
  }
}

// Σ x² over the `dim` elements of x from `base`, in every thread of the
// block (the row-norm kernels run one block per row; the fused GDN decode
// kernel repeats L2NormRows with it).
__device__ __forceinline__ float RowSumOfSquares(ConstTyped x, int64_t base,
                                                 int64_t dim, float* scratch) {
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = LoadF32(x.data, x.type, base + i);
    sum_sq = __fmaf_rn(v, v, sum_sq);  // explicit: every caller contracts alike
  }
  return BlockSum(sum_sq, scratch);
}

// Shared memory of BlockArgMax.
struct BlockArgMaxScratch {
  float values[kWarpSize];  // a warp's best (at most 32 warps)
  int indexes[kWarpSize];
  int any_nonfinite;
};

// The largest of row[0 … n) and its lowest index (INT_MAX when n = 0), in
// every thread of the block, and whether the row holds a NaN or an
// infinity: each thread's best over its elements (ascending, so its first
// maximum), then the warps' and the block's, the lower index winning ties.
// Starts and ends with a barrier.
__device__ __forceinline__ void BlockArgMax(const float* row, int64_t n,
                                            BlockArgMaxScratch& scratch,
                                            float* max_value, int* index,
                                            bool* nonfinite) {
  if (threadIdx.x == 0) scratch.any_nonfinite = 0;
  __syncthreads();
  float best = -INFINITY;
  int best_index = INT_MAX;
  bool bad = false;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = row[i];
    if (!isfinite(v)) bad = true;
    MaxIndexMerge(best, best_index, v, static_cast<int>(i));
  }
  if (bad) atomicOr(&scratch.any_nonfinite, 1);
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_value = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    MaxIndexMerge(best, best_index, other_value, other_index);
  }
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    scratch.values[warp] = best;
    scratch.indexes[warp] = best_index;
  }
  __syncthreads();
  best = scratch.values[0];
  best_index = scratch.indexes[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / kWarpSize); ++w) {
    MaxIndexMerge(best, best_index, scratch.values[w], scratch.indexes[w]);
  }
  *max_value = best;
  *index = best_index;
  *nonfinite = scratch.any_nonfinite != 0;
  __syncthreads();
}

// Eight bf16 at p (16-byte aligned) as floats.
__device__ __forceinline__ void LoadBf16x8(const __nv_bfloat16* p,
                                           float (&out)[8]) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  ::tributary::cuda_emulation::CheckAligned16(p);
  for (int i = 0; i < 8; ++i) out[i] = __bfloat162float(p[i]);
#else
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // A bf16 is the upper half of the f32 with the same bits; the lower
    // address (the lower index) is the lower half of the word.
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
#endif
}

// 16 bytes from src to dst, both 16-byte aligned, as one access.
__device__ __forceinline__ void Copy16Bytes(void* dst, const void* src) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  ::tributary::cuda_emulation::CheckAligned16(dst);
  ::tributary::cuda_emulation::CheckAligned16(src);
  std::memcpy(dst, src, 16);
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}

// Starts a copy of 16 bytes from global to shared memory, both 16-byte
// aligned, that bypasses the registers (cp.async, sm_80 on): a warp can have
// a whole tile in flight. WaitAsyncCopies() waits for this thread's copies;
// other threads see them after a barrier. The emulation copies at once.
__device__ __forceinline__ void CopyAsync16Bytes(void* shared_dst, const void* global_src) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  Copy16Bytes(shared_dst, global_src);
#else
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src)
               : "memory");
#endif
}

__device__ __forceinline__ void WaitAsyncCopies() {
#if !defined(TRIBUTARY_CUDA_EMULATION)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Keys per run of the split attention for a row of num_keys keys: the
// row's keys cut into at most max_runs runs of equal length (so that a
// context just past a power of two does not leave one run of all keys and
// one of a single key), but none shorter than min_run_keys. A row has at
// most max_runs runs either way.
__device__ __forceinline__ int64_t SplitRunKeys(int64_t num_keys, int64_t min_run_keys,
                                                int64_t max_runs) {
  const int64_t even = (num_keys + max_runs - 1) / max_runs;
  return even > min_run_keys ? even : min_run_keys;
}

// What a block of either split attention kernel serves, from its grid
// position (row rank, KV head · head groups, run): the row's token (every
// token, or with skip_flash DeviceLayout::split_tokens[rank]), the query
// heads first_head … first_head + heads_here − 1 of KV head kvh (groups of
// heads_per_block), and the run's keys [key_begin, key_end) of the row's
// num_keys, cut into `runs` runs. `empty`: the row is shorter than this
// run (the whole block returns).
struct SplitBlock {
  int64_t rank, token, kvh, first_head, heads_here;
  int64_t num_keys, run, runs, key_begin, key_end;
  bool empty;
};
__device__ __forceinline__ SplitBlock SplitBlockOf(const DeviceLayout& layout,
                                                   bool skip_flash, int64_t num_heads,
                                                   int64_t kv_heads, int64_t heads_per_block,
                                                   int64_t min_run_keys, int64_t max_runs) {
  SplitBlock b;
  b.rank = blockIdx.x;
  b.token = skip_flash ? layout.split_tokens[b.rank] : b.rank;
  const int64_t group = num_heads / kv_heads;
  const int64_t groups_per_kv = (group + heads_per_block - 1) / heads_per_block;
  b.kvh = blockIdx.y / groups_per_kv;
  const int64_t heads_before = (blockIdx.y % groups_per_kv) * heads_per_block;
  b.first_head = b.kvh * group + heads_before;
  b.heads_here = group - heads_before < heads_per_block ? group - heads_before
                                                        : heads_per_block;
  b.num_keys = int64_t{layout.token_position[b.token]} + 1;
  const int64_t run_keys = SplitRunKeys(b.num_keys, min_run_keys, max_runs);
  b.run = blockIdx.z;
  b.key_begin = b.run * run_keys;
  b.empty = b.key_begin >= b.num_keys;
  b.key_end = b.key_begin + run_keys < b.num_keys ? b.key_begin + run_keys : b.num_keys;
  b.runs = (b.num_keys + run_keys - 1) / run_keys;
  return b;
}

// The pool row of position p of a sequence (row = block · block_size +
// p mod block_size).
__device__ __forceinline__ int64_t CacheRow(const DeviceLayout& layout,
                                            const DeviceSequence& seq,
                                            int64_t p, int64_t block_size) {
  const int32_t block = layout.block_tables[seq.block_table_offset + p / block_size];
  return static_cast<int64_t>(block) * block_size + p % block_size;
}

// Blocks for n independent elements at kElementThreads each, capped (the
// kernels loop with a grid stride past the cap).
inline unsigned ElementBlocks(int64_t n) {
  const int64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  const int64_t cap = int64_t{1} << 20;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_DEVICE_COMMON_CUH_
