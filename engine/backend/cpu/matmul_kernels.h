// Internal to matmul.cc and its per-ISA kernels (matmul_kernels.inc): what
// each instruction-set path provides to the blocked driver.
//
// The canonical reduction order (matmul.h, Determinism), shared by every
// path: the dot product of a token row x and a weight row w over K inputs is
// split into 16 lanes; lane j accumulates, from +0, fma(x[i], w[i], acc) for
// i = j, j + 16, j + 32, … in order (the last 16-chunk padded with zeros);
// then the lanes are summed by the fixed tree
//   v8[j] = s[j] + s[j + 8], v4[j] = v8[j] + v8[j + 4],
//   v2[j] = v4[j] + v4[j + 2], result = v2[0] + v2[1].
// AVX-512 holds the 16 lanes in one zmm, AVX2 in two ymm, the scalar path in
// an array; all three produce the same bits.
//
// The bf16 products' order (MatMulPrecision::kBF16), shared by its two paths:
// x is rounded to bf16 first; then each output (t, o) is one chain from +0
// over the pairs of inputs p = 0, 1, … in order, i = 2p:
//   acc = ftz(fma(daz(x[i + 1]), daz(w[i + 1]), acc));
//   acc = ftz(fma(daz(x[i]), daz(w[i]), acc));
// the products exact, each sum rounded once to f32 (nearest even), bf16
// subnormal inputs read as zero (daz) and subnormal sums flushed to a zero of
// their sign (ftz); an odd K's last pair is padded with zeros. No lane tree:
// on weights packed as bf16 pairs (matmul.h, PackBf16Pairs: 16 rows' pair p
// side by side in 64 bytes) one AVX-512 BF16 VDPBF16PS of a broadcast x pair
// advances 16 outputs by one pair, in exactly this order (the odd element
// first, DAZ and FTZ: measured on an AVX512_BF16 core, matching Intel's
// pseudo-code).
//
// The f32 products' order on bf16 weights (MatMulPrecision::kF32 on a bf16
// matrix, packed as bf16 pairs), shared by its three paths: each output
// (t, o) is one chain from +0 over the inputs i = 0, 1, …, K − 1 in order,
//   acc = fma(x[i], w[i], acc),
// x as given (f32) and w widened exactly. One VFMADD of a broadcast x[i]
// advances 16 outputs by one input; the accumulators are the outputs (no
// lane tree), the weights are widened in registers (even input: a 16-bit
// shift; odd: a mask), and segments continue their chains from y exactly.
// Each lane is an independent chain, so every path gives the same bits.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_KERNELS_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_KERNELS_H_

#include <cstdint>

#include "engine/backend/element_type.h"

