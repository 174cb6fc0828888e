// The AVX-512 paths: the canonical 16-lane order (matmul_kernels.h) with one
// zmm accumulator per (token, weight row), up to 6 tokens × 4 rows (prefill)
// or 1–2 tokens × 8 rows (decode) per tile; the bf16 products' pair chains
// on VDPBF16PS (AVX512_BF16) over weights packed as bf16 pairs, m tokens ×
// kGroupsBf16[m] groups of 16 rows per tile (1 × 4, 2 × 10 … 8 × 3); and
// the f32 products' fma chains over the same packed weights in the same
// tile shapes (kGroupsF32Pairs).
//
// This file is compiled with the project's baseline flags; only the functions
// marked TRIBUTARY_AVX512 use AVX-512 (target attribute), so no inline
// function from a shared header is ever emitted with AVX-512 instructions
// (which the linker could otherwise pick for callers on older CPUs). The
// driver only reaches these after __builtin_cpu_supports says yes.

// GCC 12's AVX-512 intrinsics build _mm512_undefined_*() from a
// self-initialised variable, which -Wmaybe-uninitialized flags once inlined
// (GCC bug 105593); the warning is wrong here, and -Werror is on.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same bug
#endif

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "engine/backend/cpu/matmul_kernels.h"

#define TRIBUTARY_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define TRIBUTARY_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

namespace tributary {
namespace matmul_internal {
namespace {

constexpr int kMr = 6;
// Accumulators m·nr plus nr weight registers plus one x register fit the 32
// zmm registers.
constexpr int kNr[kMaxTileRows + 1] = {0, 8, 8, 6, 6, 4, 4, 0, 0};

// 16 consecutive elements of a row from element i, widened to f32 (exact).
template <ElementType kType>
TRIBUTARY_AVX512 inline __m512 Load16(const void* row, int64_t i) {
  if constexpr (kType == ElementType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        static_cast<const uint16_t*>(row) + i));
    if constexpr (kType == ElementType::kBF16) {
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// The same for the lanes of `mask`, zero elsewhere (no access beyond them).
template <ElementType kType>
TRIBUTARY_AVX512 inline __m512 MaskLoad16(const void* row, int64_t i,
                                          __mmask16 mask) {
  if constexpr (kType == ElementType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + i);
  } else {
    const __m256i h =
        _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + i);
    if constexpr (kType == ElementType::kBF16) {
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// The canonical lane trees (matmul_kernels.h) of four accumulators at once, in
// lanes 0, 4, 8, 12 of the result: each step adds exactly the pairs the tree
// adds (float addition is commutative, so the bits are those of one tree per
// accumulator), but four dot products share every shuffle and add. About 3.5
// instructions per output instead of 8: at K = 256 a dot product is only 16
// fmas, so the tree is a large part of the work.
TRIBUTARY_AVX512 inline __m512 LaneTree4(__m512 a, __m512 b, __m512 c,
                                         __m512 d) {
  // v8: [a8 | b8] and [c8 | d8], v8[j] = s[j] + s[j + 8].
  const __m512 ab8 =
      _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd8 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  // v4: [a4 | b4 | c4 | d4], v4[j] = v8[j] + v8[j + 4].
  const __m512 v4 =
      _mm512_add_ps(_mm512_shuffle_f32x4(ab8, cd8, _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm512_shuffle_f32x4(ab8, cd8, _MM_SHUFFLE(3, 1, 3, 1)));
  // v2[j] = v4[j] + v4[j + 2] in lanes 0, 1 of each block; then v2[0] + v2[1].
  const __m512 v2 =
      _mm512_add_ps(v4, _mm512_permute_ps(v4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(v2, _mm512_permute_ps(v2, _MM_SHUFFLE(2, 3, 0, 1)));
}

// y[r] = the lane tree of acc[r] for r < n_store (n_store <= N).
template <int N>
TRIBUTARY_AVX512 inline void StoreDots(const __m512* acc, float* y,
                                       int n_store) {
  const __m512i pick =
      _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 2
  for (int r = 0; r < N; r += 4) {
    // A group of fewer than 4 (N = 6) repeats its last accumulators.
    const __m512 sums = LaneTree4(acc[r], acc[r + 1 < N ? r + 1 : N - 1],
                                  acc[r + 2 < N ? r + 2 : N - 1],
                                  acc[r + 3 < N ? r + 3 : N - 1]);
    const __m128 four =
        _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, sums));
    const int left = n_store - r;
    if (left >= 4) {
      _mm_storeu_ps(y + r, four);
    } else if (left > 0) {
      _mm_mask_storeu_ps(y + r, static_cast<__mmask8>((1u << left) - 1), four);
    }
  }
}

// The chunk-th kBytes of the next tile's rows into L2, at the pace the tile
// reads its own (MatMulKernels::tile's `prefetch`; null: none).
template <int64_t kBytes>
TRIBUTARY_AVX512 inline void PrefetchChunk(const char* prefetch,
                                           int64_t chunk) {
  if (prefetch == nullptr) return;
  const char* pf = prefetch + chunk * kBytes;
#pragma GCC unroll 16
  for (int64_t b = 0; b < kBytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T1);
}

template <int M, int N, ElementType kType>
TRIBUTARY_AVX512 void Tile(const float* x, int64_t ldx, const void* const* rows,
                           int64_t k, float* y, int64_t ldy, int n_store,
                           const char* prefetch, const float* lanes_in,
                           float* lanes_out) {
  __m512 acc[M][N];
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
      acc[t][r] = lanes_in != nullptr
                      ? _mm512_loadu_ps(lanes_in + (t * N + r) * 16)
                      : _mm512_setzero_ps();
    }
  }
  const void* row[N];
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r) row[r] = rows[r];
  using Elem = std::conditional_t<kType == ElementType::kF32, float, uint16_t>;
  constexpr int64_t kPrefetchBytesPerChunk = N * 16 * sizeof(Elem);
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    PrefetchChunk<kPrefetchBytesPerChunk>(prefetch, i / 16);
    __m512 w[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) w[r] = Load16<kType>(row[r], i);
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r)
        acc[t][r] = _mm512_fmadd_ps(xv, w[r], acc[t][r]);
    }
  }
  if (i < k) {
    // Zero-padded last chunk: fma(0, 0, acc) leaves acc unchanged, except
    // that a −0 lane (a negative product that underflowed) becomes +0;
    // every path pads the same way, so the bits agree.
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 w[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) w[r] = MaskLoad16<kType>(row[r], i, mask);
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + t * ldx + i);
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r)
        acc[t][r] = _mm512_fmadd_ps(xv, w[r], acc[t][r]);
    }
  }
  if (lanes_out != nullptr) {  // a segment of the inputs: carry the lanes
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r) {
        _mm512_storeu_ps(lanes_out + (t * N + r) * 16, acc[t][r]);
      }
    }
    return;
  }
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) StoreDots<N>(acc[t], y + t * ldy, n_store);
}

