#include "engine/backend/cpu/matmul.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593
#pragma GCC diagnostic ignored "-Wuninitialized"        // the same bug
#endif

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/matmul_kernels.h"

namespace tributary {
namespace matmul_internal {

#define TRIB_KERNELS "engine/backend/cpu/matmul_kernels.inc"
#include "engine/backend/cpu/isa_instantiations.inc"
#undef TRIB_KERNELS

const MatMulKernels& ScalarKernels() { return portable::kMatMulKernels; }
const MatMulKernels& Avx2Kernels() { return avx2::kMatMulKernels; }
const MatMulKernels& Avx512Kernels() { return avx512::kMatMulKernels; }

}  // namespace matmul_internal

using matmul_internal::Bf16DotKernels;
using matmul_internal::F32PairKernels;
using matmul_internal::MatMulKernels;

namespace {

// Prefill packs a block of weight rows, widened to f32, into a per-worker
// buffer of about this size, then runs every token tile over it: each weight
// is widened once per call and reused num_tokens times. Tuned for a 1 MiB L2,
// which must also hold the token tiles streaming through: on
// 2048³, 192 KiB gave 73–80 GFLOP/s on one core, 384 KiB 91, 512 KiB 94; the
// model's shapes (K = 1024, 2816, T = 512) were the same (~100–108) for all.
// Products over input segments (below) take half of L2 instead.
constexpr int64_t kPackBytes = 384 * 1024;
// Threads split the output features in units of this many rows.
constexpr int64_t kRowsPerUnit = 16;
// Below this many multiply-adds a call stays on the calling thread: handing
// a chunk to a worker (~1 µs while it spins, a wake-up when it sleeps)
// costs more than the work. At one token a product streams its weights from
// the shared cache (the default model's 15 MB do not fit a core's L2), and
// two cores streaming at once are nearly twice as fast as one: with 2^18
// here the batch-1 down projection (196 k multiply-adds) ran on one thread
// at 0.125 ms a step, on two at 0.070 ms, and a batch-1 step went from
// 0.58 to 0.47 ms (bench/journal/thread-pool.md). 2^15 multiply-adds are
// 64 KiB of bf16 weights, ~3 µs on one core.
constexpr int64_t kMinParallelMacs = int64_t{1} << 15;
// Each thread takes one contiguous share of a product's output rows (one
// chunk a thread; the caller still takes a late worker's share). From 8
// tokens (compute-bound) the pool's smaller chunks cut the tiles short.
// Below, where the product streams its weights, 4 chunks a thread were kept
// at first to balance the threads (on an AVX-512 machine with 1 MiB of L2 a
// core, the mid-size model's batch-1 step ran 2–7 % slower in whole shares);
// on a 2-core AVX-512 VM with 2 MiB of L2 a core whole shares won there too,
// since each claimed chunk moves the pool's shared lines
// between the cores (an empty ParallelFor: 0.9 µs in 2 chunks, 1.7 µs in
// 8): batch-1 step, best of 6 alternated, 0.46–0.54 → 0.43–0.47 ms on the
// default model, 10.4–10.9 → 9.6–10.4 ms on the mid-size one
// (bench/journal/thread-pool.md).

const MatMulKernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return matmul_internal::Avx512Kernels();
    case CpuIsa::kAvx2:
      return matmul_internal::Avx2Kernels();
    case CpuIsa::kScalar:
    case CpuIsa::kAuto:
      break;
  }
  return matmul_internal::ScalarKernels();
}

struct Problem {
  const float* x;
  int64_t num_tokens;
  int64_t in_features;
  const char* w;  // bytes
  ElementType w_type;
  int64_t out_features;
  float* y;
};

// Floats between packed rows: the row rounded up to 16 floats (64 bytes),
// plus 16, so that consecutive rows start on different L1 sets.
int64_t PackStride(int64_t in_features) {
  return (in_features + 15) / 16 * 16 + 16;
}

// The data caches of one core, in bytes (sysconf; where the system does not
// say, 32 KiB and 1 MiB). Clamped to what cores have (16–128 KiB,
// 256 KiB–4 MiB), so that a hypervisor reporting something else (a shared
// cache as L2) cannot make the scratch buffers huge.
struct CoreCaches {
  int64_t l1d, l2;
};

const CoreCaches& Caches() {
  static const CoreCaches caches = [] {
    const long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    constexpr int64_t kKiB = 1024;
    return CoreCaches{
        std::clamp<int64_t>(l1d > 0 ? l1d : 32 * kKiB, 16 * kKiB, 128 * kKiB),
        std::clamp<int64_t>(l2 > 0 ? l2 : 1024 * kKiB, 256 * kKiB,
                            4096 * kKiB)};
  }();
  return caches;
}

