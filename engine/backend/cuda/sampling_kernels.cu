// Sampling on the device (Backend::ChooseTokens): one block per logits row
// chooses the row's token by the rule of token_choice.h, the host sampler's
// canonical rule, so that only the ids come back (4 bytes a row instead of
// a vocabulary of floats, and no host pass over it). In order: the raw
// row's max and finiteness, its log-sum-exp and top logprobs when asked,
// the penalties in place (a thread per history entry), the max again, then
// the cuts and the draw on the penalized row.
//
// The rule is a cut of the rank order (by logit, ties to the lower id)
// followed by a walk in id order, and the kernel never sorts:
//  - Every token has a 64-bit rank key, larger ranking first: the logit's
//    bits made order-preserving, then the complement of the id. Keys are
//    distinct, so "the top k" and "the smallest prefix reaching p" are both
//    "every key at or above a cut key".
//  - RankCut finds a cut by radix descent, 4 bits a level from the top: per
//    level one pass over the row sums a measure (1 for top-k, the weight for
//    top-p) into 16 buckets of the digit, among the keys that share the
//    digits found so far; the walk from the top bucket down stops where the
//    running measure reaches the target. It stops as soon as the bucket
//    holds a single token (after about 8 levels with distinct logits; the
//    id bits break ties).
//  - The draw sums the survivors' weights per tile of ids (a lane per 16 or
//    more consecutive ids, the lanes in order; at most kMaxChooseTiles
//    tiles, so a larger vocabulary has longer lanes), walks the tiles in
//    order to the one where uniform · total falls, then its lanes, then the
//    lane's ids, with the same sums in the same order at every stage. The
//    offsets into a tile and a lane are rounded differences, so a target
//    within rounding of a tile's end can miss its lanes: the last survivor
//    with any weight is taken then, as the host does past its total.
// Every reduction has a fixed order (per-thread partial sums, butterflies,
// warps in order), so a row's token does not depend on the other rows, the
// batch or the run. Sums are in f64 as on the host; they are taken in
// another order, so the token can differ from the host's only where a cut
// falls within f64 rounding of a boundary (tested against the host sampler
// in cuda_backend_test). A weight is the f64 exp of the f32 argument,
// rounded to f32 (token_choice.h), on both sides: the device's f64 exp is
// within an ulp of the host's, so the f32 weights differ only when the f64
// result lies within that of an f32 rounding boundary (about 2⁻²⁹ of them),
// where an f32 expf (2 ulp on the device) would differ often.
#include <cfloat>
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kChooseThreads = 512;
constexpr int kChooseWarps = kChooseThreads / kWarpSize;
constexpr int kDigitBits = 4;
constexpr int kBuckets = 1 << kDigitBits;
constexpr int kKeyBits = 64;
// The draw's tiles: a lane per at least kMinIdsPerLane consecutive ids.
constexpr int kMinIdsPerLane = 16;

// Larger ranks first: the logit (−0 as +0, which the host's comparison
// treats as equal), then the lower id.
__device__ __forceinline__ uint64_t RankKey(float logit, int64_t id) {
  if (logit == 0.0f) logit = 0.0f;
  uint32_t bits = __float_as_uint(logit);
  bits = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) |
         (0xffffffffu - static_cast<uint32_t>(id));
}

struct ChooseScratch {
  double bucket_measure[kChooseWarps][kBuckets];
  int bucket_count[kChooseWarps][kBuckets];
  double lane_sums[kChooseWarps][kWarpSize];
  double tile_sums[kMaxChooseTiles];
  double sum_scratch[kChooseWarps];
  BlockArgMaxScratch argmax;
  // Broadcasts from one thread to the block.
  int64_t found_tile;
  double offset;
  int32_t token;
  // The top logprobs' tokens, gathered (any order), then ranked.
  int gathered;
  uint64_t top_keys[kMaxTopLogprobs];
  int32_t top_ids[kMaxTopLogprobs];
};

// The row's weights and survivors.
struct Row {
  const float* x;
  int64_t n;
  float max_logit;
  double inverse_temperature;
  uint64_t floor;     // survivors: rank key ≥ floor ...
  double log_min_p;   // ... and (logit − max) / T ≥ log_min_p (−inf: off)

  __device__ double Weight(float logit) const {
    const float exponent = static_cast<float>(
        (static_cast<double>(logit) - max_logit) * inverse_temperature);
    return static_cast<double>(static_cast<float>(exp(static_cast<double>(exponent))));
  }
  __device__ bool Survives(float logit, int64_t id) const {
    return RankKey(logit, id) >= floor &&
           (static_cast<double>(logit) - max_logit) * inverse_temperature >= log_min_p;
  }
};