template <int M>
TRIBUTARY_AVX512 void TileType(const float* x, int64_t ldx,
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

TRIBUTARY_AVX512 void TileAvx512(int m, const float* x, int64_t ldx,
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
    case 3:
      return TileType<3>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
    case 4:
      return TileType<4>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
    case 5:
      return TileType<5>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
    default:
      return TileType<6>(x, ldx, rows, type, k, y, ldy, n_store, prefetch,
                          lanes_in, lanes_out);
  }
}

template <ElementType kType>
TRIBUTARY_AVX512 void WidenT(const void* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, Load16<kType>(src, i));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, mask, MaskLoad16<kType>(src, i, mask));
  }
}

TRIBUTARY_AVX512 void WidenAvx512(const void* src, ElementType type, int64_t n,
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

// The bf16 products' tile on packed pairs (matmul_kernels.h): M tokens × N
// groups of 16 weight rows, one zmm accumulator each, whose lane j is row
// 16n + j. Per pair: N weight loads (64 bytes each), M broadcasts of a
// token's pair, M·N VDPBF16PS; the accumulators are the outputs (no lane
// tree, a plain store). The weights are multiplied as stored (no widening)
// and the instruction does twice the multiply-adds of an f32 fma (both 1 per
// cycle on a double-pumped AVX-512 core).
constexpr int kMrBf16 = 8;
// Accumulators M·N plus N weight registers plus one x register fit the 32
// zmm registers; 8 × 3 and 4 × 6 ran at the same rate (one core, 768 × 256,
// T = 32: 222 GFLOP/s, against 165 for the lane-tree layout it replaced).
// One token takes 4 groups, not 12, as the f32 products' one-token tile
// did first (kGroupsF32Pairs): batch-1 decode streams the weights, and on
// a full-width AVX-512 VM 4 groups ran the mid-size model's C = 1
// (weights from DRAM) 1.10–1.23× as fast in three alternated pairs, and
// the default model's (from L3) 1.03× (10 pairs, all at 1.00 or more).
constexpr int kGroupsBf16[kMaxTileTokensBf16 + 1] = {0, 4, 10, 7, 6,
                                                     5, 4,  3,  3};

// The lanes of group n below rows_store.
inline __mmask16 GroupMask(int rows_store, int n) {
  const int left = rows_store - 16 * n;
  return left >= 16 ? static_cast<__mmask16>(0xffff)
         : left <= 0 ? static_cast<__mmask16>(0)
                     : static_cast<__mmask16>((1u << left) - 1);
}

// acc[t][n] = y[t, 16n …] (rows below rows_store; zero beyond) when
// `accumulate`, else +0.
template <int M, int N>
TRIBUTARY_AVX512 inline void LoadGroups(__m512 (&acc)[M][N], bool accumulate,
                                        const float* y, int64_t ldy,
                                        int rows_store) {
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) {
#pragma GCC unroll 12
    for (int n = 0; n < N; ++n) {
      acc[t][n] = accumulate ? _mm512_maskz_loadu_ps(GroupMask(rows_store, n),
                                                     y + t * ldy + 16 * n)
                             : _mm512_setzero_ps();
    }
  }
}