// The bytes of packed weights a blocked product on bf16 pairs runs every
// token tile over (RunGroups): kPackBytes, but at most 3/8 of L2. The second
// token tile prefetches the next block while this one is read from L2, so
// two blocks must fit beside the token tiles' x, which two of 384 KiB do
// not in a 512 KiB L2 (192 KiB blocks there). L2s of 1 MiB and 2 MiB keep
// kPackBytes.
int64_t GroupBlockBytes() {
  return std::min<int64_t>(kPackBytes, Caches().l2 * 3 / 8);
}

// How prefill (more tokens than one tile) blocks a product of K inputs.
//
// A token tile's x rows (mr · K floats) must stay in L1 while the tile runs
// over the weight rows of a block from L2; otherwise both operands come from
// L2 and the tile waits on it. Long rows are therefore cut into segments
// (K-blocking): each token tile runs every row tile of the block over one
// segment of its x, each row tile carrying its 16 lanes to the next
// segment (matmul_kernels.h; the bits are those of one pass). One AVX-512
// core (48 KiB L1, 2 MiB L2), T = 512, 1024 outputs, against OpenBLAS in the
// same run: unsegmented, 0.87–0.91 at K <= 1024 but 0.53–0.60 at K = 2048,
// 2816 and 5120; segments of 512 inputs, 0.77–0.79; of 1024 (x half of L1),
// 0.78–0.80; and with a block of half of L2 instead of 384 KiB, 0.83–0.88
// (segments of 1536 inputs fell to 0.64–0.71). On both cores, 2048³ went
// from 0.57 to 0.83 of OpenBLAS. A larger block does not pay without
// segments: 256 outputs × 768 inputs at T = 32 fell from 115 to 74–82
// GFLOP/s, so unsegmented products keep kPackBytes. (A 32 KiB L1 gives
// segments of 672 inputs: not measured.)
struct PrefillBlocking {
  int64_t stride;    // floats between packed rows (PackStride)
  int64_t rows;      // rows of a pack block (a multiple of 8, at least 8)
  int64_t segment;   // inputs a segment (K when there is one segment)
  int64_t scratch;   // floats of a worker's scratch: the block (rows ·
                     // stride), then the carried lanes (segments only)
};

PrefillBlocking BlockingFor(const MatMulKernels& kern, int64_t in_features) {
  PrefillBlocking b;
  b.stride = PackStride(in_features);
  // Half of L1 for the token tile's x segment, in whole 16-input chunks.
  const int64_t segment =
      std::max<int64_t>(256, Caches().l1d / 2 / (kern.mr * 4) / 16 * 16);
  const bool segmented = in_features > segment;
  b.segment = segmented ? segment : in_features;
  const int64_t pack_bytes = segmented ? Caches().l2 / 2 : kPackBytes;
  const int64_t rows =
      pack_bytes / (b.stride * static_cast<int64_t>(sizeof(float)));
  b.rows = rows < 8 ? 8 : rows / 8 * 8;
  // The carried lanes of a token tile's row tiles over a block: at most
  // rows + nr − 1 rows, each with m · 16 lanes.
  const int64_t lanes =
      segmented ? kern.mr * (b.rows + matmul_internal::kMaxTileRows) * 16 : 0;
  b.scratch = b.rows * b.stride + lanes;
  return b;
}

// What the tiles of a ForEachTile prefetch into L2 as they run
// (MatMulKernels::tile's `prefetch`).
struct Prefetch {
  enum class Kind {
    kNone,
    // The next tile's rows: streaming decode, one pass over the weights.
    kNextTile,
    // Blocked prefill: during the first token tile, the next tile's rows
    // (the block comes in from memory ahead of the tile); during the second,
    // the same rows `ahead` rows on, below `limit` (the next block arrives
    // while this one is computed).
    kNextBlock,
  };
  Kind kind = Kind::kNone;
  int64_t ahead = 0;
  int64_t limit = 0;
};

// Calls tile(m, t0, o, rows, n_store, next) for the token tiles of
// [t_begin, t_end) over weight rows [o_begin, o_end), whose row o starts at
// row_base + (o − row_origin) · row_bytes; `next` is what the tile
// prefetches (`prefetch`), or null. RowPtr: the tile's row pointer type.
// The products on bf16 pairs (f32 and bf16) call it with 16-row groups of
// packed pairs for rows (nr_of_m: groups per tile; n_store: groups to
// store).
template <typename RowPtr, typename Tile>
void ForEachTile(int mr, const int* nr_of_m, int64_t t_begin, int64_t t_end,
                 int64_t o_begin, int64_t o_end, const char* row_base,
                 int64_t row_origin, int64_t row_bytes,
                 const Prefetch& prefetch, const Tile& tile) {
  const auto row = [&](int64_t o) {
    return row_base + (o - row_origin) * row_bytes;
  };
  RowPtr rows[std::max(matmul_internal::kMaxTileRows,
                       matmul_internal::kMaxTileGroups)];
  int64_t token_tile = 0;
  for (int64_t t0 = t_begin; t0 < t_end; t0 += mr, ++token_tile) {
    const int m = static_cast<int>(std::min<int64_t>(mr, t_end - t0));
    const int nr = nr_of_m[m];
    for (int64_t o = o_begin; o < o_end; o += nr) {
      // A partial tile repeats its last row; only valid outputs are stored.
      for (int r = 0; r < nr; ++r) {
        rows[r] = reinterpret_cast<RowPtr>(row(std::min(o + r, o_end - 1)));
      }
      const char* next = nullptr;
      if (prefetch.kind == Prefetch::Kind::kNextTile) {
        if (o + nr < o_end) next = row(o + nr);
      } else if (prefetch.kind == Prefetch::Kind::kNextBlock) {
        if (token_tile == 0 && o + nr < o_end) next = row(o + nr);
        if (token_tile == 1 && o + prefetch.ahead < prefetch.limit) {
          next = row(o + prefetch.ahead);
        }
      }
      tile(m, t0, o, rows, static_cast<int>(std::min<int64_t>(nr, o_end - o)),
           next);
    }
  }
}

