// Matrix products of few tokens (a decode step): y [T, out] = x [T, in] · wᵀ
// with T ≤ kGemvMaxTokens, bf16 weights and inputs, f32 accumulation. Such a
// product reads every weight once and does T multiply-adds with it, so its
// time should be the weights' bytes over the memory bandwidth: the kernel's
// job is to stream them at full width with little work per byte.
//
// On the tensor cores: a block takes 16 rows of w (the M of mma.sync
// m16n8k16) against the step's tokens (its N of 8; tokens past T are zero
// columns), and its 8 warps split the input dims (split-K): warp v takes the
// chunks of 32 dims v, v + 8, v + 16, …, then the block adds the 8 warps'
// partial sums in warp order. Within a chunk, lane (g, t) loads 16 bytes of
// row g and of row g + 8 (dims 8t … 8t + 7) and of token g's x, and these
// are the fragments of two mma steps as they come: a dot product may take
// its dims in any order, so the mma's k index 2t, 2t + 1, 2t + 8, 2t + 9 is
// mapped to dims 8t + 0 … 3 in the first step and 8t + 4 … 7 in the second,
// the same map for w and x. The CUDA-core form this replaced did 8 token
// multiply-adds per weight per lane: at 8 tokens that was about as many
// instructions as the multiprocessors can issue while streaming at the
// copy bandwidth; here a chunk of 1 KiB of weights is 2 mma instructions.
//
// A token's result does not depend on T (its column of the mma is computed
// alike whatever the other columns hold, over the same chunks in the same
// order), so up to kGemvMaxTokens a decode step's logits do not depend on
// its batch size (beyond, cuBLAS takes the product, with its own order).
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"
#include "engine/backend/cuda/mma.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kGemvWarps = 8;     // split-K across the block
constexpr int kGemvRows = 16;     // output rows per block: the mma's M
constexpr int kGemvColumns = 8;   // tokens: the mma's N
constexpr int kGemvChunk = 32;    // input dims per warp step: 4 lanes × 8
static_assert(kGemvMaxTokens <= kGemvColumns, "a step's tokens are one mma's columns");

// One product of a group, as a kernel parameter: 8-byte fields only, so the
// launch recorder can key it by its bytes.
struct GemvTarget {
  const void* w;        // [out, in] bf16
  void* y;              // [tokens, out]
  int64_t out;
  int64_t y_type;       // ElementType
  int64_t first_block;  // its first block in the grid
};
struct GemvGroup {
  GemvTarget targets[kGemvMaxOutputs];
  int64_t count;
};

// The group's target of block blockIdx.x (its blocks follow the earlier
// targets' blocks).
__device__ __forceinline__ const GemvTarget& TargetOfBlock(const GemvGroup& group) {
  int i = 0;
  while (i + 1 < group.count && blockIdx.x >= group.targets[i + 1].first_block) ++i;
  return group.targets[i];
}

// 16 bytes (8 bf16) at p as four registers of bf16 pairs, the lower index in
// the low half; zeros when `there` is false. kPastL1: a weight, read once,
// so it does not take a place in L1 (where x, read by every block, stays).
template <bool kPastL1>
__device__ __forceinline__ void LoadPairs(const __nv_bfloat16* p, bool there,
                                          uint32_t (&out)[4]) {
  if (!there) {
    out[0] = out[1] = out[2] = out[3] = 0;
    return;
  }
#if defined(TRIBUTARY_CUDA_EMULATION)
  ::tributary::cuda_emulation::CheckAligned16(p);
  for (int i = 0; i < 4; ++i) out[i] = PackBits(p[2 * i].bits, p[2 * i + 1].bits);
#else
  if constexpr (kPastL1) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
        : "l"(p));
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    out[0] = raw.x;
    out[1] = raw.y;
    out[2] = raw.z;
    out[3] = raw.w;
  }
#endif
}
constexpr bool kWeight = true, kInput = false;

// The lane's rows of the block (g and g + 8, the last again past `rows`).
__device__ __forceinline__ void LaneRows(const __nv_bfloat16* w_rows, int64_t rows,
                                         int64_t in, const __nv_bfloat16*& wa,
                                         const __nv_bfloat16*& wb) {
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row_a = g < rows ? g : rows - 1;
  const int64_t row_b = g + 8 < rows ? g + 8 : rows - 1;
  wa = w_rows + row_a * in + 8 * t;
  wb = w_rows + row_b * in + 8 * t;
}

