// The fast CPU matmul: y = x Wᵀ with weights kept in their stored type.
//
// Same contract as reference::MatMul (reference_ops.h):
//   y[t, o] = Σ_i x[t, i] · w[o, i]
// x: [num_tokens, in_features] f32; w: [out_features, in_features] of
// `w_type` (bf16, f16 or f32; never expanded as a whole: stored rows are
// widened to f32 by blocks into a per-worker scratch buffer, bf16 pairs in
// registers); y: [num_tokens,
// out_features] f32, overwritten. No pointer may alias another. w_type must
// be a float type (kF32, kBF16, kF16).
//
// On stored rows (WeightLayout::kRows), every output is a dot product
// computed as 16 lane-wise fma chains plus a fixed lane tree
// (matmul_kernels.h), by register-blocked tiles of up to 6 tokens × 4
// weight rows (AVX-512; one zmm accumulator each):
//  - decode (num_tokens <= 6, memory-bound): one pass over the stored
//    weight rows, widened to f32 in registers (bf16: a 16-bit shift; f16:
//    F16C), each row read once for all the tokens of the call, the next
//    tile's rows prefetched into L2;
//  - prefill (more tokens, compute-bound): a block of rows (~384 KiB) is
//    widened once into a per-worker f32 buffer, then every 6-token tile runs
//    over it from L2. Rows longer than half of L1 holds for a tile's x run
//    in segments of inputs (K-blocking, with a block of half of L2): a
//    tile's x segment stays in L1 while the block's row tiles run over it,
//    each carrying its 16 lanes to the next segment.
// Threads split the output features (static partition, 16-row units).
//
// The order depends on the layout: stored rows take the 16-lane order
// below; bf16 weights packed as bf16 pairs (WeightLayout::kBf16Pairs, what
// the backend multiplies) one fma chain per output, as BLAS kernels sum
// (~3× the 16-lane order's rounding, 3e-8 of Σ|x·w| rms, still below the
// reference's mul-then-add chain), ~1.2–1.5× faster on one AVX-512 core at
// K = 256 (no lane tree, no widening pass).
//
// Determinism: y[t, o] depends only on x row t and w row o, through a
// reduction order fixed by in_features and the layout alone — not by num_tokens, the other
// tokens of the call, the thread count, the blocking or the tile shape — so
// results are bit-for-bit batch invariant, and the scalar, AVX2 and AVX-512
// paths give identical bits (all fuse multiply-adds the same way; bf16/f16
// widening is exact), up to the payload of a NaN result (when two lanes hold
// different NaNs, which one an add keeps depends on its operand order, which
// the compiler may swap on the portable path). They differ from
// reference::MatMul (one sequential sum) by rounding only (~1e-7 relative).
//
// Cost: decode reads the weights once (≈ DRAM bandwidth bound); prefill is
// 2·T·in·out flops at ~90–100 % of one core's FMA peak per thread.
//
// MatMulPrecision::kBF16 (opt-in; bf16 weights only) rounds x to bf16 and
// multiplies pairs of bf16 numbers exactly on AVX-512 BF16's VDPBF16PS, in
// its own fixed order (matmul_kernels.h: one chain of pairs per output), on
// weights packed as bf16 pairs (PackBf16Pairs; stored rows are packed per
// call): twice the multiply-adds per instruction, no widening of the weights
// and no lane tree, so compute-bound calls (batched decode, prefill) run up
// to ~2× faster. The same determinism holds; the portable path gives the
// same bits, slowly, on CPUs without the instruction.
//
// Thread safety: reentrant; with a pool, concurrent calls serialise on it.
// Memory: kBF16 rounds x into a buffer of the calling thread, kept across
// calls at the largest size it has needed (num_tokens × in_features bf16).
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend/backend_options.h"
#include "engine/backend/cpu/cpu_isa.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/element_type.h"