// Runs token tiles [t_begin, t_end) over weight rows [o_begin, o_end) (see
// ForEachTile) of type row_type.
void RunTiles(const MatMulKernels& kern, const Problem& p, int64_t t_begin,
              int64_t t_end, int64_t o_begin, int64_t o_end,
              const char* row_base, int64_t row_origin, int64_t row_bytes,
              ElementType row_type, const Prefetch& prefetch) {
  ForEachTile<const void*>(
      kern.mr, kern.nr, t_begin, t_end, o_begin, o_end, row_base, row_origin,
      row_bytes, prefetch,
      [&](int m, int64_t t0, int64_t o, const void* const* rows, int n_store,
          const char* next) {
        kern.tile(m, p.x + t0 * p.in_features, p.in_features, rows, row_type,
                  p.in_features, p.y + t0 * p.out_features + o, p.out_features,
                  n_store, next, nullptr, nullptr);
      });
}

// Token tiles [t_begin, t_end) over the f32 rows [o_begin, o_end) of a pack
// block (row o at pack + (o − o_begin) · stride floats), one segment of
// `segment` inputs at a time: a token tile runs every row tile over a
// segment of its x (in L1) before the next segment, each row tile carrying
// its lanes in `lanes` (PrefillBlocking). The same bits as RunTiles.
void RunTilesBySegment(const MatMulKernels& kern, const Problem& p,
                       int64_t t_begin, int64_t t_end, int64_t o_begin,
                       int64_t o_end, const float* pack, int64_t stride,
                       int64_t segment, float* lanes) {
  const int64_t k = p.in_features;
  for (int64_t t0 = t_begin; t0 < t_end; t0 += kern.mr) {
    const int64_t t1 = std::min<int64_t>(t0 + kern.mr, t_end);
    for (int64_t s0 = 0; s0 < k; s0 += segment) {
      const int64_t len = std::min(segment, k - s0);
      const bool first = s0 == 0, last = s0 + len == k;
      ForEachTile<const void*>(
          kern.mr, kern.nr, t0, t1, o_begin, o_end,
          reinterpret_cast<const char*>(pack + s0), o_begin,
          stride * static_cast<int64_t>(sizeof(float)), {},
          [&](int m, int64_t t, int64_t o, const void* const* rows,
              int n_store, const char* /*next*/) {
            const int nr = kern.nr[m];
            float* tile_lanes = lanes + (o - o_begin) / nr * (m * nr * 16);
            kern.tile(m, p.x + t * k + s0, k, rows, ElementType::kF32, len,
                      p.y + t * p.out_features + o, p.out_features, n_store,
                      nullptr, first ? nullptr : tile_lanes,
                      last ? nullptr : tile_lanes);
          });
    }
  }
}

// All tokens × output features [o_begin, o_end). `scratch`:
// BlockingFor(kern, K).scratch floats, used only in prefill.
void RunRows(const MatMulKernels& kern, const Problem& p, int64_t o_begin,
             int64_t o_end, float* scratch) {
  const int64_t k = p.in_features;
  const int64_t w_row_bytes =
      k * static_cast<int64_t>(ElementTypeSizeBytes(p.w_type));
  if (p.num_tokens <= kern.mr) {
    // Decode (one token tile: every weight is read once anyway): the tiles
    // stream the stored rows directly, widening in registers.
    RunTiles(kern, p, 0, p.num_tokens, o_begin, o_end, p.w, 0, w_row_bytes,
             p.w_type, {Prefetch::Kind::kNextTile});
    return;
  }
  // Prefill: widen a block of rows into the scratch buffer (f32 rows too:
  // the copy is cheap next to num_tokens reuses, and its padded stride keeps
  // the rows of a tile off the same L1 sets, which 4 KiB-strided rows are
  // not), then run every token tile over it while it sits in L2.
  const PrefillBlocking blocking = BlockingFor(kern, k);
  const int64_t stride = blocking.stride;
  const int64_t block = blocking.rows;
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t oe = std::min(ob + block, o_end);
    for (int64_t o = ob; o < oe; ++o) {
      kern.widen(p.w + o * w_row_bytes, p.w_type, k,
                 scratch + (o - ob) * stride);
    }
    if (blocking.segment < k) {
      RunTilesBySegment(kern, p, 0, p.num_tokens, ob, oe, scratch, stride,
                        blocking.segment, scratch + block * stride);
      continue;
    }
    RunTiles(kern, p, 0, p.num_tokens, ob, oe,
             reinterpret_cast<const char*>(scratch), ob,
             stride * static_cast<int64_t>(sizeof(float)), ElementType::kF32,
             {});
  }
}

