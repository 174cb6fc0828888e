// The fast paged attention (attention.h) against reference::PagedAttention:
// scrambled block tables, GQA groups, head dims with and without a 16-tail,
// continuation calls (first_position > 0), every instruction-set path (bit
// identical to each other), any thread count (bit identical), and a token's
// output the same bits whether it comes from one prefill or a later call.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/attention.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {
namespace {

struct Cache {
  int64_t block_size, kv_heads, head_dim;
  std::vector<float> k_pool, v_pool;
  std::vector<int32_t> table;
  reference::PagedKvView View() const {
    return {k_pool.data(), v_pool.data(), table.data(),
            block_size,    kv_heads,      head_dim};
  }
};

// A cache holding `positions` random keys/values of one sequence in
// scrambled blocks (with unused blocks between them).
Cache MakeCache(int64_t positions, int64_t block_size, int64_t kv_heads,
                int64_t head_dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Cache c{block_size, kv_heads, head_dim, {}, {}, {}};
  const int64_t blocks = (positions + block_size - 1) / block_size;
  const int64_t pool_blocks = 2 * blocks + 1;
  std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.table.assign(ids.begin(), ids.begin() + blocks);
  const int64_t row = kv_heads * head_dim;
  c.k_pool.assign(pool_blocks * block_size * row,
                  std::nanf(""));  // unused: NaN
  c.v_pool.assign(pool_blocks * block_size * row, std::nanf(""));
  std::vector<float> k(positions * row), v(positions * row);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  reference::WriteKv(k.data(), v.data(), positions, 0, c.table.data(),
                     block_size, kv_heads, head_dim, c.k_pool.data(),
                     c.v_pool.data());
  return c;
}

std::vector<float> RandomQ(int64_t tokens, int64_t heads, int64_t d,
                           uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(tokens * heads * d);
  for (float& x : q) x = 2.0f * normal(rng);
  return q;
}

std::vector<float> Fast(const Cache& c, const float* q, int64_t tokens,
                        int64_t heads, int64_t first, ThreadPool* pool,
                        CpuIsa isa) {
  std::vector<float> out(tokens * heads * c.head_dim, -7.0f);
  AttentionCall call;
  call.q = q;
  call.num_tokens = tokens;
  call.num_q_heads = heads;
  call.first_position = first;
  call.kv = c.View();
  call.scale = 1.0f / std::sqrt(float(c.head_dim));
  call.out = out.data();
  PagedAttention(call, pool, isa);
  return out;
}

std::vector<float> Reference(const Cache& c, const float* q, int64_t tokens,
                             int64_t heads, int64_t first) {
  std::vector<float> out(tokens * heads * c.head_dim);
  reference::PagedAttention(q, tokens, heads, first, c.View(),
                            1.0f / std::sqrt(float(c.head_dim)), out.data());
  return out;
}

std::vector<CpuIsa> Paths() {
  std::vector<CpuIsa> paths = {CpuIsa::kScalar};
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuIsaSupported(isa)) paths.push_back(isa);
  }
  return paths;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    ASSERT_TRUE(std::isfinite(got[i])) << what << " at " << i;
  }
  EXPECT_LE(max_diff, 1e-5f * max_ref) << what;
}

struct Case {
  int64_t heads, kv_heads, head_dim, block_size, first, tokens;
};

TEST(AttentionFastTest, MatchesReferenceOnEveryPath) {
  const Case cases[] = {
      {4, 4, 32, 16, 0, 37},  {8, 2, 128, 16, 0, 70}, {6, 2, 72, 5, 0, 23},
      {8, 2, 128, 16, 45, 9}, {6, 3, 80, 7, 50, 1},   {4, 1, 16, 3, 0, 1},
      {8, 2, 128, 16, 99, 1},
  };
  uint32_t seed = 3;
  for (const Case& k : cases) {
    const Cache cache = MakeCache(k.first + k.tokens, k.block_size, k.kv_heads,
                                  k.head_dim, seed++);
    const std::vector<float> q = RandomQ(k.tokens, k.heads, k.head_dim, seed++);
    const std::vector<float> want =
        Reference(cache, q.data(), k.tokens, k.heads, k.first);
    std::vector<float> first_bits;
    for (CpuIsa isa : Paths()) {
      const std::string what = std::string(CpuIsaName(isa)) +
                               " H=" + std::to_string(k.heads) +
                               " Hkv=" + std::to_string(k.kv_heads) +
                               " d=" + std::to_string(k.head_dim) +
                               " first=" + std::to_string(k.first) +
                               " T=" + std::to_string(k.tokens);
      const std::vector<float> got =
          Fast(cache, q.data(), k.tokens, k.heads, k.first, nullptr, isa);
      ExpectClose(got, want, what);
      if (first_bits.empty()) {
        first_bits = got;
      } else {
        EXPECT_EQ(got, first_bits) << what;
      }
    }
  }
}