// The smallest rank prefix of the survivors whose measure (1 per token when
// `count`, else the weight) reaches `target`: returns the new floor (every
// survivor with a key at or above it is in the prefix, and no other token).
// When rounding leaves the target above the survivors' whole measure, every
// survivor.
template <bool kCount>
__device__ uint64_t RankCut(const Row& row, double target, ChooseScratch& scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  uint64_t prefix = 0;
  double above = 0.0;  // the measure of the survivors above the prefix
  for (int shift = kKeyBits - kDigitBits; shift >= 0; shift -= kDigitBits) {
    const uint64_t high_mask = shift + kDigitBits >= kKeyBits
                                   ? 0
                                   : ~uint64_t{0} << (shift + kDigitBits);
    double measure[kBuckets];
    int tokens[kBuckets];
#pragma unroll
    for (int b = 0; b < kBuckets; ++b) {
      measure[b] = 0.0;
      tokens[b] = 0;
    }
    for (int64_t i = threadIdx.x; i < row.n; i += blockDim.x) {
      const float logit = row.x[i];
      const uint64_t key = RankKey(logit, i);
      if ((key & high_mask) != prefix || !row.Survives(logit, i)) continue;
      const int digit = static_cast<int>((key >> shift) & (kBuckets - 1));
      // Constant indexes only: a run-time index would put the arrays in
      // local memory. Counting needs no f64 sums (the tokens are the count).
      if (kCount) {
#pragma unroll
        for (int b = 0; b < kBuckets; ++b) tokens[b] += digit == b ? 1 : 0;
      } else {
        const double m = row.Weight(logit);
#pragma unroll
        for (int b = 0; b < kBuckets; ++b) {
          if (digit == b) {
            measure[b] += m;
            tokens[b] += 1;
          }
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBuckets; ++b) {
      if (!kCount) measure[b] = WarpSum(measure[b]);
      int t = tokens[b];
#pragma unroll
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        t += __shfl_xor_sync(0xffffffffu, t, offset);
      }
      if (lane == 0) {
        scratch.bucket_measure[warp][b] = measure[b];
        scratch.bucket_count[warp][b] = t;
      }
    }
    __syncthreads();
    // Every thread walks the buckets the same way (the same sums in the same
    // order), from the top digit down.
    int chosen = -1, chosen_tokens = 0;
    for (int b = kBuckets - 1; b >= 0; --b) {
      double bucket = 0.0;
      int tokens_in = 0;
      for (int w = 0; w < kChooseWarps; ++w) {
        if (!kCount) bucket += scratch.bucket_measure[w][b];
        tokens_in += scratch.bucket_count[w][b];
      }
      if (kCount) bucket = tokens_in;
      if (tokens_in > 0 && above + bucket >= target) {
        chosen = b;
        chosen_tokens = tokens_in;
        break;
      }
      above += bucket;
    }
    // The next level's pass overwrites the buckets only after every thread
    // has read them.
    __syncthreads();
    if (chosen < 0) return row.floor;  // rounding: keep every survivor
    prefix |= static_cast<uint64_t>(chosen) << shift;
    // One token in the bucket: it is the last of the prefix, and no other
    // key shares the digits found so far. The prefix's lower bits are 0, so
    // it may lie below the old floor (when the cut is the last survivor):
    // the floor stays.
    if (chosen_tokens == 1) return prefix > row.floor ? prefix : row.floor;
  }
  return prefix > row.floor ? prefix : row.floor;
}

// The survivors' weights summed over tile `tile`'s lane `lane` (its
// ids_per_lane consecutive ids, in order).
__device__ double LaneSum(const Row& row, int64_t tile, int lane,
                          int64_t ids_per_lane) {
  double sum = 0.0;
  const int64_t first = (tile * kWarpSize + lane) * ids_per_lane;
  for (int64_t j = 0; j < ids_per_lane; ++j) {
    const int64_t i = first + j;
    if (i < row.n) {
      const float logit = row.x[i];
      if (row.Survives(logit, i)) sum += row.Weight(logit);
    }
  }
  return sum;
}

// The token drawn from `row` (finite, temperature ≥ the greedy threshold),
// in every thread of the block.
__device__ int32_t DrawToken(Row& row, const TokenChoice& choice,
                             int32_t argmax, ChooseScratch& scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t vocab = row.n;
  row.inverse_temperature = 1.0 / static_cast<double>(choice.temperature);
  row.floor = 0;
  row.log_min_p = -INFINITY;
  // Top-k: the k highest-ranked.
  if (choice.top_k > 0 && choice.top_k < vocab) {
    row.floor = RankCut<true>(row, static_cast<double>(choice.top_k), scratch);
  }
  // Top-p over them: the smallest rank prefix reaching p of their weight.
  if (choice.top_p < 1.0f && choice.top_k != 1) {
    double total = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float logit = row.x[i];
      if (row.Survives(logit, i)) total += row.Weight(logit);
    }
    total = BlockSum(total, scratch.sum_scratch);
    row.floor = RankCut<false>(
        row, static_cast<double>(choice.top_p) * total * (1.0 - 1e-9), scratch);
  }
  // Min-p: a threshold on the logit (the max always stays).
  if (choice.min_p > 0.0f) row.log_min_p = log(static_cast<double>(choice.min_p));

  // The draw: the tiles' sums (a warp per tile, its lanes' sums in order).
  const int64_t lanes = (vocab + kMinIdsPerLane - 1) / kMinIdsPerLane;
  const int64_t ids_per_lane =
      lanes <= kMaxChooseTiles * kWarpSize
          ? kMinIdsPerLane
          : (vocab + kMaxChooseTiles * kWarpSize - 1) / (kMaxChooseTiles * kWarpSize);
  const int64_t tile_ids = ids_per_lane * kWarpSize;
  const int64_t tiles = (vocab + tile_ids - 1) / tile_ids;
  for (int64_t tile = warp; tile < tiles; tile += kChooseWarps) {
    scratch.lane_sums[warp][lane] = LaneSum(row, tile, lane, ids_per_lane);
    __syncwarp();
    if (lane == 0) {
      double sum = 0.0;
      for (int l = 0; l < kWarpSize; ++l) sum += scratch.lane_sums[warp][l];
      scratch.tile_sums[tile] = sum;
    }
    __syncwarp();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int64_t t = 0; t < tiles; ++t) total += scratch.tile_sums[t];
    const double target = choice.uniform * total;
    double cumulative = 0.0;
    scratch.found_tile = -1;
    for (int64_t t = 0; t < tiles; ++t) {
      if (target < cumulative + scratch.tile_sums[t]) {
        scratch.found_tile = t;
        scratch.offset = target - cumulative;
        break;
      }
      cumulative += scratch.tile_sums[t];
    }
    if (scratch.found_tile < 0) {
      // Rounding left the target at or past the total: the last tile with
      // any weight, and in it the last survivor with any (offset +inf).
      // (No tile has any only for settings the engine never sends, a NaN
      // temperature or min_p > 1: the argmax then.)
      for (int64_t t = tiles - 1; t >= 0; --t) {
        if (scratch.tile_sums[t] > 0.0) {
          scratch.found_tile = t;
          break;
        }
      }
      scratch.offset = INFINITY;
    }
  }
  __syncthreads();
  const int64_t tile = scratch.found_tile;
  if (tile < 0) {
    if (threadIdx.x == 0) scratch.token = argmax;
  } else if (warp == 0) {
    scratch.lane_sums[0][lane] = LaneSum(row, tile, lane, ids_per_lane);
    __syncwarp();
    if (lane == 0) {
      // The tile's lanes, then the lane's ids, in the tile sum's order.
      double offset = scratch.offset;
      int found_lane = -1, last_lane = -1;
      for (int l = 0; l < kWarpSize; ++l) {
        const double sum = scratch.lane_sums[0][l];
        if (sum > 0.0) last_lane = l;
        if (offset < sum) {
          found_lane = l;
          break;
        }
        offset -= sum;
      }
      if (found_lane < 0) {
        found_lane = last_lane;
        offset = INFINITY;
      }
      int32_t token = -1, last_token = -1;
      const int64_t first = (tile * kWarpSize + found_lane) * ids_per_lane;
      double cumulative = 0.0;
      for (int64_t j = 0; j < ids_per_lane && first + j < vocab; ++j) {
        const int64_t i = first + j;
        const float logit = row.x[i];
        if (!row.Survives(logit, i)) continue;
        const double w = row.Weight(logit);
        if (w > 0.0) last_token = static_cast<int32_t>(i);
        cumulative += w;
        if (offset < cumulative) {
          token = static_cast<int32_t>(i);
          break;
        }
      }
      scratch.token = token >= 0 ? token : last_token;
    }
  }
  // The token is in; lane_sums and the broadcasts are free again after.
  __syncthreads();
  return scratch.token;
}