// How many of a segment's inputs a tile is given: the bf16 products count
// pairs (x rounded and padded to whole pairs), the f32 products on pairs
// count inputs (x as given: an odd K's last pair is half a pair).
int64_t TileCount(const Bf16DotKernels&, int64_t pairs, int64_t /*inputs*/) {
  return pairs;
}
int64_t TileCount(const F32PairKernels&, int64_t pairs, int64_t inputs) {
  return std::min(2 * pairs, inputs);
}

// A 64-byte-aligned buffer of at least `floats` floats, the calling
// thread's, kept across calls (RunWideSlices and RunTransposed, never both
// at once): a zmm load or store across two cache lines costs two.
float* AlignedThreadFloats(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats + 16) buffer.resize(floats + 16);
  return reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
}

// RunGroups' f32 products of more than one token tile on one segment (`len`
// pairs a group, `count` inputs, x at the segment's first input): a tile's
// groups kWideSlicePairs pairs at a time are widened to f32 once
// (F32PairKernels::widen) into a buffer of the calling thread that stays in
// L1, and every token tile runs over that slice (wide_tile), continuing its
// chains from the previous slice's results in y (exact): the same chains as
// the tiles that widen in registers, so the same bits. A token tile used to
// widen every weight it read: 2 of every 18 operations on the vector ports.
constexpr int64_t kWideSlicePairs = 64;  // 3 groups: 24 KiB of f32
// Below this many token tiles a slice's widening (and its tiles' loads and
// stores of y between slices) costs more than the tiles save: one thread,
// K = 256 × 768 outputs, best of 4 alternated runs, GFLOP/s blocked / in
// registers: 16 tokens 130 / 155, 32 148 / 155, 64 154 / 154, 128 160 /
// 153, 256 162 / 152 (the FMA peak: 175).
constexpr int64_t kWideMinTokenTiles = 12;
// Up to this many tokens the f32 products on bf16 pairs take the transposed
// form (RunTransposed), in blocks of up to 16 tokens: each weight read once
// and widened once a block, instead of 8-token tiles over blocks of groups
// (each tile widening every weight it reads in registers). A 2-core AVX-512
// VM (2 MiB L2 a core), 2 threads, a decode step in one piece, best of 3–4
// alternated runs (step_ops_bench --one-piece; bench/journal/matmul-tiles.md): the mid-size
// model (weights from memory) at 32 tokens, the step 44.4 → 38.5 ms and its
// GateUp products 12.5 → 10.2 ms; the default model at 24 and 32 tokens,
// GateUp 0.618 → 0.602 and 0.835 → 0.776 ms; at 48, 64 and 90 tokens on the
// default model even or slower (1.22 → 1.26, 1.71 → 1.68, 2.32 → 2.37 ms),
// so the 8-token tiles keep those.
constexpr int64_t kTransposedMaxTokens = 32;