// y[t, 16n + j] = lane j of acc[t][n], rows below rows_store only.
template <int M, int N>
TRIBUTARY_AVX512 inline void StoreGroups(const __m512 (&acc)[M][N], float* y,
                                         int64_t ldy, int rows_store) {
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) {
#pragma GCC unroll 12
    for (int n = 0; n < N; ++n) {
      const __mmask16 mask = GroupMask(rows_store, n);
      if (mask == 0xffff) {
        _mm512_storeu_ps(y + t * ldy + 16 * n, acc[t][n]);
      } else if (mask != 0) {
        _mm512_mask_storeu_ps(y + t * ldy + 16 * n, mask, acc[t][n]);
      }
    }
  }
}

template <int M, int N>
TRIBUTARY_AVX512_BF16 void Bf16PairTile(const uint16_t* x, int64_t ldx,
                                        const uint16_t* const* group,
                                        int64_t num_pairs, bool accumulate,
                                        float* y, int64_t ldy, int rows_store,
                                        const char* prefetch) {
  __m512 acc[M][N];
  LoadGroups<M, N>(acc, accumulate, y, ldy, rows_store);
  const uint16_t* g[N];
#pragma GCC unroll 12
  for (int n = 0; n < N; ++n) g[n] = group[n];
  constexpr int64_t kPrefetchBytesPerPair = N * 64;
  for (int64_t p = 0; p < num_pairs; ++p) {
    PrefetchChunk<kPrefetchBytesPerPair>(prefetch, p);
    __m512bh w[N];
#pragma GCC unroll 12
    for (int n = 0; n < N; ++n) {
      w[n] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(g[n] + 32 * p));
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      int32_t pair;
      std::memcpy(&pair, x + t * ldx + 2 * p, sizeof pair);
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
#pragma GCC unroll 12
      for (int n = 0; n < N; ++n)
        acc[t][n] = _mm512_dpbf16_ps(acc[t][n], xv, w[n]);
    }
  }
  StoreGroups<M, N>(acc, y, ldy, rows_store);
}

using Bf16PairTileFn = void (*)(const uint16_t*, int64_t,
                                const uint16_t* const*, int64_t, bool, float*,
                                int64_t, int, const char*);

// The pair tiles of both products in one table each: Tiles::kTile<M, n>
// for M ≤ kMrBf16 tokens and n = 1 … Tiles::kGroups[M] groups (index
// n − 1), so that a tile whose rows end early (a thread's last groups, a
// small product) runs only the groups it stores. Tiles: a struct naming
// the tile's function type Fn, its kGroups and its kTile.
template <typename Tiles, int M, int... I>
constexpr std::array<typename Tiles::Fn, kMaxTileGroups> TilesOfShape(
    std::integer_sequence<int, I...>) {
  return {Tiles::template kTile<M, I + 1>...};
}
template <typename Tiles, int... M>
constexpr std::array<std::array<typename Tiles::Fn, kMaxTileGroups>,
                     kMrBf16 + 1>