// Before BeginAfterPriorGrids (weights are written by no kernel): the
// lane's first two chunks of its rows, into L2, so that under programmatic
// launch the block's first loads are under way while the kernel before it
// finishes.
__device__ __forceinline__ void PrefetchFirstChunks(const __nv_bfloat16* w_rows,
                                                    int64_t rows, int64_t in) {
  const __nv_bfloat16 *wa, *wb;
  LaneRows(w_rows, rows, in, wa, wb);
  const int warp = threadIdx.x / kWarpSize;
  const int t = threadIdx.x % 4;
  for (int i = 0; i < 2; ++i) {
    const int64_t k = (int64_t{warp} + int64_t{i} * kGemvWarps) * kGemvChunk;
    if (k + 8 * t < in) {
      PrefetchToL2(wa + k);
      PrefetchToL2(wb + k);
    }
  }
}

// The sums y[t][r] = Σ_d x[t][d] · w_r[d] of the block's 16 rows (row r of
// w at w_rows + r · in; rows past `rows` repeat the last, unstored) and the
// step's tokens, into sums [kGemvRows][kGemvColumns] in shared memory.
// Every thread of the block must call it; the sums are in when it returns.
__device__ __forceinline__ void BlockRowSums(const __nv_bfloat16* x, int64_t tokens,
                                             int64_t in, const __nv_bfloat16* w_rows,
                                             int64_t rows,
                                             float (&partial)[kGemvWarps][kGemvRows][kGemvColumns],
                                             float (&sums)[kGemvRows][kGemvColumns]) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const __nv_bfloat16 *wa, *wb;
  LaneRows(w_rows, rows, in, wa, wb);
  const __nv_bfloat16* xg = x + (g < tokens ? g : 0) * in + 8 * t;
  const bool has_token = g < tokens;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Two chunks per iteration, their loads issued before either's products.
  const int64_t stride = int64_t{kGemvWarps} * kGemvChunk;
  for (int64_t k0 = int64_t{warp} * kGemvChunk; k0 < in; k0 += 2 * stride) {
    uint32_t a0[4], b0[4], x0[4], a1[4], b1[4], x1[4];
    const int64_t k1 = k0 + stride;
    const bool in0 = k0 + 8 * t < in, in1 = k1 + 8 * t < in;
    LoadPairs<kWeight>(wa + k0, in0, a0);
    LoadPairs<kWeight>(wb + k0, in0, b0);
    LoadPairs<kInput>(xg + k0, in0 && has_token, x0);
    LoadPairs<kWeight>(wa + k1, in1, a1);
    LoadPairs<kWeight>(wb + k1, in1, b1);
    LoadPairs<kInput>(xg + k1, in1 && has_token, x1);
    // Step one: dims 8t + 0 … 3; step two: 8t + 4 … 7 (the k map above).
    const uint32_t f00[4] = {a0[0], b0[0], a0[1], b0[1]};
    const uint32_t g00[2] = {x0[0], x0[1]};
    const uint32_t f01[4] = {a0[2], b0[2], a0[3], b0[3]};
    const uint32_t g01[2] = {x0[2], x0[3]};
    MmaBf16(c, f00, g00, c);
    MmaBf16(c, f01, g01, c);
    const uint32_t f10[4] = {a1[0], b1[0], a1[1], b1[1]};
    const uint32_t g10[2] = {x1[0], x1[1]};
    const uint32_t f11[4] = {a1[2], b1[2], a1[3], b1[3]};
    const uint32_t g11[2] = {x1[2], x1[3]};
    MmaBf16(c, f10, g10, c);
    MmaBf16(c, f11, g11, c);
  }
  // c: (row g, tokens 2t, 2t + 1), (row g + 8, tokens 2t, 2t + 1).
  partial[warp][g][2 * t] = c[0];
  partial[warp][g][2 * t + 1] = c[1];
  partial[warp][g + 8][2 * t] = c[2];
  partial[warp][g + 8][2 * t + 1] = c[3];
  __syncthreads();
  for (int i = threadIdx.x; i < kGemvRows * kGemvColumns; i += blockDim.x) {
    const int r = i / kGemvColumns, col = i % kGemvColumns;
    float sum = 0.0f;
    for (int w = 0; w < kGemvWarps; ++w) sum += partial[w][r][col];
    sums[r][col] = sum;
  }
  __syncthreads();
}