void RunWideSlices(const F32PairKernels& kern, const Problem& p,
                   const float* x, int64_t ldx, int64_t g_begin, int64_t g_end,
                   const char* segment, int64_t len, int64_t count,
                   bool accumulate) {
  const int64_t group_bytes = len * 64;
  const int n_max = kern.groups[kern.mr];  // every token count takes as many
  float* const wide =
      AlignedThreadFloats(static_cast<size_t>(n_max * kWideSlicePairs * 32));
  const float* group[matmul_internal::kMaxTileGroups];
  for (int64_t g = g_begin; g < g_end; g += n_max) {
    const int n_groups = static_cast<int>(std::min<int64_t>(n_max, g_end - g));
    const int rows_store = static_cast<int>(
        std::min<int64_t>(16 * n_groups, p.out_features - 16 * g));
    for (int64_t q0 = 0; q0 < len; q0 += kWideSlicePairs) {
      const int64_t q_len = std::min(kWideSlicePairs, len - q0);
      for (int n = 0; n < n_max; ++n) {
        // A partial tile repeats its last group (only rows_store are stored).
        const int gn = std::min(n, n_groups - 1);
        if (n == gn) {
          kern.widen(reinterpret_cast<const uint16_t*>(
                         segment + (g + n) * group_bytes + q0 * 64),
                     q_len, wide + n * q_len * 32);
        }
        group[n] = wide + gn * q_len * 32;
      }
      // The next slice's pairs (these groups' next, or the next groups'
      // first) into L2 while this one is computed: the weights come from
      // memory (or L3), once a call.
      const int64_t next_q =
          q0 + kWideSlicePairs < len ? q0 + kWideSlicePairs : 0;
      const int64_t next_g = next_q > 0 ? g : g + n_max;
      const int64_t next_n = std::min<int64_t>(n_max, g_end - next_g);
      const int64_t next_len = std::min(kWideSlicePairs, len - next_q);
      for (int64_t n = 0; n < next_n; ++n) {
        const char* slice = segment + (next_g + n) * group_bytes + next_q * 64;
        for (int64_t b = 0; b < next_len * 64; b += 64) {
          __builtin_prefetch(slice + b, 0, 2);
        }
      }
      const int64_t inputs = std::min(2 * q_len, count - 2 * q0);
      for (int64_t t0 = 0; t0 < p.num_tokens; t0 += kern.mr) {
        const int m =
            static_cast<int>(std::min<int64_t>(kern.mr, p.num_tokens - t0));
        kern.wide_tile(m, x + t0 * ldx + 2 * q0, ldx, group, inputs,
                       accumulate || q0 > 0,
                       p.y + t0 * p.out_features + 16 * g, p.out_features,
                       rows_store, nullptr);
      }
    }
  }
}

// RunGroups' f32 products of mr < T <= kTransposedMaxTokens tokens (a
// decode part of 9–16 sequences, a batched decode in one piece, a short
// prompt) on one segment (`len` pairs a group, `count` inputs, x at the
// segment's first input), with each weight read once for all T tokens: the
// tokens in B = ⌈T / kTransposedTokens⌉ blocks of ⌊T / B⌋ or ⌈T / B⌉ (each
// more than mr: TransposedBlocks), x transposed a stretch of pairs at a time
// into a buffer of the calling thread (in L1: B blocks of a stretch hold
// kTransposedPairs · 2 · kTransposedTokens floats in all), and every
// group's stretch (in L1 once read) runs under every block's tile,
// continuing its chains from the previous stretch's results in y (exact):
// the same chains, so the same bits. One block: one thread, a batch-16
// decode step: the GateUp products 0.766 → 0.716 ms, the LM head 0.166 →
// 0.151 (bench/journal/matmul-tiles.md). Two blocks: kTransposedMaxTokens.
constexpr int64_t kTransposedPairs = 128;  // 16 KiB of x in all

// The blocks T tokens take in the transposed form, or 0 where it does not
// apply (T <= mr, T > kTransposedMaxTokens, or a block of mr tokens or
// fewer).
int64_t TransposedBlocks(int64_t num_tokens, int mr) {
  constexpr int64_t kT = matmul_internal::kTransposedTokens;
  if (num_tokens <= mr || num_tokens > kTransposedMaxTokens) return 0;
  const int64_t blocks = (num_tokens + kT - 1) / kT;
  return num_tokens / blocks > mr ? blocks : 0;
}

void RunTransposed(const F32PairKernels& kern, const Problem& p,
                   const float* x, int64_t ldx, int64_t g_begin,
                   int64_t g_end, const char* segment, int64_t len,
                   int64_t count, bool accumulate, int64_t blocks) {
  constexpr int64_t kT = matmul_internal::kTransposedTokens;
  const int64_t group_bytes = len * 64;
  const int64_t stretch = kTransposedPairs / blocks;
  const int64_t block_floats = 2 * stretch * kT;
  float* const xt =
      AlignedThreadFloats(static_cast<size_t>(blocks * block_floats));
  // Block b: tokens [first[b], first[b + 1]).
  static_assert(kTransposedMaxTokens <= 2 * kT, "at most two blocks");
  int64_t first[3];
  for (int64_t b = 0; b <= blocks; ++b) first[b] = b * p.num_tokens / blocks;
  for (int64_t q0 = 0; q0 < len; q0 += stretch) {
    const int64_t q_len = std::min(stretch, len - q0);
    const int64_t inputs = std::min(2 * q_len, count - 2 * q0);
    for (int64_t b = 0; b < blocks; ++b) {
      kern.transpose(x + first[b] * ldx + 2 * q0, ldx,
                     static_cast<int>(first[b + 1] - first[b]), inputs,
                     xt + b * block_floats);
    }
    for (int64_t g = g_begin; g < g_end; ++g) {
      const char* w = segment + g * group_bytes + q0 * 64;
      // The next group's stretch, or the first group's next one: the first
      // block's tile prefetches it, the others read this one from L1.
      const char* next =
          g + 1 < g_end ? w + group_bytes
          : q0 + stretch < len
              ? segment + g_begin * group_bytes + (q0 + stretch) * 64
              : nullptr;
      const int rows_store =
          static_cast<int>(std::min<int64_t>(16, p.out_features - 16 * g));
      for (int64_t b = 0; b < blocks; ++b) {
        kern.transposed_tile(
            static_cast<int>(first[b + 1] - first[b]), xt + b * block_floats,
            reinterpret_cast<const uint16_t*>(w), inputs, accumulate || q0 > 0,
            p.y + first[b] * p.out_features + 16 * g, p.out_features,
            rows_store, b == 0 ? next : nullptr);
      }
    }
  }
}

