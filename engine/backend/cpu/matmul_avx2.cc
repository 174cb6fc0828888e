// The AVX2 + FMA path: the canonical 16-lane order (matmul_kernels.h) with
// each (token, weight row) accumulator held as two ymm (lanes 0–7, 8–15), so
// its bits equal the AVX-512 path's. Up to 3 tokens × 2 rows or 1 × 4 per
// tile (2·m·nr accumulators + nr weights + 1 x within 16 ymm registers).
// And the f32 products on bf16 pairs (one fma chain per output), up to 4
// tokens × 1 group or 1 × 4, each tile prefetching the next tile's pairs
// into L2 at the pace it reads its own, as on AVX-512 (without it a batch-1
// product streamed its weights from L3 at 19 GB/s on one AVX2-only core, with
// it 31: 768 × 256, 40 copies cycled, best of 8).
// Same rules as matmul_avx512.cc: only TRIBUTARY_AVX2 functions use AVX2.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "engine/backend/cpu/matmul_kernels.h"

#define TRIBUTARY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tributary {
namespace matmul_internal {
namespace {

constexpr int kMr = 3;
constexpr int kNr[kMaxTileRows + 1] = {0, 4, 3, 2, 0, 0, 0, 0, 0};

// 8 consecutive elements of a row from element i, widened to f32 (exact).
template <ElementType kType>
TRIBUTARY_AVX2 inline __m256 Load8(const void* row, int64_t i) {
  if constexpr (kType == ElementType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
        static_cast<const uint16_t*>(row) + i));
    if constexpr (kType == ElementType::kBF16) {
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// The canonical lane tree of lanes lo (0–7) and hi (8–15).
TRIBUTARY_AVX2 inline float LaneTree(__m256 lo, __m256 hi) {
  const __m256 v8 = _mm256_add_ps(lo, hi);
  const __m128 v4 =
      _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

// One 16-chunk at element i: acc[t][r][h] += x[t][i + 8h …] · w[r][i + 8h …].
template <int M, int N, ElementType kType>
TRIBUTARY_AVX2 inline void Chunk(const float* x, int64_t ldx,
                                 const void* const* row, int64_t i,
                                 __m256 (&acc)[M][N][2]) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256 w[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) w[r] = Load8<kType>(row[r], i + 8 * h);
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i + 8 * h);
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r)
        acc[t][r][h] = _mm256_fmadd_ps(xv, w[r], acc[t][r][h]);
    }
  }
}

template <int M, int N, ElementType kType>
TRIBUTARY_AVX2 void Tile(const float* x, int64_t ldx, const void* const* rows,
                         int64_t k, float* y, int64_t ldy, int n_store,
                         const char* prefetch, const float* lanes_in,
                         float* lanes_out) {
  __m256 acc[M][N][2];
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        acc[t][r][h] =
            lanes_in != nullptr
                ? _mm256_loadu_ps(lanes_in + (t * N + r) * 16 + 8 * h)
                : _mm256_setzero_ps();
      }
    }
  }
  const void* row[N];
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r) row[r] = rows[r];
  using Elem = std::conditional_t<kType == ElementType::kF32, float, uint16_t>;
  constexpr int64_t kPrefetchBytesPerChunk = N * 16 * sizeof(Elem);
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    if (prefetch != nullptr) {
      const char* pf = prefetch + (i / 16) * kPrefetchBytesPerChunk;
#pragma GCC unroll 16
      for (int64_t b = 0; b < kPrefetchBytesPerChunk; b += 64) {
        _mm_prefetch(pf + b, _MM_HINT_T1);
      }
    }
    Chunk<M, N, kType>(x, ldx, row, i, acc);
  }
  if (i < k) {
    // Zero-padded last chunk, through small f32 copies (AVX2 has no 16-bit
    // masked load); fma(0, 0, acc) leaves acc unchanged.
    alignas(32) float xt[M][16] = {};
    alignas(32) float wt[N][16] = {};
    const void* wrow[N];
    for (int64_t j = i; j < k; ++j) {
      for (int t = 0; t < M; ++t) xt[t][j - i] = x[t * ldx + j];
      for (int r = 0; r < N; ++r) {
        wt[r][j - i] = LoadAsF32(row[r], kType, static_cast<size_t>(j));
      }
    }
    for (int r = 0; r < N; ++r) wrow[r] = wt[r];
    Chunk<M, N, ElementType::kF32>(&xt[0][0], 16, wrow, 0, acc);
  }
  if (lanes_out != nullptr) {  // a segment of the inputs: carry the lanes
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          _mm256_storeu_ps(lanes_out + (t * N + r) * 16 + 8 * h, acc[t][r][h]);
        }
      }
    }
    return;
  }
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
      if (r < n_store) y[t * ldy + r] = LaneTree(acc[t][r][0], acc[t][r][1]);
    }
  }
}