// At most 64 registers (ptxas sm_90: 56 and 64), so 4 blocks share a
// multiprocessor; a __launch_bounds__ minimum of 4 made ptxas spill.
__global__ void __launch_bounds__(kGemvWarps * kWarpSize)
GemvKernel(const __nv_bfloat16* x, int64_t tokens, int64_t in, GemvGroup group) {
  const GemvTarget& target = TargetOfBlock(group);
  const int64_t out = target.out;
  const int64_t row0 = (blockIdx.x - target.first_block) * int64_t{kGemvRows};
  const int64_t rows = out - row0 < kGemvRows ? out - row0 : kGemvRows;
  const __nv_bfloat16* w_rows = static_cast<const __nv_bfloat16*>(target.w) + row0 * in;
  PrefetchFirstChunks(w_rows, rows, in);
  BeginAfterPriorGrids();
  __shared__ float partial[kGemvWarps][kGemvRows][kGemvColumns];
  __shared__ float sums[kGemvRows][kGemvColumns];
  BlockRowSums(x, tokens, in, w_rows, rows, partial, sums);
  for (int64_t i = threadIdx.x; i < rows * tokens; i += blockDim.x) {
    const int64_t t = i / rows, r = i % rows;
    StoreF32(target.y, static_cast<ElementType>(target.y_type), t * out + row0 + r,
             sums[r][t]);
  }
}

// out [T, rows_out] = silu(x · w_gateᵀ) ⊙ (x · w_upᵀ): a block per 16 output
// rows sums the gate's rows, then the up's. Each product is rounded to out's
// type before the SwiGLU, as GemvKernel's outputs would be stored, so the
// result has SwiGluKernel's bits over GemvKernel's.
// At most 64 registers (ptxas sm_90: 56 and 64), so 4 blocks share a
// multiprocessor; a __launch_bounds__ minimum of 4 made ptxas spill.
__global__ void __launch_bounds__(kGemvWarps * kWarpSize)
GemvSwiGluKernel(const __nv_bfloat16* x, int64_t tokens, int64_t in,
                 const __nv_bfloat16* w_gate, const __nv_bfloat16* w_up,
                 int64_t rows_out, Typed out) {
  const int64_t row0 = blockIdx.x * int64_t{kGemvRows};
  const int64_t rows = rows_out - row0 < kGemvRows ? rows_out - row0 : kGemvRows;
  PrefetchFirstChunks(w_gate + row0 * in, rows, in);
  BeginAfterPriorGrids();
  __shared__ float partial[kGemvWarps][kGemvRows][kGemvColumns];
  __shared__ float gate[kGemvRows][kGemvColumns];
  __shared__ float up[kGemvRows][kGemvColumns];
  BlockRowSums(x, tokens, in, w_gate + row0 * in, rows, partial, gate);
  BlockRowSums(x, tokens, in, w_up + row0 * in, rows, partial, up);
  for (int64_t i = threadIdx.x; i < rows * tokens; i += blockDim.x) {
    const int64_t t = i / rows, r = i % rows;
    const float g = RoundTo(out.type, gate[r][t]);
    const float u = RoundTo(out.type, up[r][t]);
    StoreF32(out.data, out.type, t * rows_out + row0 + r, SiluF32(g) * u);
  }
}

}  // namespace

void LaunchGemv(const void* x, int64_t tokens, int64_t in,
                const GemvOutput* outputs, int count, cudaStream_t stream) {
  if (tokens <= 0 || tokens > kGemvMaxTokens || count <= 0 ||
      count > kGemvMaxOutputs) {
    return;  // the caller keeps to these
  }
  GemvGroup group{};
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    GemvTarget& t = group.targets[i];
    t.w = outputs[i].w;
    t.y = outputs[i].y.data;
    t.out = outputs[i].out;
    t.y_type = static_cast<int64_t>(outputs[i].y.type);
    t.first_block = blocks;
    blocks += (outputs[i].out + kGemvRows - 1) / kGemvRows;
  }
  group.count = count;
  if (blocks <= 0) return;
  TRIBUTARY_LAUNCH(GemvKernel, static_cast<unsigned>(blocks), kGemvWarps * kWarpSize,
                   stream)(static_cast<const __nv_bfloat16*>(x), tokens, in, group);
}

void LaunchGemvSwiGlu(const void* x, int64_t tokens, int64_t in,
                      const void* w_gate, const void* w_up, int64_t rows_out,
                      Typed out, cudaStream_t stream) {
  if (tokens <= 0 || tokens > kGemvMaxTokens || rows_out <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows_out + kGemvRows - 1) / kGemvRows);
  TRIBUTARY_LAUNCH(GemvSwiGluKernel, blocks, kGemvWarps * kWarpSize, stream)(
      static_cast<const __nv_bfloat16*>(x), tokens, in,
      static_cast<const __nv_bfloat16*>(w_gate),
      static_cast<const __nv_bfloat16*>(w_up), rows_out, out);
}

}  // namespace cuda
}  // namespace tributary