// The products on weights packed as bf16 pairs (PackBf16Pairs), all tokens
// × the output rows of groups [g_begin, g_end): the bf16 products (x rounded
// to bf16: `x` of X = uint16_t, rows of ldx = 2 · pairs elements, an odd
// K's last pair padded with a zero) or the f32 products (x as given, X =
// float, ldx = K). A segment at a time (one for K <= 2 ·
// kBf16PairsPerSegment), each tile continuing its outputs' chains from the
// previous segment's results in y. Decode streams the groups once; prefill
// runs every token tile over a block of groups (GroupBlockBytes of them) while
// the block sits in L2.
template <typename Kernels, typename X>
void RunGroups(const Kernels& kern, const Problem& p, const X* x, int64_t ldx,
               int64_t g_begin, int64_t g_end) {
  const int64_t pairs = (p.in_features + 1) / 2;
  const int64_t groups = (p.out_features + 15) / 16;
  for (int64_t s0 = 0; s0 < pairs; s0 += kBf16PairsPerSegment) {
    const int64_t len = std::min(kBf16PairsPerSegment, pairs - s0);
    const int64_t group_bytes = len * 64;
    // Segment s starts after s full segments of every group.
    const char* segment =
        p.w + s0 * groups * 32 * static_cast<int64_t>(sizeof(uint16_t));
    const bool accumulate = s0 > 0;
    const int64_t count = TileCount(kern, len, p.in_features - 2 * s0);
    const auto tile = [&](int m, int64_t t0, int64_t g,
                          const uint16_t* const* group, int n_groups,
                          const char* next) {
      const int rows_store = static_cast<int>(
          std::min<int64_t>(16 * n_groups, p.out_features - 16 * g));
      kern.tile(m, x + t0 * ldx + 2 * s0, ldx, group, count, accumulate,
                p.y + t0 * p.out_features + 16 * g, p.out_features,
                rows_store, next);
    };
    if constexpr (std::is_same_v<Kernels, F32PairKernels>) {
      const int64_t blocks = kern.transposed_tile != nullptr
                                 ? TransposedBlocks(p.num_tokens, kern.mr)
                                 : 0;
      if (blocks > 0) {
        RunTransposed(kern, p, x + 2 * s0, ldx, g_begin, g_end, segment, len,
                      count, accumulate, blocks);
        continue;
      }
    }
    if (p.num_tokens <= kern.mr) {
      ForEachTile<const uint16_t*>(kern.mr, kern.groups, 0, p.num_tokens,
                                   g_begin, g_end, segment, 0, group_bytes,
                                   {Prefetch::Kind::kNextTile}, tile);
      continue;
    }
    if constexpr (std::is_same_v<Kernels, F32PairKernels>) {
      if (kern.wide_tile != nullptr &&
          p.num_tokens >= kWideMinTokenTiles * kern.mr) {
        RunWideSlices(kern, p, x + 2 * s0, ldx, g_begin, g_end, segment, len,
                      count, accumulate);
        continue;
      }
    }
    // Weights larger than the caches come from memory: the first token tile
    // prefetches the block's groups ahead of itself, the second the next
    // block, so that it arrives while this one is computed.
    const int64_t block = std::max<int64_t>(
        kern.groups[kern.mr], GroupBlockBytes() / group_bytes);
    const Prefetch next_block{Prefetch::Kind::kNextBlock, block, g_end};
    for (int64_t gb = g_begin; gb < g_end; gb += block) {
      ForEachTile<const uint16_t*>(kern.mr, kern.groups, 0, p.num_tokens, gb,
                                   std::min(gb + block, g_end), segment, 0,
                                   group_bytes, next_block, tile);
    }
  }
}

struct AlignedFloats {
  void operator()(float* p) const {
    ::operator delete[](p, std::align_val_t{64});
  }
};

// One product of a call, ready to run: the problem and its path (exactly
// one of kern, bf16 and f32_pairs), and its first unit of kRowsPerUnit
// output rows in the call's numbering of all its products' units.
struct Product {
  Problem p;
  const MatMulKernels* kern;   // f32 products on stored rows
  // bf16 products (MatMulPrecision::kBF16): p.w is then the weights as
  // bf16 pairs.
  const Bf16DotKernels* bf16;
  // f32 products on weights packed as bf16 pairs.
  const F32PairKernels* f32_pairs;
  int64_t first_unit;
  int64_t num_units;
};