// The raw log-sum-exp of `raw` (finite; floor 0, no min-p), returned in
// every thread, and the `num_top` most likely tokens' logprobs into `out`
// (thread 0): the host's formulas (TokenLogprobs), the sum in another
// order; the top by a count cut of the rank keys, gathered and put in rank
// order.
__device__ double TopLogprobs(const Row& raw, int32_t num_top,
                              ChooseScratch& scratch, TokenLogprobs* out) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < raw.n; i += blockDim.x) {
    sum += static_cast<double>(expf(raw.x[i] - raw.max_logit));
  }
  sum = BlockSum(sum, scratch.sum_scratch);
  const double log_sum_exp = raw.max_logit + log(sum);
  const int32_t count = static_cast<int32_t>(
      num_top < raw.n ? (num_top < kMaxTopLogprobs ? num_top : kMaxTopLogprobs)
                      : raw.n);
  if (count > 0) {
    const uint64_t cut =
        count < raw.n ? RankCut<true>(raw, static_cast<double>(count), scratch) : 0;
    if (threadIdx.x == 0) scratch.gathered = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < raw.n; i += blockDim.x) {
      const uint64_t key = RankKey(raw.x[i], i);
      if (key >= cut) {
        const int slot = atomicAdd(&scratch.gathered, 1);
        scratch.top_keys[slot] = key;
        scratch.top_ids[slot] = static_cast<int32_t>(i);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out->count = count;
    // Rank order (larger keys first): an insertion sort of at most 20.
    for (int a = 1; a < count; ++a) {
      const uint64_t key = scratch.top_keys[a];
      const int32_t id = scratch.top_ids[a];
      int b = a;
      for (; b > 0 && scratch.top_keys[b - 1] < key; --b) {
        scratch.top_keys[b] = scratch.top_keys[b - 1];
        scratch.top_ids[b] = scratch.top_ids[b - 1];
      }
      scratch.top_keys[b] = key;
      scratch.top_ids[b] = id;
    }
    for (int r = 0; r < count; ++r) {
      out->top_ids[r] = scratch.top_ids[r];
      out->top_logprobs[r] =
          static_cast<float>(raw.x[scratch.top_ids[r]] - log_sum_exp);
    }
  }
  // The gathered top is read; the scratch is free again.
  __syncthreads();
  return log_sum_exp;
}

