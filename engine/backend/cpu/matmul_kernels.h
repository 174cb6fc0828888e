// Internal to matmul.cc and its per-ISA files: what each instruction-set path
// provides to the blocked driver.
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
// x is rounded to bf16 first; then lane j of 16 takes, for each 32-element
// chunk c in order, the pair i = 32c + 2j, 32c + 2j + 1, as AVX-512 BF16's
// VDPBF16PS does (measured on Zen 4, matching Intel's pseudo-code):
//   acc = ftz(fma(daz(x[i + 1]), daz(w[i + 1]), acc));
//   acc = ftz(fma(daz(x[i]), daz(w[i]), acc));
// the products exact, each sum rounded once to f32 (nearest even), bf16
// subnormal inputs read as zero (daz) and subnormal sums flushed to a zero of
// their sign (ftz); elements past K are zeros. Then the same lane tree.
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
  // never waits for the hardware prefetcher to find new rows (measured on
  // Zen 4: 13 → 20 GB/s on one core for 1024-wide bf16 rows; into L1 instead
  // it thrashes L1 on long rows). Prefetches never fault.
  void (*tile)(int m, const float* x, int64_t ldx, const void* const* rows,
               ElementType type, int64_t k, float* y, int64_t ldy, int n_store,
               const char* prefetch);
  // dst[i] = src[i] widened to f32, i < n (exact).
  void (*widen)(const void* src, ElementType type, int64_t n, float* dst);
};

// The bf16 products' tiles (MatMulPrecision::kBF16): x and the weight rows
// are bf16 bits.
struct Bf16DotKernels {
  int mr;                    // most tokens per tile
  int nr[kMaxTileRows + 1];  // nr[m]: weight rows per tile of m tokens
  // y[t, r] = the bf16 dot of x row t and *rows[r] over k inputs, in the
  // order above, for t < m, r < n_store (n_store <= nr[m]); rows[] has nr[m]
  // entries. x rows are ldx elements apart, y rows ldy floats. `prefetch`:
  // as MatMulKernels::tile's (nr[m] bf16 rows of k elements).
  void (*tile)(int m, const uint16_t* x, int64_t ldx,
               const uint16_t* const* rows, int64_t k, float* y, int64_t ldy,
               int n_store, const char* prefetch);
  // dst[i] = F32ToBf16(src[i]) (element_type.h: nearest even, NaN quiet),
  // i < n.
  void (*round)(const float* src, int64_t n, uint16_t* dst);
};

const MatMulKernels& ScalarKernels();
const MatMulKernels& Avx2Kernels();    // needs AVX2, FMA, F16C
const MatMulKernels& Avx512Kernels();  // needs AVX-512F/BW/VL, FMA, F16C

const Bf16DotKernels& ScalarBf16DotKernels();  // the naive twin, any CPU
const Bf16DotKernels& Avx512Bf16DotKernels();  // Avx512Kernels' + AVX512_BF16

}  // namespace matmul_internal
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_KERNELS_H_