template <int M>
TRIBUTARY_AVX2 void TileType(const float* x, int64_t ldx,
                             const void* const* rows, ElementType type,
                             int64_t k, float* y, int64_t ldy, int n_store,
                             const char* prefetch, const float* lanes_in,
                             float* lanes_out) {
  switch (type) {
    case ElementType::kF32:
      return Tile<M, kNr[M], ElementType::kF32>(x, ldx, rows, k, y, ldy,
                                                n_store, prefetch, lanes_in,
                                                lanes_out);
    case ElementType::kBF16:
      return Tile<M, kNr[M], ElementType::kBF16>(x, ldx, rows, k, y, ldy,
                                                 n_store, prefetch, lanes_in,
                                                 lanes_out);
    case ElementType::kF16:
      return Tile<M, kNr[M], ElementType::kF16>(x, ldx, rows, k, y, ldy,
                                                n_store, prefetch, lanes_in,
                                                lanes_out);
    default:  // not a weight type; the driver never passes one
      return;
  }
}

TRIBUTARY_AVX2 void TileAvx2(int m, const float* x, int64_t ldx,
                             const void* const* rows, ElementType type,
                             int64_t k, float* y, int64_t ldy, int n_store,
                             const char* prefetch, const float* lanes_in,
                             float* lanes_out) {
  switch (m) {
    case 1:
      return TileType<1>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
    case 2:
      return TileType<2>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
    default:
      return TileType<3>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
  }
}

template <ElementType kType>
TRIBUTARY_AVX2 void WidenT(const void* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Load8<kType>(src, i));
  for (; i < n; ++i) dst[i] = LoadAsF32(src, kType, static_cast<size_t>(i));
}

TRIBUTARY_AVX2 void WidenAvx2(const void* src, ElementType type, int64_t n,
                              float* dst) {
  switch (type) {
    case ElementType::kF32:
      return WidenT<ElementType::kF32>(src, n, dst);
    case ElementType::kBF16:
      return WidenT<ElementType::kBF16>(src, n, dst);
    case ElementType::kF16:
      return WidenT<ElementType::kF16>(src, n, dst);
    default:
      return;
  }
}

// The f32 products on bf16 pairs (matmul_kernels.h, F32PairKernels): M
// tokens × N groups of 16 rows, each group's accumulator as two ymm (rows
// 0–7, 8–15), so lane for lane the AVX-512 path's chains.
// 2·M·N accumulators + N weights + 1 x within 16 ymm registers.
constexpr int kMrPairs = 4;
constexpr int kGroupsPairs[kMaxTileTokensBf16 + 1] = {0, 4, 3, 2, 1,
                                                      0, 0, 0, 0};

// One parity of pair p (odd: false, the even input, a 16-bit shift; true,
// the odd input, the high half) for half h of every group.
template <int M, int N, bool kOdd>
TRIBUTARY_AVX2 inline void PairStep(const float* x, int64_t ldx,
                                    const uint16_t* const* g, int64_t p,
                                    __m256 (&acc)[M][N][2]) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256 w[N];
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) {
      const __m256i v = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(g[n] + 32 * p + 16 * h));
      w[n] = _mm256_castsi256_ps(kOdd ? _mm256_and_si256(v, high)
                                      : _mm256_slli_epi32(v, 16));
    }
#pragma GCC unroll 4
    for (int t = 0; t < M; ++t) {
      const __m256 xv = _mm256_set1_ps(x[t * ldx + 2 * p + (kOdd ? 1 : 0)]);
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n)
        acc[t][n][h] = _mm256_fmadd_ps(xv, w[n], acc[t][n][h]);
    }
  }
}

// `rows` (0 to 8) floats from src, the rest zero.
TRIBUTARY_AVX2 inline __m256 LoadRows(const float* src, int rows) {
  if (rows == 8) return _mm256_loadu_ps(src);
  alignas(32) float part[8] = {};
  for (int j = 0; j < rows; ++j) part[j] = src[j];
  return _mm256_load_ps(part);
}