TileTable(std::integer_sequence<int, M...>) {
  return {{{}, TilesOfShape<Tiles, M + 1>(
                   std::make_integer_sequence<int, Tiles::kGroups[M + 1]>())...}};
}

// Runs the tile of min(m, kMrBf16) tokens (at least 1) with the groups its
// rows_store rows need; `args` are the tile's arguments before rows_store
// (x, ldx, group, the pair or input count, accumulate, y, ldy).
template <typename Tiles, typename... Args>
inline void RunPairTile(int m, int rows_store, const char* prefetch,
                        Args... args) {
  static constexpr auto kTable =
      TileTable<Tiles>(std::make_integer_sequence<int, kMrBf16>());
  m = std::clamp(m, 1, kMrBf16);
  const int groups = std::clamp((rows_store + 15) / 16, 1, Tiles::kGroups[m]);
  kTable[m][groups - 1](args..., rows_store, prefetch);
}

struct Bf16PairTiles {
  using Fn = Bf16PairTileFn;
  static constexpr const int* kGroups = kGroupsBf16;
  template <int M, int N>
  static constexpr Fn kTile = &Bf16PairTile<M, N>;
};

TRIBUTARY_AVX512_BF16 void Bf16DotTileAvx512(int m, const uint16_t* x,
                                             int64_t ldx,
                                             const uint16_t* const* group,
                                             int64_t num_pairs, bool accumulate,
                                             float* y, int64_t ldy,
                                             int rows_store,
                                             const char* prefetch) {
  RunPairTile<Bf16PairTiles>(m, rows_store, prefetch, x, ldx, group, num_pairs,
                             accumulate, y, ldy);
}

// The f32 products on bf16 pairs (matmul_kernels.h, F32PairKernels): M
// tokens × N groups of 16 weight rows, one zmm accumulator each (lane j of
// group n is row 16n + j), at most the bf16 products' shapes (M·N
// accumulators, N weights, one x). Per pair and parity (PairStep): N weight
// loads as f32 (PairWeights), then a broadcast x element a token and M·N
// fmas.
// Input kOdd of pair p of a group's 16 rows as f32: bf16 pairs widened in
// registers (the even input: a 16-bit shift of the pair; the odd: its high
// half masked), or weights already so widened (32 floats a pair: the even
// inputs, then the odd; F32PairKernels::widen).
template <bool kOdd>
TRIBUTARY_AVX512 inline __m512 PairWeights(const uint16_t* group, int64_t p) {
  const __m512i pair = _mm512_loadu_si512(group + 32 * p);
  return _mm512_castsi512_ps(
      kOdd ? _mm512_and_si512(
                 pair, _mm512_set1_epi32(static_cast<int>(0xffff0000u)))
           : _mm512_slli_epi32(pair, 16));
}
template <bool kOdd>
TRIBUTARY_AVX512 inline __m512 PairWeights(const float* group, int64_t p) {
  return _mm512_loadu_ps(group + 32 * p + (kOdd ? 16 : 0));
}

template <int M, int N, bool kOdd, typename W>
TRIBUTARY_AVX512 inline void PairStep(const float* x, int64_t ldx,
                                      const W* const* g, int64_t p,
                                      __m512 (&acc)[M][N]) {
  __m512 w[N];
#pragma GCC unroll 12
  for (int n = 0; n < N; ++n) w[n] = PairWeights<kOdd>(g[n], p);
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) {
    const __m512 xv = _mm512_set1_ps(x[t * ldx + 2 * p + (kOdd ? 1 : 0)]);
#pragma GCC unroll 12
    for (int n = 0; n < N; ++n) {
      acc[t][n] = _mm512_fmadd_ps(xv, w[n], acc[t][n]);
    }
  }
}