namespace tributary {



// How a product's weights are laid out.
enum class WeightLayout : uint8_t {
  // [out_features, in_features] row-major, as a model file stores them.
  kRows,
  // bf16 weights packed by PackBf16Pairs. kF32 products on them run one
  // fma chain per output over the inputs in order (matmul_kernels.h: 16
  // outputs a vector, the weights widened in registers, no lane tree; on
  // AVX-512, 9–16 and 18–32 tokens read x transposed and 96 or more widen
  // the weights once a 64-pair slice for every token tile), kBF16 products
  // their pair chains. The CPU backend packs every bf16 matrix so
  // (CpuBackend::PrepareMatMulWeight).
  kBf16Pairs,
};

// The bf16 pairs layout. Rows go in groups of 16 (the last padded with zero
// rows), inputs in pairs (2p, 2p + 1) (an odd K's last pair padded with a
// zero), and each pair of a group is 64 bytes: row 16g + j's pair p at
// element 2j (even input) and 2j + 1 (odd). A group's pairs run in segments
// of kBf16PairsPerSegment (the last one shorter), and segment s holds every
// group's pairs of that segment in group order: with P pairs, G groups,
// S = kBf16PairsPerSegment, q = p − sS and len_s = min(S, P − sS), element
// (o, i) is at
//   s·G·S·32 + g·len_s·32 + q·32 + 2j + (i mod 2),  g = o / 16, j = o mod 16.
// So what a tile reads (a group's segment) and what it prefetches (the next
// groups' segments) are contiguous, and a segment of a group (64 KiB) stays
// in L2 while every token tile runs over it.
constexpr int64_t kBf16PairsPerSegment = 1024;

// The elements (uint16_t) of [out_features, in_features] as bf16 pairs.
int64_t Bf16PairsElements(int64_t out_features, int64_t in_features);

// packed = w ([out_features, in_features] bf16 bits, row-major) as bf16 pairs
// (Bf16PairsElements of them). `pool` may be null.
void PackBf16Pairs(const uint16_t* w, int64_t out_features,
                   int64_t in_features, uint16_t* packed, ThreadPool* pool);

// Whether this CPU runs kBF16 at speed (AVX-512 F/BW/VL and BF16); without
// it kBF16 runs on the portable path (same bits, many times slower).
bool MatMulBf16DotSupported();

// y = x Wᵀ on the best path. `pool` may be null (single-threaded, and then
// the packing buffer is allocated per call); small problems run on the
// calling thread only.
void MatMul(const float* x, int64_t num_tokens, int64_t in_features,
            const void* w, ElementType w_type, int64_t out_features, float* y,
            ThreadPool* pool, MatMulPrecision precision = MatMulPrecision::kF32,
            WeightLayout layout = WeightLayout::kRows);

// One of several products of the same x (MatMulShared): y = x Wᵀ with w
// [out_features, in_features] of w_type as `layout` says (kBf16Pairs: bf16
// packed by PackBf16Pairs, w_type ignored), y [num_tokens, out_features].
struct MatMulOutput {
  const void* w;
  ElementType w_type;
  int64_t out_features;
  float* y;
  WeightLayout layout = WeightLayout::kRows;
};

// y_i = x W_iᵀ for every output (a layer's input projections), in one
// parallel pass: one hand-off to the pool instead of one per product, and x
// rounded once for kBF16. The same bits as MatMul on each output.
void MatMulShared(const float* x, int64_t num_tokens, int64_t in_features,
                  const MatMulOutput* outputs, int num_outputs,
                  ThreadPool* pool,
                  MatMulPrecision precision = MatMulPrecision::kF32);

// The same on a given path, for tests and benchmarks. The path must be
// supported (CpuIsaSupported); an unsupported one falls back to kScalar.
// kBF16 runs on VDPBF16PS for kAvx512 when MatMulBf16DotSupported(), else on
// the portable path.
void MatMulWithIsa(CpuIsa isa, const float* x, int64_t num_tokens,
                   int64_t in_features, const void* w, ElementType w_type,
                   int64_t out_features, float* y, ThreadPool* pool,
                   MatMulPrecision precision = MatMulPrecision::kF32,
                   WeightLayout layout = WeightLayout::kRows);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_MATMUL_H_