TEST(AttentionFastTest, SameBitsForAnyThreadCount) {
  const Cache cache = MakeCache(77, 16, 2, 128, 11);
  const std::vector<float> q = RandomQ(77, 8, 128, 12);
  const std::vector<float> alone =
      Fast(cache, q.data(), 77, 8, 0, nullptr, CpuIsa::kAuto);
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(Fast(cache, q.data(), 77, 8, 0, &pool, CpuIsa::kAuto), alone)
        << threads << " threads";
  }
}

TEST(AttentionFastTest, SplitCallsGiveTheSameBits) {
  const int64_t heads = 8, d = 128, tokens = 50;
  const Cache cache = MakeCache(tokens, 16, 2, d, 21);
  const std::vector<float> q = RandomQ(tokens, heads, d, 22);
  ThreadPool pool(2);
  const std::vector<float> whole =
      Fast(cache, q.data(), tokens, heads, 0, &pool, CpuIsa::kAuto);
  // Prefill 0…29, a continuation 30…48, then one decode step at 49.
  std::vector<float> split;
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, 30}, {30, 49}, {49, 50}}) {
    const std::vector<float> part =
        Fast(cache, q.data() + begin * heads * d, end - begin, heads, begin,
             &pool, CpuIsa::kAuto);
    split.insert(split.end(), part.begin(), part.end());
  }
  EXPECT_EQ(split, whole);
}

// Keys that score about 95 below the row's maximum: their weights e^(s − max)
// are subnormal in f32, which the kernel flushes to zero (flush_denormals.h).
// Against the reference (which keeps them) that moves nothing visible, every
// path keeps the same bits, and the caller's control bits are left as they
// were.
TEST(AttentionFastTest, SubnormalWeightsAreFlushedInsideOnly) {
  const int64_t heads = 4, d = 64, positions = 300;
  Cache cache = MakeCache(positions, 16, 1, d, 31);
  std::vector<float> q(heads * d, 0.0f);
  for (int64_t h = 0; h < heads; ++h) q[h * d] = 8.0f;  // score = k[0]
  // Key dim 0: the first key scores 0, the others −90 … −100 (scale 1/8).
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t block = cache.table[p / cache.block_size];
    const float score = p == 0 ? 0.0f : -90.0f - static_cast<float>(p % 11);
    cache.k_pool[(block * cache.block_size + p % cache.block_size) * d] = score;
  }
  // The control bits (the status flags, bits 0–5, are sticky: the
  // reference itself raises them).
  const auto controls = [] { return _mm_getcsr() & ~0x3Fu; };
  const unsigned csr_before = controls();
  const std::vector<float> want =
      Reference(cache, q.data(), 1, heads, positions - 1);
  const std::vector<float> got =
      Fast(cache, q.data(), 1, heads, positions - 1, nullptr, CpuIsa::kAuto);
  ExpectClose(got, want, "auto");
  for (CpuIsa isa : Paths()) {
    EXPECT_EQ(Fast(cache, q.data(), 1, heads, positions - 1, nullptr, isa), got)
        << CpuIsaName(isa);
  }
  EXPECT_EQ(controls(), csr_before);
}

// The kernel runs flushed: one cached key whose value row is 1e-39
// (subnormal) reads as zero inside, so the output is exactly zero on every
// path, where the unflushed reference returns that value (its only key's
// weight is 1).
TEST(AttentionFastTest, KernelReadsSubnormalsAsZero) {
  const int64_t heads = 2, d = 32;
  Cache cache = MakeCache(1, 16, 1, d, 41);
  for (int64_t i = 0; i < d; ++i) {
    cache.v_pool[cache.table[0] * cache.block_size * d + i] = 1e-39f;
  }
  const std::vector<float> q = RandomQ(1, heads, d, 42);
  const std::vector<float> want = Reference(cache, q.data(), 1, heads, 0);
  EXPECT_TRUE(
      std::any_of(want.begin(), want.end(), [](float x) { return x != 0.0f; }));
  for (CpuIsa isa : Paths()) {
    const std::vector<float> got =
        Fast(cache, q.data(), 1, heads, 0, nullptr, isa);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) {
      return x == 0.0f;
    })) << CpuIsaName(isa);
  }
}

}  // namespace
}  // namespace tributary