// The tile on bf16 pairs (W = uint16_t: F32PairKernels::tile) or on pairs
// widened once a slice (W = float: wide_tile, whose caller prefetches the
// next slice itself and passes no `prefetch`): the same chains, in the same
// order, so the same bits.
template <int M, int N, typename W>
TRIBUTARY_AVX512 void F32PairTile(const float* x, int64_t ldx,
                                  const W* const* group, int64_t num_inputs,
                                  bool accumulate, float* y, int64_t ldy,
                                  int rows_store, const char* prefetch) {
  __m512 acc[M][N];
  LoadGroups<M, N>(acc, accumulate, y, ldy, rows_store);
  const W* g[N];
#pragma GCC unroll 12
  for (int n = 0; n < N; ++n) g[n] = group[n];
  constexpr int64_t kPrefetchBytesPerPair = N * 64;
  const int64_t full_pairs = num_inputs / 2;
  for (int64_t p = 0; p < full_pairs; ++p) {
    PrefetchChunk<kPrefetchBytesPerPair>(prefetch, p);
    PairStep<M, N, false, W>(x, ldx, g, p, acc);
    PairStep<M, N, true, W>(x, ldx, g, p, acc);
  }
  // Half a pair: the even input only.
  if (num_inputs % 2 != 0) {
    PairStep<M, N, false, W>(x, ldx, g, full_pairs, acc);
  }
  StoreGroups<M, N>(acc, y, ldy, rows_store);
}

// F32PairKernels::widen: each pair's even inputs, then its odd ones, as
// the tile widens them in registers.
TRIBUTARY_AVX512 void WidenPairsAvx512(const uint16_t* group, int64_t pairs,
                                       float* out) {
  for (int64_t p = 0; p < pairs; ++p) {
    _mm512_storeu_ps(out + 32 * p, PairWeights<false>(group, p));
    _mm512_storeu_ps(out + 32 * p + 16, PairWeights<true>(group, p));
  }
}

// Groups a tile: the bf16 products' shapes (kGroupsBf16). One token's 4
// groups were first chosen here: decode of one token streams the weights
// from memory, and fewer streams at a time kept up with memory better on an
// AVX-512 core: the mid-size model's batch-1 step, best of 32, three rounds
// alternated, 12 groups 14.2–14.9 ms, 8 13.4–14.2, 4 12.2–14.1, against
// 13.6–13.9 for the stored rows' 16-lane tiles.
constexpr const int* kGroupsF32Pairs = kGroupsBf16;

// The f32 tiles on bf16 pairs (W = uint16_t) or on widened slices
// (W = float), and their dispatcher (F32PairKernels::tile and wide_tile).
template <typename W>
struct F32PairTiles {
  using Fn = void (*)(const float*, int64_t, const W* const*, int64_t, bool,
                      float*, int64_t, int, const char*);
  static constexpr const int* kGroups = kGroupsF32Pairs;
  template <int M, int N>
  static constexpr Fn kTile = &F32PairTile<M, N, W>;
};

template <typename W>
TRIBUTARY_AVX512 void F32PairTileAvx512(int m, const float* x, int64_t ldx,
                                        const W* const* group,
                                        int64_t num_inputs, bool accumulate,
                                        float* y, int64_t ldy, int rows_store,
                                        const char* prefetch) {
  RunPairTile<F32PairTiles<W>>(m, rows_store, prefetch, x, ldx, group,
                               num_inputs, accumulate, y, ldy);
}

// F32PairKernels::transpose: input i of the m tokens, gathered from their
// rows into one vector a step (the lanes from m on keep what xt held).
TRIBUTARY_AVX512 void TransposeXAvx512(const float* x, int64_t ldx, int m,
                                       int64_t count, float* xt) {
  static_assert(kTransposedTokens == 16, "one zmm of tokens an input");
  const __mmask16 tokens = static_cast<__mmask16>((1u << m) - 1);
  // Row offsets in floats: t · ldx fits 32 bits for any x a step holds
  // (ldx is a layer's width).
  const __m512i rows = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(ldx)));
  for (int64_t i = 0; i < count; ++i) {
    const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), tokens,
                                              rows, x + i, 4);
    _mm512_mask_store_ps(xt + kTransposedTokens * i, tokens, v);
  }
}

// One input of every token into the M accumulators: input j of the
// transposed stretch at xp (xt's row of that input), times w.
template <int M>
TRIBUTARY_AVX512 inline void TransposedInput(const float* xp, __m512 w,
                                             __m512 (&acc)[M][1]) {
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) {
    acc[t][0] = _mm512_fmadd_ps(_mm512_set1_ps(xp[t]), w, acc[t][0]);
  }
}