// The row's penalties in place (token_choice.h; the host's arithmetic), a
// thread per history entry: the ids are distinct, so no two threads write
// one logit. Each entry keeps the raw logit.
__device__ void ApplyPenalties(float* x, const TokenChoice& choice,
                               TokenHistoryEntry* history) {
  for (int64_t e = threadIdx.x; e < choice.history_count; e += blockDim.x) {
    TokenHistoryEntry& entry = history[choice.history_begin + e];
    const float logit = x[entry.token_id];
    entry.raw_logit = logit;
    x[entry.token_id] = choice.PenalizedLogit(logit, entry.output_count);
  }
}

__global__ void __launch_bounds__(kChooseThreads)
    ChooseTokensKernel(float* logits, int64_t vocab, const TokenChoice* choices,
                       TokenHistoryEntry* history, int32_t* ids,
                       TokenLogprobs* logprobs) {
  BeginAfterPriorGrids();
  __shared__ ChooseScratch scratch;
  const TokenChoice choice = choices[blockIdx.x];
  float* const x = logits + blockIdx.x * vocab;
  Row row;
  row.x = x;
  row.n = vocab;
  row.inverse_temperature = 1.0;
  row.floor = 0;
  row.log_min_p = -INFINITY;
  int argmax;
  bool nonfinite;
  BlockArgMax(x, vocab, scratch.argmax, &row.max_logit, &argmax, &nonfinite);
  if (nonfinite || argmax == INT_MAX) {
    if (threadIdx.x == 0) ids[blockIdx.x] = -1;
    return;  // the whole block: no token, no logprobs
  }
  // Logprobs are of the raw row: its log-sum-exp and top before penalties.
  const bool want_logprobs = logprobs != nullptr && choice.num_logprobs >= 0;
  TokenLogprobs* const out = want_logprobs ? &logprobs[blockIdx.x] : nullptr;
  const double log_sum_exp =
      want_logprobs ? TopLogprobs(row, choice.num_logprobs, scratch, out) : 0.0;
  const bool penalized = choice.has_penalties() && history != nullptr;
  if (penalized) {
    ApplyPenalties(x, choice, history);
    __syncthreads();
    BlockArgMax(x, vocab, scratch.argmax, &row.max_logit, &argmax, &nonfinite);
  }
  const int32_t token = choice.temperature < TokenChoice::kGreedyTemperature
                            ? argmax
                            : DrawToken(row, choice, argmax, scratch);
  if (threadIdx.x != 0) return;
  ids[blockIdx.x] = token;
  if (want_logprobs) {
    float raw = x[token];
    if (penalized) {
      for (int32_t e = 0; e < choice.history_count; ++e) {
        const TokenHistoryEntry& entry = history[choice.history_begin + e];
        if (entry.token_id == token) raw = entry.raw_logit;
      }
    }
    out->chosen = static_cast<float>(raw - log_sum_exp);
  }
}

}  // namespace

void LaunchChooseTokens(float* logits, int64_t num_rows, int64_t vocab,
                        const TokenChoice* choices, TokenHistoryEntry* history,
                        int32_t* ids, TokenLogprobs* logprobs,
                        cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(ChooseTokensKernel, static_cast<unsigned>(num_rows),
                   kChooseThreads, stream)(logits, vocab, choices, history, ids,
                                           logprobs);
}

}  // namespace cuda
}  // namespace tributary