namespace tributary {
namespace matmul_internal {

constexpr int kMaxTileRows = 8;  // bound on nr, for the callers' arrays

struct MatMulKernels {
  int mr;                    // most tokens per tile
  int nr[kMaxTileRows + 1];  // nr[m]: weight rows per tile of m tokens
  // y[t, r] = dot(x row t, *rows[r]) over k inputs, for t < m, r < n_store
  // (n_store <= nr[m]); rows[] has nr[m] entries (repeat a row to pad).
  // x rows are ldx floats apart, y rows ldy. Weight rows are of `type`.
  // `prefetch`, when not null, is the start of the next tile's weights (a
  // contiguous region of nr[m] rows of k elements): the tile prefetches it
  // into L2 at the pace it reads its own rows, so that streaming decode
  // never waits for the hardware prefetcher to find new rows (measured on an
  // AVX-512 machine: 13 → 20 GB/s on one core for 1024-wide bf16 rows; into
  // L1 instead it thrashes L1 on long rows). Prefetches never fault.
  //
  // A dot product may run as consecutive segments of its k inputs (prefill
  // over long rows: K-blocking, so that a token tile's segment of x stays in
  // L1), carrying its 16 lanes between them. `lanes_in`, when not null,
  // holds the lanes the tile starts from (else +0); `lanes_out`, when not
  // null, receives the lanes at the end instead of the dots going to y (no
  // lane tree). Both are laid out [m][nr[m]][16] floats, and may be the same
  // buffer. Every segment but the last must be a multiple of 16 inputs long,
  // so that input i stays in lane i mod 16: the bits are then those of one
  // call over all k inputs.
  void (*tile)(int m, const float* x, int64_t ldx, const void* const* rows,
               ElementType type, int64_t k, float* y, int64_t ldy, int n_store,
               const char* prefetch, const float* lanes_in, float* lanes_out);
  // dst[i] = src[i] widened to f32, i < n (exact).
  void (*widen)(const void* src, ElementType type, int64_t n, float* dst);
};

// The tiles of the products on weights packed as bf16 pairs, each in its
// order above, for either x: X = uint16_t, bf16 pairs (the bf16 products,
// MatMulPrecision::kBF16), or X = float (the f32 products on bf16 pairs).
constexpr int kMaxTileTokensBf16 = 8;
constexpr int kMaxTileGroups = 12;  // bound on groups[m], for the callers
template <typename X>
struct PairTileKernels {
  int mr;                              // most tokens per tile
  int groups[kMaxTileTokensBf16 + 1];  // groups[m]: 16-row groups per tile
  // For t < m and rows r < rows_store of the tile (r = 16n + j: lane j of
  // group n; rows_store <= 16 · groups[m]): continues the chain of output
  // (t, r) over `count` more of its terms (its order above), from y[t, r]
  // when `accumulate` (a previous segment's result, exact in f32) else
  // from +0, and stores it in y[t, r]. `count`: pairs for bf16 x, inputs
  // for f32 x (an odd count ends in half a pair). x: the tile's first token
  // at its first pair (its even input), rows ldx elements apart; only
  // `count` pairs or inputs of a row are read. group[n]: group n's first
  // pair (64 bytes a pair); group[] has groups[m] entries (repeat one to
  // pad; only rows_store rows are read from y or written). `prefetch`, when
  // not null, is the start of the next tile's weights: the tile prefetches
  // groups[m] · pairs · 64 contiguous bytes from it into L2 at the pace it
  // reads its own (which may run past the next tile, and past the buffer at
  // its end: prefetches never fault).
  void (*tile)(int m, const X* x, int64_t ldx, const uint16_t* const* group,
               int64_t count, bool accumulate, float* y, int64_t ldy,
               int rows_store, const char* prefetch);
};

struct Bf16DotKernels : PairTileKernels<uint16_t> {
  // dst[i] = F32ToBf16(src[i]) (element_type.h: nearest even, NaN quiet),
  // i < n.
  void (*round)(const float* src, int64_t n, uint16_t* dst);
};

struct F32PairKernels : PairTileKernels<float> {
  // Optional (null on paths that widen in the tile only): the blocked form
  // of the same products, for calls whose token tiles run many times over
  // the same groups (prefill: RunWideSlices in matmul.cc). widen: `pairs`
  // pairs of one group (64 bytes a pair, as `tile` reads them) to f32, 32
  // floats a pair: its 16 rows' even inputs, then their odd inputs (exact).
  // wide_tile: `tile` on groups so widened (group[n]: group n's first pair,
  // 32 floats a pair), the same chains in the same order, so the same bits.
  void (*widen)(const uint16_t* group, int64_t pairs, float* out);
  void (*wide_tile)(int m, const float* x, int64_t ldx,
                    const float* const* group, int64_t count, bool accumulate,
                    float* y, int64_t ldy, int rows_store,
                    const char* prefetch);
  // Optional (null on paths without it): the form for one token tile of
  // mr < m <= kTransposedTokens tokens (a decode part of 9–16 sequences,
  // or one of the two halves of 18–32 tokens: matmul.cc, RunTransposed),
  // which reads every weight once. transpose: xt[kTransposedTokens · i + t]
  // = x[t · ldx + i] for t < m, i < count (xt 64-byte aligned; tokens from
  // m on are left as they are). transposed_tile: `tile`'s chains for m
  // tokens on one group of 16 rows, reading x so transposed that every
  // token's input sits at a fixed offset from one pointer (m per-token
  // pointers do not fit the general registers): the same order, so the
  // same bits; `prefetch` as `tile`'s, for one group.
  void (*transpose)(const float* x, int64_t ldx, int m, int64_t count,
                    float* xt);
  void (*transposed_tile)(int m, const float* xt, const uint16_t* group,
                          int64_t count, bool accumulate, float* y,
                          int64_t ldy, int rows_store, const char* prefetch);
};
constexpr int kTransposedTokens = 16;

// Each path's tables are matmul.cc's (matmul_kernels.inc, compiled once a
// path into namespaces avx512, avx2 and portable: kMatMulKernels,
// kF32PairKernels, and on the portable and AVX-512 paths kBf16DotKernels,
// the AVX-512 one needing AVX512_BF16 for its tile). The portable path is
// the naive twin, any CPU; these give the tables on stored rows.
const MatMulKernels& ScalarKernels();
const MatMulKernels& Avx2Kernels();    // needs AVX2, FMA, F16C
const MatMulKernels& Avx512Kernels();  // needs AVX-512F/BW/VL, FMA, F16C

}  // namespace matmul_internal
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_KERNELS_H_