// F32PairKernels::transposed_tile: M tokens × one group. Per pair: one
// weight load widened twice (PairWeights), then 2·M fmas whose x operand is
// a broadcast from xt at a fixed offset. 16 × 1 spends 2 of 34 vector
// operations a pair widening, where 8 × 3 spends 6 of 54.
template <int M>
TRIBUTARY_AVX512 void F32TransposedTile(const float* xt,
                                        const uint16_t* group,
                                        int64_t num_inputs, bool accumulate,
                                        float* y, int64_t ldy, int rows_store,
                                        const char* prefetch) {
  __m512 acc[M][1];
  LoadGroups<M, 1>(acc, accumulate, y, ldy, rows_store);
  const int64_t full_pairs = num_inputs / 2;
  for (int64_t p = 0; p < full_pairs; ++p) {
    PrefetchChunk<64>(prefetch, p);
    const float* xp = xt + 2 * kTransposedTokens * p;
    TransposedInput<M>(xp, PairWeights<false>(group, p), acc);
    TransposedInput<M>(xp + kTransposedTokens, PairWeights<true>(group, p),
                       acc);
  }
  if (num_inputs % 2 != 0) {  // half a pair: the even input only
    TransposedInput<M>(xt + 2 * kTransposedTokens * full_pairs,
                       PairWeights<false>(group, full_pairs), acc);
  }
  StoreGroups<M, 1>(acc, y, ldy, rows_store);
}

// The tiles of kMrBf16 + 1 … kTransposedTokens tokens: the transposed form
// runs only where the 8-token tiles would take more than one token tile.
template <int... I>
constexpr auto TransposedTiles(std::integer_sequence<int, I...>) {
  return std::array<decltype(&F32TransposedTile<kTransposedTokens>),
                    sizeof...(I)>{&F32TransposedTile<kMrBf16 + 1 + I>...};
}

TRIBUTARY_AVX512 void F32TransposedTileAvx512(int m, const float* xt,
                                              const uint16_t* group,
                                              int64_t num_inputs,
                                              bool accumulate, float* y,
                                              int64_t ldy, int rows_store,
                                              const char* prefetch) {
  static constexpr auto kTiles = TransposedTiles(
      std::make_integer_sequence<int, kTransposedTokens - kMrBf16>());
  kTiles[std::clamp(m, kMrBf16 + 1, kTransposedTokens) - kMrBf16 - 1](
      xt, group, num_inputs, accumulate, y, ldy, rows_store, prefetch);
}

// F32ToBf16 on 16 floats, in integer arithmetic (the same bits, NaN
// included; VCVTNEPS2BF16 would read f32 subnormals as zero).
TRIBUTARY_AVX512 inline __m256i RoundToBf16x16(__m512i u) {
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i odd =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)),
      16);
  const __m512i quiet =
      _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

TRIBUTARY_AVX512 void RoundAvx512(const float* src, int64_t n,
                                  uint16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        RoundToBf16x16(_mm512_loadu_si512(src + i)));
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(
        dst + i, mask,
        RoundToBf16x16(_mm512_maskz_loadu_epi32(mask, src + i)));
  }
}

}  // namespace

const Bf16DotKernels& Avx512Bf16DotKernels() {
  static const Bf16DotKernels kernels{
      {kMrBf16,
       {0, kGroupsBf16[1], kGroupsBf16[2], kGroupsBf16[3], kGroupsBf16[4],
        kGroupsBf16[5], kGroupsBf16[6], kGroupsBf16[7], kGroupsBf16[8]},
       &Bf16DotTileAvx512},
      &RoundAvx512};
  return kernels;
}

const F32PairKernels& Avx512F32PairKernels() {
  static const F32PairKernels kernels{
      {kMrBf16,
       {0, kGroupsF32Pairs[1], kGroupsF32Pairs[2], kGroupsF32Pairs[3],
        kGroupsF32Pairs[4], kGroupsF32Pairs[5], kGroupsF32Pairs[6],
        kGroupsF32Pairs[7], kGroupsF32Pairs[8]},
       &F32PairTileAvx512<uint16_t>},
      &WidenPairsAvx512,
      &F32PairTileAvx512<float>,
      &TransposeXAvx512,
      &F32TransposedTileAvx512};
  return kernels;
}

const MatMulKernels& Avx512Kernels() {
  static const MatMulKernels kernels{
      kMr,
      {0, kNr[1], kNr[2], kNr[3], kNr[4], kNr[5], kNr[6], 0, 0},
      &TileAvx512,
      &WidenAvx512};
  return kernels;
}

}  // namespace matmul_internal
}  // namespace tributary