// The first `rows` (0 to 8) lanes of v to dst.
TRIBUTARY_AVX2 inline void StoreRows(__m256 v, float* dst, int rows) {
  if (rows == 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float part[8];
  _mm256_store_ps(part, v);
  for (int j = 0; j < rows; ++j) dst[j] = part[j];
}

template <int M, int N>
TRIBUTARY_AVX2 void F32PairTile(const float* x, int64_t ldx,
                                const uint16_t* const* group,
                                int64_t num_inputs, bool accumulate, float* y,
                                int64_t ldy, int rows_store,
                                const char* prefetch) {
  // Rows of group n, half h below rows_store: 0 to 8.
  int rows_in[N][2];
  for (int n = 0; n < N; ++n) {
    for (int h = 0; h < 2; ++h) {
      rows_in[n][h] = std::clamp(rows_store - 16 * n - 8 * h, 0, 8);
    }
  }
  __m256 acc[M][N][2];
  for (int t = 0; t < M; ++t) {
    for (int n = 0; n < N; ++n) {
      for (int h = 0; h < 2; ++h) {
        acc[t][n][h] = accumulate ? LoadRows(y + t * ldy + 16 * n + 8 * h,
                                             rows_in[n][h])
                                  : _mm256_setzero_ps();
      }
    }
  }
  const uint16_t* g[N];
  for (int n = 0; n < N; ++n) g[n] = group[n];
  const int64_t full_pairs = num_inputs / 2;
  for (int64_t p = 0; p < full_pairs; ++p) {
    if (prefetch != nullptr) {  // the next tile's pair p, as this one reads
      const char* pf = prefetch + p * N * 64;
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n) _mm_prefetch(pf + 64 * n, _MM_HINT_T1);
    }
    PairStep<M, N, false>(x, ldx, g, p, acc);
    PairStep<M, N, true>(x, ldx, g, p, acc);
  }
  if (num_inputs % 2 != 0) PairStep<M, N, false>(x, ldx, g, full_pairs, acc);
  for (int t = 0; t < M; ++t) {
    for (int n = 0; n < N; ++n) {
      for (int h = 0; h < 2; ++h) {
        StoreRows(acc[t][n][h], y + t * ldy + 16 * n + 8 * h, rows_in[n][h]);
      }
    }
  }
}

template <int M>
TRIBUTARY_AVX2 void F32PairTileGroups(const float* x, int64_t ldx,
                                      const uint16_t* const* group,
                                      int64_t num_inputs, bool accumulate,
                                      float* y, int64_t ldy, int rows_store,
                                      const char* prefetch) {
  // A tile whose rows end early runs only the groups it stores.
  const int groups = std::clamp((rows_store + 15) / 16, 1, kGroupsPairs[M]);
  switch (groups) {
    case 1:
      return F32PairTile<M, 1>(x, ldx, group, num_inputs, accumulate, y, ldy,
                               rows_store, prefetch);
    case 2:
      if constexpr (kGroupsPairs[M] >= 2) {
        return F32PairTile<M, 2>(x, ldx, group, num_inputs, accumulate, y,
                                 ldy, rows_store, prefetch);
      }
      break;
    case 3:
      if constexpr (kGroupsPairs[M] >= 3) {
        return F32PairTile<M, 3>(x, ldx, group, num_inputs, accumulate, y,
                                 ldy, rows_store, prefetch);
      }
      break;
    default:
      if constexpr (kGroupsPairs[M] >= 4) {
        return F32PairTile<M, 4>(x, ldx, group, num_inputs, accumulate, y,
                                 ldy, rows_store, prefetch);
      }
      break;
  }
  // groups <= kGroupsPairs[M] (the clamp above): every case returned.
  __builtin_unreachable();
}

TRIBUTARY_AVX2 void F32PairTileAvx2(int m, const float* x, int64_t ldx,
                                    const uint16_t* const* group,
                                    int64_t num_inputs, bool accumulate,
                                    float* y, int64_t ldy, int rows_store,
                                    const char* prefetch) {
  switch (std::clamp(m, 1, kMrPairs)) {
    case 1:
      return F32PairTileGroups<1>(x, ldx, group, num_inputs, accumulate, y,
                                  ldy, rows_store, prefetch);
    case 2:
      return F32PairTileGroups<2>(x, ldx, group, num_inputs, accumulate, y,
                                  ldy, rows_store, prefetch);
    case 3:
      return F32PairTileGroups<3>(x, ldx, group, num_inputs, accumulate, y,
                                  ldy, rows_store, prefetch);
    default:
      return F32PairTileGroups<4>(x, ldx, group, num_inputs, accumulate, y,
                                  ldy, rows_store, prefetch);
  }
}

}  // namespace

const F32PairKernels& Avx2F32PairKernels() {
  static const F32PairKernels kernels{
      {kMrPairs,
       {0, kGroupsPairs[1], kGroupsPairs[2], kGroupsPairs[3], kGroupsPairs[4],
        0, 0, 0, 0},
       &F32PairTileAvx2},
      nullptr,
      nullptr,
      nullptr,
      nullptr};
  return kernels;
}

const MatMulKernels& Avx2Kernels() {
  static const MatMulKernels kernels{
      kMr, {0, kNr[1], kNr[2], kNr[3], 0, 0, 0, 0, 0}, &TileAvx2, &WidenAvx2};
  return kernels;
}

}  // namespace matmul_internal
}  // namespace tributary