// Every product of one x (MatMulWithIsa and MatMulShared): x rounded once
// when a product takes bf16 products, then one parallel pass over all the
// products' output rows, kRowsPerUnit rows a unit (the calling thread alone
// below kMinParallelMacs in all). Each output's bits depend only on its x
// row and weight row, whatever the split.
void RunProducts(CpuIsa isa, const float* x, int64_t num_tokens,
                 int64_t in_features, const MatMulOutput* outputs,
                 int num_outputs, ThreadPool* pool,
                 MatMulPrecision precision) {
  if (num_tokens <= 0) return;
  if (in_features <= 0) {
    for (int i = 0; i < num_outputs; ++i) {
      if (outputs[i].out_features <= 0) continue;
      std::fill(outputs[i].y, outputs[i].y + num_tokens * outputs[i].out_features,
                0.0f);
    }
    return;
  }
  isa = ResolveCpuIsa(isa);
  // The bf16 products run on VDPBF16PS or on their twin.
  const Bf16DotKernels& bf16_kern =
      isa == CpuIsa::kAvx512 && MatMulBf16DotSupported()
          ? matmul_internal::avx512::kBf16DotKernels
          : matmul_internal::portable::kBf16DotKernels;
  const F32PairKernels& f32_pairs_kern =
      isa == CpuIsa::kAvx512 ? matmul_internal::avx512::kF32PairKernels
      : isa == CpuIsa::kAvx2 ? matmul_internal::avx2::kF32PairKernels
                             : matmul_internal::portable::kF32PairKernels;
  std::vector<Product> products;
  products.reserve(static_cast<size_t>(num_outputs));
  std::vector<std::unique_ptr<uint16_t[]>> packed_here;
  bool round_x = false;
  size_t scratch_bytes = 0;  // prefill's pack buffer (f32 on stored rows)
  int64_t units = 0, macs = 0;
  for (int i = 0; i < num_outputs; ++i) {
    const MatMulOutput& o = outputs[i];
    if (o.out_features <= 0) continue;
    Product pr{{x, num_tokens, in_features, static_cast<const char*>(o.w),
                o.w_type, o.out_features, o.y},
               nullptr,
               nullptr,
               nullptr,
               units,
               (o.out_features + kRowsPerUnit - 1) / kRowsPerUnit};
    if (o.layout == WeightLayout::kBf16Pairs &&
        precision == MatMulPrecision::kF32) {
      pr.f32_pairs = &f32_pairs_kern;
    } else if (o.layout == WeightLayout::kBf16Pairs) {
      pr.bf16 = &bf16_kern;
      round_x = true;
    } else if (precision == MatMulPrecision::kBF16 &&
               o.w_type == ElementType::kBF16) {
      // Stored rows: packed here, for this call (the backends pack their
      // weights once, at load: PackBf16Pairs).
      pr.bf16 = &bf16_kern;
      packed_here.emplace_back(
          new uint16_t[Bf16PairsElements(o.out_features, in_features)]);
      PackBf16Pairs(static_cast<const uint16_t*>(o.w), o.out_features,
                    in_features, packed_here.back().get(), pool);
      pr.p.w = reinterpret_cast<const char*>(packed_here.back().get());
      round_x = true;
    } else {
      // The vector paths know the three float weight types; anything else
      // goes through the scalar path's LoadAsF32.
      const bool float_type = o.w_type == ElementType::kF32 ||
                              o.w_type == ElementType::kBF16 ||
                              o.w_type == ElementType::kF16;
      pr.kern = &KernelsFor(float_type ? isa : CpuIsa::kScalar);
      // Decode reads the stored rows directly and needs no buffer.
      if (num_tokens > pr.kern->mr) {
        scratch_bytes = std::max(
            scratch_bytes,
            static_cast<size_t>(BlockingFor(*pr.kern, in_features).scratch) *
                sizeof(float));
      }
    }
    units += pr.num_units;
    macs += num_tokens * in_features * o.out_features;
    products.push_back(pr);
  }
  // x rounded once, here, for every product and worker (num_tokens ·
  // in_features conversions against that many times out_features products).
  // Rows of whole pairs: an odd K's last pair ends in a zero. The buffer is
  // the calling thread's, kept across calls: a fresh one per call came from
  // the kernel (mmap) above 128 KiB, and zeroing its pages cost 5 % of a
  // batched run (prefill chunks of hundreds of tokens). It holds the largest
  // x rounded so far on this thread (prefill chunk × widest K).
  const int64_t ldxb = (in_features + 1) / 2 * 2;
  thread_local std::vector<uint16_t> xb_buffer;
  uint16_t* xb = nullptr;
  if (round_x) {
    const size_t elements = static_cast<size_t>(num_tokens * ldxb);
    if (xb_buffer.size() < elements) xb_buffer.resize(elements);
    xb = xb_buffer.data();
    for (int64_t t = 0; t < num_tokens; ++t) {
      bf16_kern.round(x + t * in_features, in_features, xb + t * ldxb);
      if (ldxb > in_features) xb[t * ldxb + in_features] = 0;
    }
  }
  const auto run_units = [&](float* scratch, int64_t u_begin, int64_t u_end) {
    for (const Product& pr : products) {
      const int64_t b = std::max(u_begin, pr.first_unit);
      const int64_t e = std::min(u_end, pr.first_unit + pr.num_units);
      if (b >= e) continue;
      // A unit is one group of 16 rows.
      static_assert(kRowsPerUnit == 16);
      if (pr.bf16 != nullptr) {
        RunGroups(*pr.bf16, pr.p, xb, ldxb, b - pr.first_unit,
                  e - pr.first_unit);
        continue;
      }
      if (pr.f32_pairs != nullptr) {
        RunGroups(*pr.f32_pairs, pr.p, x, in_features, b - pr.first_unit,
                  e - pr.first_unit);
        continue;
      }
      const int64_t o_begin = (b - pr.first_unit) * kRowsPerUnit;
      const int64_t o_end =
          std::min((e - pr.first_unit) * kRowsPerUnit, pr.p.out_features);
      RunRows(*pr.kern, pr.p, o_begin, o_end, scratch);
    }
  };
  if (pool == nullptr) {
    std::unique_ptr<float, AlignedFloats> scratch(
        scratch_bytes == 0 ? nullptr
                           : static_cast<float*>(::operator new[](
                                 scratch_bytes, std::align_val_t{64})));
    run_units(scratch.get(), 0, units);
    return;
  }
  pool->ParallelForWorker(
      units,
      [&](int worker, int64_t begin, int64_t end) {
        run_units(static_cast<float*>(pool->WorkerScratch(worker, scratch_bytes)),
                  begin, end);
      },
      macs < kMinParallelMacs ? 1 : pool->num_threads());
}

}  // namespace

bool MatMulBf16DotSupported() {
  static const bool supported = CpuIsaSupported(CpuIsa::kAvx512) &&
                                __builtin_cpu_supports("avx512bf16");
  return supported;
}

int64_t Bf16PairsElements(int64_t out_features, int64_t in_features) {
  return (out_features + 15) / 16 * 16 * ((in_features + 1) / 2 * 2);
}

void PackBf16Pairs(const uint16_t* w, int64_t out_features,
                   int64_t in_features, uint16_t* packed, ThreadPool* pool) {
  const int64_t groups = (out_features + 15) / 16;
  const int64_t pairs = (in_features + 1) / 2;
  const auto pack_groups = [&](int64_t g_begin, int64_t g_end) {
    for (int64_t s0 = 0; s0 < pairs; s0 += kBf16PairsPerSegment) {
      const int64_t len = std::min(kBf16PairsPerSegment, pairs - s0);
      uint16_t* segment = packed + s0 * groups * 32;
      for (int64_t g = g_begin; g < g_end; ++g) {
        uint16_t* dst = segment + g * len * 32;
        for (int64_t q = 0; q < len; ++q) {
          for (int64_t j = 0; j < 16; ++j) {
            const int64_t o = 16 * g + j;
            for (int64_t e = 0; e < 2; ++e) {
              const int64_t i = 2 * (s0 + q) + e;
              dst[q * 32 + 2 * j + e] =
                  o < out_features && i < in_features ? w[o * in_features + i]
                                                      : uint16_t{0};
            }
          }
        }
      }
    }
  };
  if (pool == nullptr) {
    pack_groups(0, groups);
  } else {
    pool->ParallelFor(groups, pack_groups);
  }
}

void MatMul(const float* x, int64_t num_tokens, int64_t in_features,
            const void* w, ElementType w_type, int64_t out_features, float* y,
            ThreadPool* pool, MatMulPrecision precision, WeightLayout layout) {
  MatMulWithIsa(CpuIsa::kAuto, x, num_tokens, in_features, w, w_type,
                out_features, y, pool, precision, layout);
}

void MatMulWithIsa(CpuIsa isa, const float* x, int64_t num_tokens,
                   int64_t in_features, const void* w, ElementType w_type,
                   int64_t out_features, float* y, ThreadPool* pool,
                   MatMulPrecision precision, WeightLayout layout) {
  const MatMulOutput output{w, w_type, out_features, y, layout};
  RunProducts(isa, x, num_tokens, in_features, &output, 1, pool, precision);
}

void MatMulShared(const float* x, int64_t num_tokens, int64_t in_features,
                  const MatMulOutput* outputs, int num_outputs,
                  ThreadPool* pool, MatMulPrecision precision) {
  RunProducts(CpuIsa::kAuto, x, num_tokens, in_features, outputs,
              num_outputs, pool, precision);
}

}  // namespace tributary
