// The CUDA backend against the CPU backend, op by op (label `gpu`; every test
// skips on a machine without a CUDA device or in a build without CUDA).
//
// Inputs are random, from a seed printed at the start and overridable with
// TRIBUTARY_TEST_SEED, so a failure can be replayed. Both backends see the
// same numbers (inputs are rounded to bf16 first, the CUDA activation type).
// Every CUDA output is poisoned with NaN bytes before the op, so an element
// the kernel never writes fails the comparison. Tolerances are bf16's
// (design.md §7): per row, max|cuda − cpu| ≤ tol · max|cpu|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/element_type.h"
#if defined(TRIBUTARY_TEST_CUBLAS_LOADER)
#include "engine/backend/cuda/cublas_api.h"
#include "engine/backend/cuda/cublas_lt_api.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/gemm_tuner.h"
#endif
#if defined(TRIBUTARY_TEST_CUBLAS_LOADER) && !defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/shared_library.h"
#endif

namespace tributary {
namespace {

constexpr ElementType kF32 = ElementType::kF32;
constexpr ElementType kBF16 = ElementType::kBF16;
constexpr ElementType kI32 = ElementType::kI32;

uint64_t TestSeed() {
  static const uint64_t seed = [] {
    uint64_t s = std::random_device{}();
    if (const char* env = std::getenv("TRIBUTARY_TEST_SEED")) {
      s = std::strtoull(env, nullptr, 10);
    }
    std::cout << "cuda_backend_test seed " << s
              << " (replay with TRIBUTARY_TEST_SEED=" << s << ")\n";
    return s;
  }();
  return seed;
}

float RoundBf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

// One operand on both backends, with the host values both were given.
struct Pair {
  Tensor cpu, gpu;
  std::vector<float> values;
};

class CudaBackendTest : public ::testing::Test {
 protected:
  // The backend's options (the kernel forms' tests vary them).
  virtual BackendOptions Options() const { return BackendOptions{}; }

  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) {
      GTEST_SKIP() << "no CUDA device: " << why;
    }
    BackendOptions options = Options();
    options.kind = BackendKind::kCuda;
    auto gpu = CreateBackend(options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    auto cpu = CpuBackend::Create({1});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = std::move(*cpu);
    rng_.seed(TestSeed() ^ std::hash<std::string>{}(
                               ::testing::UnitTest::GetInstance()
                                   ->current_test_info()
                                   ->name()));
    SCOPED_TRACE(::testing::Message() << "seed " << TestSeed());
  }

  std::vector<float> Random(int64_t n, float low, float high, bool round) {
    std::uniform_real_distribution<float> dist(low, high);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = round ? RoundBf16(dist(rng_)) : dist(rng_);
    return v;
  }

  // Uploads `values` into a new tensor of `type` on `backend`.
  Tensor Upload(Backend& backend, ElementType type, const Shape& shape,
                const std::vector<float>& values) {
    auto t = backend.Allocate(type, shape);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return Tensor{};
    if (type == kBF16) {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
      EXPECT_TRUE(backend.CopyFromHost(bits.data(), *t).ok());
    } else {
      EXPECT_TRUE(backend.CopyFromHost(values.data(), *t).ok());
    }
    return *t;
  }

  // A random input in [low, high): f32 on the CPU, `gpu_type` on the GPU,
  // the values rounded to bf16 when that is the GPU's type.
  Pair Input(const Shape& shape, float low, float high,
             ElementType gpu_type = kBF16) {
    Pair p;
    p.values = Random(shape.num_elements(), low, high, gpu_type == kBF16);
    p.cpu = Upload(*cpu_, kF32, shape, p.values);
    p.gpu = Upload(*gpu_, gpu_type, shape, p.values);
    return p;
  }

  // An output: zeros on the CPU, NaN bytes on the GPU.
  Pair Output(const Shape& shape, ElementType gpu_type = kBF16) {
    Pair p;
    p.values.assign(static_cast<size_t>(shape.num_elements()), 0.0f);
    p.cpu = Upload(*cpu_, kF32, shape, p.values);
    auto g = gpu_->Allocate(gpu_type, shape);
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) {
      std::vector<unsigned char> poison(g->size_bytes(), 0xff);
      EXPECT_TRUE(gpu_->CopyFromHost(poison.data(), *g).ok());
      p.gpu = *g;
    }
    return p;
  }

  // A weight imported on both backends from one host buffer of bf16 (the
  // CPU aliases it: `keep` holds it for the test's life).
  Pair Weight(const Shape& shape, float low, float high,
              ElementType host_type = kBF16) {
    Pair p;
    p.values = Random(shape.num_elements(), low, high, host_type == kBF16);
    auto& bytes = keep_.emplace_back();
    if (host_type == kBF16) {
      bytes.resize(p.values.size() * 2);
      for (size_t i = 0; i < p.values.size(); ++i) {
        const uint16_t b = F32ToBf16(p.values[i]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
      }
    } else {
      bytes.resize(p.values.size() * 4);
      std::memcpy(bytes.data(), p.values.data(), bytes.size());
    }
    auto c = cpu_->ImportWeight(bytes.data(), host_type, shape);
    auto g = gpu_->ImportWeight(bytes.data(), host_type, shape);
    EXPECT_TRUE(c.ok() && g.ok());
    if (c.ok()) p.cpu = *c;
    if (g.ok()) p.gpu = *g;
    return p;
  }

  std::vector<float> Read(Backend& backend, const Tensor& t) {
    std::vector<unsigned char> raw(t.size_bytes());
    absl::Status s = backend.CopyToHost(t, raw.data());
    EXPECT_TRUE(s.ok()) << s;
    std::vector<float> out(static_cast<size_t>(t.num_elements()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = LoadAsF32(raw.data(), t.type, i);
    return out;
  }

  // Per row of `row_len`: max|gpu − cpu| ≤ tol · max|cpu| (NaN fails).
  void ExpectClose(const Pair& p, int64_t row_len, double tol,
                   const std::string& what) {
    ASSERT_TRUE(gpu_->Synchronize().ok());
    const std::vector<float> cpu = Read(*cpu_, p.cpu);
    const std::vector<float> gpu = Read(*gpu_, p.gpu);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t r = 0; r * row_len < cpu.size(); ++r) {
      double max_ref = 0.0, max_diff = 0.0;
      for (int64_t i = 0; i < row_len; ++i) {
        const size_t k = r * row_len + i;
        max_ref = std::max(max_ref, std::fabs(double{cpu[k]}));
        const double diff = std::fabs(double{gpu[k]} - cpu[k]);
        max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
      }
      ASSERT_LE(max_diff, tol * max_ref + 1e-6)
          << what << ": row " << r << " (max |ref| " << max_ref << ", seed "
          << TestSeed() << ")";
    }
  }

  // Steps of the delta rule on both backends from one random state in 4
  // slots: `layout` first, then each sequence one decode token further,
  // `steps` steps in all (the slots must be < 4).
  void DeltaRuleSteps(int64_t hk, int64_t hv, int64_t dk, int64_t dv,
                      BatchLayout layout, int steps) {
    const int64_t slots = 4;
    Pair state = Input(Shape{slots, hv, dk, dv}, -0.3f, 0.3f, kF32);
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE(step);
      SetLayout(layout);
      const int64_t t = layout.num_tokens();
      // Unit-norm keys and queries (the decoder's L2 norm), then rounded.
      auto unit_rows = [&](int64_t rows, float scale) {
        std::vector<float> v = Random(rows * dk, -1, 1, false);
        for (int64_t r = 0; r < rows; ++r) {
          double n = 0;
          for (int64_t i = 0; i < dk; ++i) n += double{v[r * dk + i]} * v[r * dk + i];
          for (int64_t i = 0; i < dk; ++i) {
            v[r * dk + i] = RoundBf16(static_cast<float>(v[r * dk + i] * scale / std::sqrt(n)));
          }
        }
        return v;
      };
      const Shape qk_shape{t, hk, dk};
      Pair q, k;
      q.values = unit_rows(t * hk, 1.0f / std::sqrt(static_cast<float>(dk)));
      k.values = unit_rows(t * hk, 1.0f);
      q.cpu = Upload(*cpu_, kF32, qk_shape, q.values);
      q.gpu = Upload(*gpu_, kBF16, qk_shape, q.values);
      k.cpu = Upload(*cpu_, kF32, qk_shape, k.values);
      k.gpu = Upload(*gpu_, kBF16, qk_shape, k.values);
      Pair v = Input(Shape{t, hv, dv}, -1, 1);
      Pair g = Input(Shape{t, hv}, -2.0f, -0.01f, kF32);
      Pair beta = Input(Shape{t, hv}, 0.0f, 1.0f, kF32);
      Pair out = Output(Shape{t, hv, dv});
      cpu_->GatedDeltaRule(q.cpu, k.cpu, v.cpu, g.cpu, beta.cpu, state.cpu, out.cpu);
      gpu_->GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, state.gpu, out.gpu);
      ExpectClose(out, dv, 2e-2, "GatedDeltaRule out");
      ExpectClose(state, dk * dv, 1e-3, "GatedDeltaRule state");
      int64_t offset = 0;
      for (SequenceSlice& s : layout.sequences) {
        s.first_position += s.num_tokens;
        s.token_offset = offset++;
        s.num_tokens = 1;
      }
    }
  }

  struct AttentionDims {
    int64_t heads, kv_heads, head_dim;
  };
  // Paged attention on both backends for sequences of tokens[i] new tokens
  // after cached[i], each with blocks_per_seq blocks of 16 drawn at random
  // from the pool, random caches and queries.
  void AttentionAgainstTheCpu(const AttentionDims& d,
                              const std::vector<int64_t>& tokens,
                              const std::vector<int64_t>& cached,
                              int64_t blocks_per_seq) {
    const int64_t block_size = 16;
    const int64_t num_seqs = static_cast<int64_t>(tokens.size());
    const int64_t blocks = blocks_per_seq * num_seqs;
    std::vector<int32_t> free = ShuffledBlocks(blocks);
    BatchLayout layout;
    int64_t offset = 0;
    for (int64_t i = 0; i < num_seqs; ++i) {
      SequenceSlice s;
      s.token_offset = offset;
      s.num_tokens = tokens[i];
      s.first_position = cached[i];
      s.state_slot = static_cast<int32_t>(i);
      for (int64_t b = 0; b < blocks_per_seq; ++b) {
        s.block_table.push_back(free.back());
        free.pop_back();
      }
      offset += tokens[i];
      layout.sequences.push_back(s);
    }
    SetLayout(layout);
    Pair k_pool = Input(Shape{blocks, block_size, d.kv_heads, d.head_dim}, -1, 1);
    Pair v_pool = Input(Shape{blocks, block_size, d.kv_heads, d.head_dim}, -1, 1);
    AttendOverThePools(d, layout.num_tokens(), k_pool, v_pool);
  }

  // Random queries of t tokens attend over the pools on both backends.
  void AttendOverThePools(const AttentionDims& d, int64_t t, const Pair& k_pool,
                          const Pair& v_pool) {
    Pair q = Input(Shape{t, d.heads, d.head_dim}, -2, 2);
    Pair out = Output(Shape{t, d.heads, d.head_dim});
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
    cpu_->PagedAttention(q.cpu, k_pool.cpu, v_pool.cpu, scale, out.cpu);
    gpu_->PagedAttention(q.gpu, k_pool.gpu, v_pool.gpu, scale, out.gpu);
    ExpectClose(out, d.head_dim, 2e-2, "PagedAttention");
  }

  // Block ids 0 … n − 1 in a random order (tables drawn from the back).
  std::vector<int32_t> ShuffledBlocks(int64_t n) {
    std::vector<int32_t> blocks(static_cast<size_t>(n));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng_);
    return blocks;
  }

  // Both backends run the same layout.
  void SetLayout(const BatchLayout& layout) {
    ASSERT_TRUE(cpu_->SetBatchLayout(layout).ok());
    ASSERT_TRUE(gpu_->SetBatchLayout(layout).ok());
  }

  // Three sequences: a prefill from position 0, a decode step, and a
  // later chunk, with blocks drawn at random from the pool.
  BatchLayout MixedLayout(int64_t block_size, int64_t num_blocks) {
    struct S {
      int64_t num_tokens, first_position;
      int32_t slot;
    };
    const S seqs[] = {{9, 0, 2}, {1, 21, 0}, {6, 5, 3}};
    std::vector<int32_t> free = ShuffledBlocks(num_blocks);
    BatchLayout layout;
    int64_t offset = 0;
    for (const S& s : seqs) {
      SequenceSlice slice;
      slice.token_offset = offset;
      slice.num_tokens = s.num_tokens;
      slice.first_position = s.first_position;
      slice.state_slot = s.slot;
      const int64_t positions = s.first_position + s.num_tokens;
      for (int64_t p = 0; p < positions; p += block_size) {
        slice.block_table.push_back(free.back());
        free.pop_back();
      }
      layout.sequences.push_back(slice);
      offset += s.num_tokens;
    }
    return layout;
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937_64 rng_;
  std::vector<std::vector<unsigned char>> keep_;
};

TEST_F(CudaBackendTest, FillRandomEqualsTheCpuBitForBit) {
  for (ElementType type : {kF32, kBF16}) {
    const Shape shape{3, 1000};
    auto c = cpu_->Allocate(type, shape);
    auto g = gpu_->Allocate(type, shape);
    ASSERT_TRUE(c.ok() && g.ok());
    cpu_->FillRandom(*c, 1234, -0.5f, 0.25f, type);
    gpu_->FillRandom(*g, 1234, -0.5f, 0.25f, type);
    std::vector<unsigned char> a(c->size_bytes()), b(g->size_bytes());
    ASSERT_TRUE(cpu_->CopyToHost(*c, a.data()).ok());
    ASSERT_TRUE(gpu_->CopyToHost(*g, b.data()).ok());
    EXPECT_EQ(a, b) << ElementTypeName(type);
  }
}

TEST_F(CudaBackendTest, ImportConvertsMatricesToBf16AndKeepsVectors) {
  Pair m = Weight(Shape{8, 16}, -1, 1, kF32);
  EXPECT_EQ(m.gpu.type, kBF16);
  const std::vector<float> got = Read(*gpu_, m.gpu);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], RoundBf16(m.values[i])) << i;
  }
  Pair v = Weight(Shape{16}, -1, 1, kF32);
  EXPECT_EQ(v.gpu.type, kF32);
  EXPECT_EQ(Read(*gpu_, v.gpu), v.values);
}

TEST_F(CudaBackendTest, EmbeddingGather) {
  Pair table = Weight(Shape{50, 24}, -1, 1);
  const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  auto cid = cpu_->Allocate(kI32, Shape{5});
  auto gid = gpu_->Allocate(kI32, Shape{5});
  ASSERT_TRUE(cid.ok() && gid.ok());
  ASSERT_TRUE(cpu_->CopyFromHost(ids.data(), *cid).ok());
  ASSERT_TRUE(gpu_->CopyFromHost(ids.data(), *gid).ok());
  Pair out = Output(Shape{5, 24});
  cpu_->EmbeddingGather(*cid, table.cpu, out.cpu);
  gpu_->EmbeddingGather(*gid, table.gpu, out.gpu);
  ExpectClose(out, 24, 0.0, "EmbeddingGather");
}

TEST_F(CudaBackendTest, RmsNormSeparateAndInPlace) {
  Pair x = Input(Shape{7, 300}, -3, 3);
  Pair w = Weight(Shape{300}, -0.5f, 0.5f);
  Pair out = Output(Shape{7, 300});
  cpu_->RmsNorm(x.cpu, w.cpu, 1e-6f, out.cpu);
  gpu_->RmsNorm(x.gpu, w.gpu, 1e-6f, out.gpu);
  ExpectClose(out, 300, 1e-2, "RmsNorm");
  cpu_->RmsNorm(x.cpu, w.cpu, 1e-6f, x.cpu);
  gpu_->RmsNorm(x.gpu, w.gpu, 1e-6f, x.gpu);
  ExpectClose(x, 300, 1e-2, "RmsNorm in place");
}

#if defined(TRIBUTARY_TEST_CUBLAS_LOADER)
// A graph region is replayed only for exactly the same launches: the same
// ops on the same tensors with new data replay it, a changed argument (eps)
// captures another; every result is the CPU's. Host copies inside a region
// are refused.
TEST_F(CudaBackendTest, GraphRegionsReplayOnlyTheSameLaunches) {
  auto* cuda = dynamic_cast<CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  Pair x = Input(Shape{5, 64}, -3, 3);
  Pair w = Weight(Shape{48, 64}, -0.5f, 0.5f);
  Pair norm_w = Weight(Shape{64}, -0.5f, 0.5f);
  Pair normed = Output(Shape{5, 64});
  Pair y = Output(Shape{5, 48});
  for (const float eps : {1e-6f, 1e-6f, 1e-2f, 1e-6f}) {
    // New data in the same tensors each time.
    const std::vector<float> fresh = Random(5 * 64, -3, 3, true);
    std::vector<uint16_t> bits(fresh.size());
    for (size_t i = 0; i < fresh.size(); ++i) bits[i] = F32ToBf16(fresh[i]);
    ASSERT_TRUE(cpu_->CopyFromHost(fresh.data(), x.cpu).ok());
    ASSERT_TRUE(gpu_->CopyFromHost(bits.data(), x.gpu).ok());
    cpu_->RmsNorm(x.cpu, norm_w.cpu, eps, normed.cpu);
    cpu_->MatMul(normed.cpu, w.cpu, y.cpu);
    gpu_->BeginGraphRegion();
    gpu_->RmsNorm(x.gpu, norm_w.gpu, eps, normed.gpu);
    gpu_->MatMul(normed.gpu, w.gpu, y.gpu);
    std::vector<float> host(5 * 48);
    EXPECT_FALSE(gpu_->CopyToHost(y.gpu, host.data()).ok());
    ASSERT_TRUE(gpu_->EndGraphRegion().ok());
    ExpectClose(normed, 64, 1e-2, "RmsNorm in a region");
    ExpectClose(y, 48, 2e-2, "MatMul in a region");
  }
  EXPECT_EQ(cuda->graph_stats().captured, 2);  // eps 1e-6, then 1e-2
  EXPECT_EQ(cuda->graph_stats().replayed, 2);
  EXPECT_EQ(cuda->graph_stats().eager, 0);
}
#endif

TEST_F(CudaBackendTest, GatedRmsNorm) {
  Pair o = Input(Shape{12, 16}, -2, 2);
  Pair z = Input(Shape{12, 16}, -4, 4);
  Pair w = Weight(Shape{16}, 0.5f, 1.5f, kF32);
  Pair out = Output(Shape{12, 16});
  cpu_->GatedRmsNorm(o.cpu, z.cpu, w.cpu, 1e-6f, out.cpu);
  gpu_->GatedRmsNorm(o.gpu, z.gpu, w.gpu, 1e-6f, out.gpu);
  ExpectClose(out, 16, 1e-2, "GatedRmsNorm");
}

TEST_F(CudaBackendTest, ResidualAddWithStatistics) {
  const int64_t tokens = 6, hidden = 200;
  Pair x = Input(Shape{tokens, hidden}, -2, 2);
  Pair u = Input(Shape{tokens, hidden}, -0.5f, 0.5f);
  // Token 4's update holds a NaN: only its non-finite flag may be set.
  std::vector<float> u_values = u.values;
  u_values[4 * hidden + 7] = NAN;
  ASSERT_TRUE(cpu_->CopyFromHost(u_values.data(), u.cpu).ok());
  std::vector<uint16_t> bits(u_values.size());
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = F32ToBf16(u_values[i]);
  ASSERT_TRUE(gpu_->CopyFromHost(bits.data(), u.gpu).ok());
  Pair stats = Output(Shape{tokens, kResidualStatsColumns}, kF32);
  cpu_->ResidualAdd(x.cpu, u.cpu, stats.cpu);
  gpu_->ResidualAdd(x.gpu, u.gpu, stats.gpu);
  ASSERT_TRUE(gpu_->Synchronize().ok());
  const std::vector<float> sum = Read(*cpu_, x.cpu);
  const std::vector<float> c = Read(*cpu_, stats.cpu);
  const std::vector<float> g = Read(*gpu_, stats.gpu);
  for (int64_t t = 0; t < tokens; ++t) {
    SCOPED_TRACE(t);
    const float* cr = c.data() + t * kResidualStatsColumns;
    const float* gr = g.data() + t * kResidualStatsColumns;
    EXPECT_EQ(gr[kStatNonFinite], cr[kStatNonFinite]);
    EXPECT_EQ(gr[kStatNonFinite], t == 4 ? 1.0f : 0.0f);
    if (t == 4) continue;  // the norms of a NaN row are NaN on both
    for (int col : {kStatStreamNorm, kStatUpdateNorm, kStatSumNorm, kStatMaxAbs}) {
      EXPECT_NEAR(gr[col], cr[col], 1e-2 * std::fabs(cr[col])) << "column " << col;
    }
    // The dimension of the largest |x + u| (bf16 rounding may pick another
    // one within rounding of the maximum).
    const int64_t dim = static_cast<int64_t>(gr[kStatMaxAbsDim]);
    ASSERT_GE(dim, 0);
    ASSERT_LT(dim, hidden);
    EXPECT_GE(std::fabs(sum[t * hidden + dim]), 0.99f * cr[kStatMaxAbs]);
  }
  // The sums themselves, rows other than the NaN one.
  const std::vector<float> gx = Read(*gpu_, x.gpu);
  for (int64_t i = 0; i < tokens * hidden; ++i) {
    if (i / hidden == 4) continue;
    ASSERT_NEAR(gx[i], sum[i], 1e-2 * 2.5) << i;
  }
}

TEST_F(CudaBackendTest, ResidualAddWithoutStatistics) {
  Pair x = Input(Shape{3, 64}, -2, 2);
  Pair u = Input(Shape{3, 64}, -1, 1);
  cpu_->ResidualAdd(x.cpu, u.cpu, Tensor{});
  gpu_->ResidualAdd(x.gpu, u.gpu, Tensor{});
  ExpectClose(x, 64, 1e-2, "ResidualAdd");
}

TEST_F(CudaBackendTest, ElementWise) {
  Pair gate = Input(Shape{9, 70}, -6, 6);
  Pair up = Input(Shape{9, 70}, -2, 2);
  Pair out = Output(Shape{9, 70});
  cpu_->SwiGlu(gate.cpu, up.cpu, out.cpu);
  gpu_->SwiGlu(gate.gpu, up.gpu, out.gpu);
  ExpectClose(out, 70, 1e-2, "SwiGlu");
  cpu_->SwiGlu(gate.cpu, up.cpu, gate.cpu);  // out aliasing gate
  gpu_->SwiGlu(gate.gpu, up.gpu, gate.gpu);
  ExpectClose(gate, 70, 1e-2, "SwiGlu in place");

  Pair o = Input(Shape{9, 70}, -2, 2);
  Pair g = Input(Shape{9, 70}, -8, 8);
  cpu_->SigmoidGate(o.cpu, g.cpu);
  gpu_->SigmoidGate(o.gpu, g.gpu);
  ExpectClose(o, 70, 1e-2, "SigmoidGate");

  Pair l2 = Input(Shape{10, 32}, -1, 1);
  cpu_->L2NormRows(l2.cpu, 16, 0.25f);
  gpu_->L2NormRows(l2.gpu, 16, 0.25f);
  ExpectClose(l2, 16, 1e-2, "L2NormRows");
}

TEST_F(CudaBackendTest, GdnGatesInF32) {
  const int64_t tokens = 11, heads = 6;
  Pair a = Input(Shape{tokens, heads}, -30, 30);  // both softplus branches
  Pair b = Input(Shape{tokens, heads}, -5, 5);
  Pair a_log = Weight(Shape{heads}, 0, 2.7f, kF32);
  Pair dt_bias = Weight(Shape{heads}, -6, 2);
  Pair g = Output(Shape{tokens, heads}, kF32);
  Pair beta = Output(Shape{tokens, heads}, kF32);
  cpu_->GdnGates(a.cpu, b.cpu, a_log.cpu, dt_bias.cpu, g.cpu, beta.cpu);
  gpu_->GdnGates(a.gpu, b.gpu, a_log.gpu, dt_bias.gpu, g.gpu, beta.gpu);
  ExpectClose(g, 1, 1e-5, "GdnGates g");
  ExpectClose(beta, 1, 1e-5, "GdnGates beta");
}

TEST_F(CudaBackendTest, CopyColumnsGatherRowsAndSteering) {
  Pair src = Input(Shape{5, 30}, -1, 1);
  Pair dst = Output(Shape{5, 12});
  cpu_->CopyColumns(src.cpu, 9, dst.cpu);
  gpu_->CopyColumns(src.gpu, 9, dst.gpu);
  ExpectClose(dst, 12, 0.0, "CopyColumns");

  const std::vector<int32_t> rows = {4, 0, 2};
  auto cr = cpu_->Allocate(kI32, Shape{3});
  auto gr = gpu_->Allocate(kI32, Shape{3});
  ASSERT_TRUE(cr.ok() && gr.ok());
  ASSERT_TRUE(cpu_->CopyFromHost(rows.data(), *cr).ok());
  ASSERT_TRUE(gpu_->CopyFromHost(rows.data(), *gr).ok());
  Pair gathered = Output(Shape{3, 30});
  cpu_->GatherRows(src.cpu, *cr, gathered.cpu);
  gpu_->GatherRows(src.gpu, *gr, gathered.gpu);
  ExpectClose(gathered, 30, 0.0, "GatherRows");

  // Steering and ablation touch rows [1, 4) only.
  Pair x = Input(Shape{5, 30}, -1, 1);
  Pair v = Input(Shape{30}, -1, 1, kF32);
  cpu_->AddScaledVector(x.cpu, 1, 4, v.cpu, 2.5f);
  gpu_->AddScaledVector(x.gpu, 1, 4, v.gpu, 2.5f);
  ExpectClose(x, 30, 1e-2, "AddScaledVector");
  std::vector<float> unit = Random(30, -1, 1, false);
  double norm = 0;
  for (float e : unit) norm += double{e} * e;
  for (float& e : unit) e = static_cast<float>(e / std::sqrt(norm));
  Pair u;
  u.values = unit;
  u.cpu = Upload(*cpu_, kF32, Shape{30}, unit);
  u.gpu = Upload(*gpu_, kF32, Shape{30}, unit);
  cpu_->ProjectOut(x.cpu, 1, 4, u.cpu);
  gpu_->ProjectOut(x.gpu, 1, 4, u.gpu);
  ExpectClose(x, 30, 2e-2, "ProjectOut");
  const std::vector<float> before = x.values;
  const std::vector<float> after = Read(*gpu_, x.gpu);
  for (int64_t i : {int64_t{0}, int64_t{29}, int64_t{4 * 30}, int64_t{4 * 30 + 29}}) {
    EXPECT_EQ(after[i], before[i]) << "row outside [1, 4) changed at " << i;
  }
}

// The argmax of each row as the CPU finds it: ties to the lowest index, a
// row with a NaN or an infinity gives -1; rows wider than a block's threads.
TEST_F(CudaBackendTest, ArgMaxRows) {
  const int64_t rows = 5, width = 3000;
  std::vector<float> values = Random(rows * width, -4, 4, false);
  values[0 * width + 2500] = 9.0f;  // row 0: a tie, the lower index wins
  values[0 * width + 17] = 9.0f;
  values[1 * width + 2999] = 8.0f;  // row 1: the last element
  values[2 * width + 40] = NAN;
  values[3 * width + 7] = -INFINITY;
  Tensor x_cpu = Upload(*cpu_, kF32, Shape{rows, width}, values);
  Tensor x_gpu = Upload(*gpu_, kF32, Shape{rows, width}, values);
  auto ids_cpu = cpu_->Allocate(ElementType::kI32, Shape{rows});
  auto ids_gpu = gpu_->Allocate(ElementType::kI32, Shape{rows});
  ASSERT_TRUE(ids_cpu.ok() && ids_gpu.ok());
  cpu_->ArgMaxRows(x_cpu, *ids_cpu);
  gpu_->ArgMaxRows(x_gpu, *ids_gpu);
  std::vector<int32_t> want(rows), got(rows);
  ASSERT_TRUE(cpu_->CopyToHost(*ids_cpu, want.data()).ok());
  ASSERT_TRUE(gpu_->CopyToHost(*ids_gpu, got.data()).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(want[0], 17);
  EXPECT_EQ(want[1], 2999);
  EXPECT_EQ(want[2], -1);
  EXPECT_EQ(want[3], -1);
}

// Sampling on the device gives the CPU reference's token (the host
// sampler's, choose_token_test) row by row, in one call of rows with
// different settings: greedy, temperature alone, top-k (1, small, larger
// than the vocabulary), top-p (with and without top-k), min-p, and the
// uniform's extremes; bf16-rounded logits so that ties are common; a NaN
// and an -inf row give -1. Also at the 27B's vocabulary, and past the
// draw's 1024 tiles of 512 ids. Rows asking
// logprobs (0, 1, 5 or 20 of the top) get the reference's ranking exactly
// and its values to f32 rounding (the log-sum-exp's sum runs in another
// order); every third row has penalties.
TEST_F(CudaBackendTest, ChooseTokensFollowTheReference) {
  struct Settings {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
  };
  const Settings settings[] = {
      {0.0f, 0, 1.0f, 0.0f},   {1.0f, 0, 1.0f, 0.0f},    {0.7f, 50, 1.0f, 0.0f},
      {1.0f, 0, 0.9f, 0.0f},   {1.3f, 20, 0.5f, 0.0f},   {1.0f, 1, 0.9f, 0.0f},
      {0.8f, 0, 1.0f, 0.1f},   {1.0f, 40, 0.95f, 0.05f}, {2.0f, 0, 0.05f, 0.0f},
      {1.0f, 500, 0.99f, 0.0f}, {0.5f, 3, 1.0f, 1.0f},   {1.0f, 100000, 0.8f, 0.0f},
      // Top-p needing every top-k survivor: the cut is the k-th token.
      {1.0f, 5, 0.999f, 0.0f}};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  // 600001: past 1024 tiles of 512 ids, so the draw's lanes grow.
  for (int64_t vocab : {int64_t{3001}, int64_t{248320}, int64_t{600001}}) {
    SCOPED_TRACE(vocab);
    const int64_t rows = vocab > 300000 ? 2 : vocab > 100000 ? 4 : 50;
    std::vector<float> values(static_cast<size_t>(rows * vocab));
    for (float& v : values) v = RoundBf16(normal(rng_));
    std::vector<TokenChoice> choices(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const Settings& s = settings[r % std::size(settings)];
      const double u = r % 7 == 0 ? 0.0 : r % 7 == 1 ? std::nextafter(1.0, 0.0) : uniform(rng_);
      choices[r] = TokenChoice{s.temperature, s.top_k, s.top_p, s.min_p, u};
      const int32_t asks[] = {-1, 0, 1, 5, 20};
      choices[r].num_logprobs = asks[r % 5];
    }
    // Every third row has penalties over its 30 most likely ids (output
    // counts 0 to 3), so that they move its token; its logprobs must not see
    // them.
    std::vector<TokenHistoryEntry> history;
    for (int64_t r = 2; r < rows; r += 3) {
      choices[r].repetition_penalty = 1.3f;
      choices[r].presence_penalty = 0.2f;
      choices[r].frequency_penalty = 0.1f;
      choices[r].history_begin = static_cast<int32_t>(history.size());
      std::vector<int32_t> ids(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      const float* row = values.data() + r * vocab;
      std::partial_sort(ids.begin(), ids.begin() + 30, ids.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      for (int e = 0; e < 30; ++e) {
        history.push_back(TokenHistoryEntry{ids[e], e % 4, 0.0f});
      }
      choices[r].history_count = 30;
    }
    if (rows > 10) {
      values[10 * vocab + 40] = NAN;
      values[11 * vocab + 7] = -INFINITY;
      // Row 49 samples without truncation at u = 0: its id 0 weighs 0 (e^-1000
      // underflows) and must be walked past.
      values[49 * vocab + 0] = -1000.0f;
      choices[49] = TokenChoice{1.0f, 0, 1.0f, 0.0f, 0.0};
    }
    const Shape choice_shape{rows, kTokenChoiceWords};
    std::vector<int32_t> choice_words(static_cast<size_t>(rows * kTokenChoiceWords));
    std::memcpy(choice_words.data(), choices.data(), choice_words.size() * 4);
    auto upload_words = [&](Backend& backend) {
      auto t = backend.Allocate(kI32, choice_shape);
      EXPECT_TRUE(t.ok() && backend.CopyFromHost(choice_words.data(), *t).ok());
      return *t;
    };
    auto upload_history = [&](Backend& backend) {
      auto t = backend.Allocate(
          kI32, Shape{static_cast<int64_t>(history.size()), kTokenHistoryWords});
      EXPECT_TRUE(t.ok() && backend.CopyFromHost(history.data(), *t).ok());
      return *t;
    };
    Tensor x_cpu = Upload(*cpu_, kF32, Shape{rows, vocab}, values);
    Tensor x_gpu = Upload(*gpu_, kF32, Shape{rows, vocab}, values);
    auto ids_cpu = cpu_->Allocate(kI32, Shape{rows});
    auto ids_gpu = gpu_->Allocate(kI32, Shape{rows});
    const Shape logprob_shape{rows, kTokenLogprobsWords};
    auto logprobs_cpu = cpu_->Allocate(kI32, logprob_shape);
    auto logprobs_gpu = gpu_->Allocate(kI32, logprob_shape);
    ASSERT_TRUE(ids_cpu.ok() && ids_gpu.ok() && logprobs_cpu.ok() && logprobs_gpu.ok());
    cpu_->ChooseTokens(x_cpu, upload_words(*cpu_), upload_history(*cpu_),
                       *ids_cpu, *logprobs_cpu);
    gpu_->ChooseTokens(x_gpu, upload_words(*gpu_), upload_history(*gpu_),
                       *ids_gpu, *logprobs_gpu);
    std::vector<int32_t> want(rows), got(rows);
    ASSERT_TRUE(cpu_->CopyToHost(*ids_cpu, want.data()).ok());
    ASSERT_TRUE(gpu_->CopyToHost(*ids_gpu, got.data()).ok());
    std::vector<TokenLogprobs> want_lp(rows), got_lp(rows);
    ASSERT_TRUE(cpu_->CopyToHost(*logprobs_cpu, want_lp.data()).ok());
    ASSERT_TRUE(gpu_->CopyToHost(*logprobs_gpu, got_lp.data()).ok());
    for (int64_t r = 0; r < rows; ++r) {
      const TokenChoice& c = choices[r];
      SCOPED_TRACE(::testing::Message()
                   << "row " << r << ": T " << c.temperature << " k " << c.top_k
                   << " p " << c.top_p << " min_p " << c.min_p << " u "
                   << c.uniform << " logprobs " << c.num_logprobs << " penalties "
                   << c.has_penalties() << " (seed " << TestSeed() << ")");
      EXPECT_EQ(got[r], want[r]);
      if (want[r] < 0 || c.num_logprobs < 0) continue;
      EXPECT_NEAR(got_lp[r].chosen, want_lp[r].chosen, 1e-5);
      ASSERT_EQ(got_lp[r].count, want_lp[r].count);
      ASSERT_EQ(got_lp[r].count, c.num_logprobs);
      for (int32_t k = 0; k < got_lp[r].count; ++k) {
        EXPECT_EQ(got_lp[r].top_ids[k], want_lp[r].top_ids[k]) << "top " << k;
        EXPECT_NEAR(got_lp[r].top_logprobs[k], want_lp[r].top_logprobs[k], 1e-5);
      }
    }
    if (rows > 10) {
      EXPECT_EQ(want[10], -1);
      EXPECT_EQ(want[11], -1);
    }
  }
}

TEST_F(CudaBackendTest, ZeroAndZeroRows) {
  Pair x = Input(Shape{4, 10}, 1, 2);
  gpu_->ZeroRows(x.gpu, 1, 3);
  cpu_->ZeroRows(x.cpu, 1, 3);
  ExpectClose(x, 10, 0.0, "ZeroRows");
  gpu_->Zero(x.gpu);
  for (float v : Read(*gpu_, x.gpu)) ASSERT_EQ(v, 0.0f);
}

// CopyRows (prefix-cache checkpoints and restores): the rows given, byte
// for byte as on the CPU, every other row untouched, in the pools' types
// (bf16 windows and KV, f32 states). Rows outside the tensor, overlapping
// rows, and a copy inside a graph region are errors reported at the next
// Synchronize (once), and copy nothing.
TEST_F(CudaBackendTest, CopyRowsCopiesItsRowsOnlyAndRefusesBadOnes) {
  for (const ElementType type : {kBF16, kF32}) {
    SCOPED_TRACE(ElementTypeName(type));
    Pair x = Input(Shape{6, 3, 16}, -4, 4, type);
    cpu_->CopyRows(x.cpu, 1, 4, 2);
    gpu_->CopyRows(x.gpu, 1, 4, 2);
    cpu_->CopyRows(x.cpu, 5, 0, 1);
    gpu_->CopyRows(x.gpu, 5, 0, 1);
    ExpectClose(x, 16, 0.0, "CopyRows");
    const std::vector<float> before = Read(*gpu_, x.gpu);
    const struct {
      int64_t src, dst, rows;
      const char* what;
    } bad[] = {{5, 0, 2, "outside"}, {0, -1, 1, "outside"},
               {1, 2, 2, "overlapping"}};
    for (const auto& b : bad) {
      gpu_->CopyRows(x.gpu, b.src, b.dst, b.rows);
      const absl::Status s = gpu_->Synchronize();
      EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
      EXPECT_NE(s.message().find(b.what), std::string::npos) << s;
      EXPECT_TRUE(gpu_->Synchronize().ok()) << "the error is reported once";
    }
    gpu_->BeginGraphRegion();
    gpu_->CopyRows(x.gpu, 0, 3, 1);
    EXPECT_TRUE(gpu_->EndGraphRegion().ok());
    const absl::Status s = gpu_->Synchronize();
    EXPECT_NE(s.message().find("graph region"), std::string::npos) << s;
    EXPECT_EQ(Read(*gpu_, x.gpu), before) << "a refused copy copies nothing";
  }
}

TEST_F(CudaBackendTest, RopeAtEachTokensPosition) {
  BatchLayout layout = MixedLayout(4, 32);
  // Positions far into a long context too (large angles).
  layout.sequences[1].first_position = 200000;
  SetLayout(layout);
  const int64_t tokens = layout.num_tokens();
  for (int64_t head_dim : {32, 256}) {
    Pair x = Input(Shape{tokens, 3, head_dim}, -1, 1);
    cpu_->Rope(x.cpu, head_dim / 4, 1e7f);
    gpu_->Rope(x.gpu, head_dim / 4, 1e7f);
    ExpectClose(x, head_dim, 2e-2, "Rope");
  }
}

TEST_F(CudaBackendTest, CausalConvCarriesItsWindowAcrossSteps) {
  const int64_t channels = 40, kernel = 4, slots = 4;
  Pair w = Weight(Shape{channels, kernel}, -0.5f, 0.5f);
  Pair window = Input(Shape{slots, kernel - 1, channels}, -1, 1);
  BatchLayout layout = MixedLayout(4, 32);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    SetLayout(layout);
    const int64_t tokens = layout.num_tokens();
    Pair x = Input(Shape{tokens, channels}, -2, 2);
    Pair out = Output(Shape{tokens, channels});
    cpu_->CausalConv1dSilu(x.cpu, w.cpu, window.cpu, out.cpu);
    gpu_->CausalConv1dSilu(x.gpu, w.gpu, window.gpu, out.gpu);
    ExpectClose(out, channels, 1e-2, "CausalConv1dSilu out");
    ExpectClose(window, channels, 0.0, "CausalConv1dSilu window");
    // The next step: one decode token per sequence.
    int64_t offset = 0;
    for (SequenceSlice& s : layout.sequences) {
      s.first_position += s.num_tokens;
      s.token_offset = offset++;
      s.num_tokens = 1;
    }
  }
}

// Attention and the delta rule in each of their kernel forms: the fast ones
// with the backend's choices; the fast ones with runs of 8 keys and a
// one-byte delta rule workspace (so that short test contexts are cut into
// several runs and merged, and the chunked delta rule runs one chunk per
// pass); the straightforward ones; and, on a device only, the fast ones
// launched with programmatic dependent launch (every kernel must wait for
// the one before it: a kernel reading its inputs before that wait would
// race here; the emulation runs grids one after another, so it has nothing
// to add there); and the fast ones with every product that goes to cuBLAS
// on the algorithm the GEMM tuner measured fastest (gemm_tuner.h).
struct KernelForm {
  const char* name;
  bool straightforward;
  int64_t run_keys;
  size_t delta_rule_workspace_bytes;
  bool programmatic_launch = false;
  bool tune_gemms = false;
};
void PrintTo(const KernelForm& form, std::ostream* os) { *os << form.name; }
class CudaKernelFormTest : public CudaBackendTest,
                           public ::testing::WithParamInterface<KernelForm> {
 protected:
  BackendOptions Options() const override {
    BackendOptions options;
    options.cuda.straightforward_kernels = GetParam().straightforward;
    options.cuda.attention_run_keys = GetParam().run_keys;
    if (GetParam().delta_rule_workspace_bytes > 0) {  // else the default
      options.cuda.delta_rule_workspace_bytes =
          GetParam().delta_rule_workspace_bytes;
    }
    options.cuda.programmatic_launch = GetParam().programmatic_launch;
    options.cuda.tune_gemms = GetParam().tune_gemms;
    return options;
  }
  void SetUp() override {
#if defined(TRIBUTARY_CUDA_EMULATION)
    if (GetParam().programmatic_launch) {
      GTEST_SKIP() << "the emulation runs grids one after another: "
                      "programmatic launch is checked on a device";
    }
#endif
    CudaBackendTest::SetUp();
  }
};
INSTANTIATE_TEST_SUITE_P(
    Forms, CudaKernelFormTest,
    ::testing::Values(KernelForm{"fast", false, 0, 0},
                      KernelForm{"fast_small_pieces", false, 8, 1},
                      KernelForm{"straightforward", true, 0, 0},
                      KernelForm{"fast_programmatic", false, 0, 0, true},
                      KernelForm{"fast_tuned", false, 0, 0, false, true}),
    [](const ::testing::TestParamInfo<KernelForm>& info) {
      return std::string(info.param.name);
    });

// Products in every form: few tokens (the few-token kernel when the fast
// kernels are on and the input width is a multiple of 8), more tokens and
// odd widths (cuBLAS); an odd number of output rows; bf16 and f32 outputs.
TEST_P(CudaKernelFormTest, MatMul) {
  struct Dims {
    int64_t in, out;
  };
  for (const Dims& d : {Dims{96, 40}, Dims{264, 33}, Dims{100, 24}}) {
    for (int64_t tokens : {1, 5, 8, 9, 33}) {
      SCOPED_TRACE(::testing::Message() << tokens << " x " << d.in << " -> " << d.out);
      Pair x = Input(Shape{tokens, d.in}, -1, 1);
      Pair w = Weight(Shape{d.out, d.in}, -0.2f, 0.2f);
      Pair y = Output(Shape{tokens, d.out});
      cpu_->MatMul(x.cpu, w.cpu, y.cpu);
      gpu_->MatMul(x.gpu, w.gpu, y.gpu);
      ExpectClose(y, d.out, 1e-2, "MatMul bf16 out");
      Pair logits = Output(Shape{tokens, d.out}, kF32);
      cpu_->MatMul(x.cpu, w.cpu, logits.cpu);
      gpu_->MatMul(x.gpu, w.gpu, logits.gpu);
      ExpectClose(logits, d.out, 1e-4, "MatMul f32 out");
    }
  }
}

// Products of one input by several weights (a layer's projections) in one
// call give the bits of the separate products (bf16 and f32 outputs of odd
// and even widths, 1, 3 and 8 tokens), and the CPU's results.
TEST_P(CudaKernelFormTest, GroupedProductsEqualTheSeparateOnes) {
  for (int64_t tokens : {1, 3, 8, 12}) {
    SCOPED_TRACE(tokens);
    Pair x = Input(Shape{tokens, 128}, -1, 1);
    Pair w[4] = {Weight(Shape{40, 128}, -0.2f, 0.2f), Weight(Shape{33, 128}, -0.2f, 0.2f),
                 Weight(Shape{8, 128}, -0.2f, 0.2f), Weight(Shape{200, 128}, -0.2f, 0.2f)};
    Pair y[4] = {Output(Shape{tokens, 40}), Output(Shape{tokens, 33}, kF32),
                 Output(Shape{tokens, 8}), Output(Shape{tokens, 200})};
    Pair alone[4] = {Output(Shape{tokens, 40}), Output(Shape{tokens, 33}, kF32),
                     Output(Shape{tokens, 8}), Output(Shape{tokens, 200})};
    std::vector<Backend::MatMulTarget> gpu_targets, cpu_targets;
    for (int i = 0; i < 4; ++i) {
      gpu_targets.push_back({&w[i].gpu, &y[i].gpu});
      cpu_targets.push_back({&w[i].cpu, &y[i].cpu});
      gpu_->MatMul(x.gpu, w[i].gpu, alone[i].gpu);
    }
    gpu_->MatMuls(x.gpu, gpu_targets);
    cpu_->MatMuls(x.cpu, cpu_targets);
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE(i);
      ExpectClose(y[i], y[i].cpu.cols(), i == 1 ? 1e-4 : 1e-2, "MatMuls");
      EXPECT_EQ(Read(*gpu_, y[i].gpu), Read(*gpu_, alone[i].gpu));
    }
  }
}

// The gated FFN's first half (GateUpSwiGlu) gives the bits of its
// composition on the same backend (the products, then SwiGlu), and the
// CPU's results: 1, 5 and 8 tokens (the few-token kernel's fused form, when
// the fast kernels are on), 9 and 33 (cuBLAS, then SwiGlu); an odd number
// of rows (the last block's warps past them); out aliasing gate, as the
// decoder calls it.
TEST_P(CudaKernelFormTest, GateUpSwiGluEqualsTheComposition) {
  const int64_t in = 136, rows = 45;
  Pair w_gate = Weight(Shape{rows, in}, -0.3f, 0.3f);
  Pair w_up = Weight(Shape{rows, in}, -0.3f, 0.3f);
  for (int64_t tokens : {1, 5, 8, 9, 33}) {
    SCOPED_TRACE(tokens);
    Pair x = Input(Shape{tokens, in}, -1, 1);
    Pair gate = Output(Shape{tokens, rows}), up = Output(Shape{tokens, rows});
    cpu_->GateUpSwiGlu(x.cpu, w_gate.cpu, w_up.cpu, gate.cpu, up.cpu, gate.cpu);
    gpu_->GateUpSwiGlu(x.gpu, w_gate.gpu, w_up.gpu, gate.gpu, up.gpu, gate.gpu);
    ExpectClose(gate, rows, 2e-2, "GateUpSwiGlu");
    Pair composed = Output(Shape{tokens, rows}), composed_up = Output(Shape{tokens, rows});
    gpu_->Backend::GateUpSwiGlu(x.gpu, w_gate.gpu, w_up.gpu, composed.gpu,
                                composed_up.gpu, composed.gpu);
    EXPECT_EQ(Read(*gpu_, gate.gpu), Read(*gpu_, composed.gpu));
    // An f32 out beside bf16 products: the products are rounded to bf16
    // (their own type), as the composition stores them.
    Pair wide = Output(Shape{tokens, rows}, kF32), wide_composed = Output(Shape{tokens, rows}, kF32);
    gpu_->GateUpSwiGlu(x.gpu, w_gate.gpu, w_up.gpu, gate.gpu, up.gpu, wide.gpu);
    gpu_->Backend::GateUpSwiGlu(x.gpu, w_gate.gpu, w_up.gpu, composed.gpu,
                                composed_up.gpu, wide_composed.gpu);
    EXPECT_EQ(Read(*gpu_, wide.gpu), Read(*gpu_, wide_composed.gpu));
  }
}

// A decode step's products give each token the same bits whatever the
// batch (up to the few-token kernel's limit of 8).
TEST_P(CudaKernelFormTest, FewTokenProductsDoNotDependOnTheBatch) {
  if (GetParam().straightforward) GTEST_SKIP() << "cuBLAS promises no such thing";
  Pair x = Input(Shape{8, 128}, -1, 1);
  Pair w = Weight(Shape{72, 128}, -0.2f, 0.2f);
  Pair batch = Output(Shape{8, 72}, kF32);
  gpu_->MatMul(x.gpu, w.gpu, batch.gpu);
  const std::vector<float> all = Read(*gpu_, batch.gpu);
  for (int64_t t : {0, 5, 7}) {
    Tensor one = x.gpu;
    one.shape = Shape{1, 128};
    one.data = static_cast<char*>(x.gpu.data) + t * 128 * 2;
    Pair alone = Output(Shape{1, 72}, kF32);
    gpu_->MatMul(one, w.gpu, alone.gpu);
    const std::vector<float> got = Read(*gpu_, alone.gpu);
    for (int64_t i = 0; i < 72; ++i) {
      ASSERT_EQ(got[i], all[t * 72 + i]) << "token " << t << " output " << i;
    }
  }
}

// The add fused with the next norm gives the bits of the two ops on the
// same backend (the stream, its statistics and the normed row), and the
// CPU's results; with and without statistics.
TEST_P(CudaKernelFormTest, ResidualAddRmsNormEqualsTheTwoOps) {
  for (const bool with_stats : {true, false}) {
    SCOPED_TRACE(with_stats);
    const int64_t tokens = 5, hidden = 300;
    Pair x = Input(Shape{tokens, hidden}, -3, 3);
    Pair u = Input(Shape{tokens, hidden}, -1, 1);
    Pair w = Weight(Shape{hidden}, -0.5f, 0.5f);
    Pair normed = Output(Shape{tokens, hidden});
    Pair stats = Output(Shape{tokens, kResidualStatsColumns}, kF32);
    const Tensor no_stats;
    // A second copy of x and outputs for the two-op run on the GPU.
    Tensor x2 = Upload(*gpu_, kBF16, x.cpu.shape, x.values);
    Pair normed2 = Output(Shape{tokens, hidden});
    Pair stats2 = Output(Shape{tokens, kResidualStatsColumns}, kF32);
    cpu_->ResidualAddRmsNorm(x.cpu, u.cpu, with_stats ? stats.cpu : no_stats,
                             w.cpu, 1e-6f, normed.cpu);
    gpu_->ResidualAddRmsNorm(x.gpu, u.gpu, with_stats ? stats.gpu : no_stats,
                             w.gpu, 1e-6f, normed.gpu);
    gpu_->ResidualAdd(x2, u.gpu, with_stats ? stats2.gpu : no_stats);
    gpu_->RmsNorm(x2, w.gpu, 1e-6f, normed2.gpu);
    ExpectClose(x, hidden, 1e-2, "the stream");
    ExpectClose(normed, hidden, 1e-2, "the normed stream");
    EXPECT_EQ(Read(*gpu_, x.gpu), Read(*gpu_, x2));
    EXPECT_EQ(Read(*gpu_, normed.gpu), Read(*gpu_, normed2.gpu));
    if (with_stats) {
      EXPECT_EQ(Read(*gpu_, stats.gpu), Read(*gpu_, stats2.gpu));
      const std::vector<float> got = Read(*gpu_, stats.gpu);
      const std::vector<float> want = Read(*cpu_, stats.cpu);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int col : {kStatStreamNorm, kStatUpdateNorm, kStatSumNorm}) {
          const float ref = want[t * kResidualStatsColumns + col];
          EXPECT_NEAR(got[t * kResidualStatsColumns + col], ref, 1e-2 * ref);
        }
      }
    }
  }
}

TEST_P(CudaKernelFormTest, GatedDeltaRuleEqualsTheCpuForms) {
  struct Dims {
    int64_t hk, hv, dk, dv;
  };
  // A small shape, and the 27B's head dims with its 1 : 3 grouping.
  // And the kernel's largest key dim, 256. And dims that cut the chunked
  // state kernel's 32-dim slices and 16-column tiles short (48 and 24).
  for (const Dims& d : {Dims{2, 4, 32, 16}, Dims{1, 3, 128, 128},
                        Dims{1, 2, 256, 32}, Dims{1, 2, 48, 24}}) {
    SCOPED_TRACE(d.dk);
    DeltaRuleSteps(d.hk, d.hv, d.dk, d.dv, MixedLayout(4, 32), 2);
  }
}

// Prefills of several chunks (64 tokens each), one with a short last chunk
// and one continuing cached state, beside a decode step, then decode steps.
TEST_P(CudaKernelFormTest, GatedDeltaRuleOverSeveralChunks) {
  BatchLayout layout;
  const int64_t tokens[] = {150, 1, 70}, cached[] = {0, 40, 30};
  int64_t offset = 0;
  for (int i = 0; i < 3; ++i) {
    SequenceSlice s;
    s.token_offset = offset;
    s.num_tokens = tokens[i];
    s.first_position = cached[i];
    s.state_slot = static_cast<int32_t>(3 - i);
    offset += tokens[i];
    layout.sequences.push_back(s);
  }
  DeltaRuleSteps(2, 4, 128, 64, layout, 2);
}

// A GDN layer's core from its conv output (split, L2 norms, gates, delta
// rule) against the CPU's op-by-op composition, the state carried through
// the steps: (a) steps of decodes only (the fused kernel when the fast
// kernels are on); (b) a step with prefills (the composition on every
// backend), then decodes. The GPU's fused kernel must give the bits of the
// GPU's own composition (Backend::GatedDeltaNet), run beside it on a copy
// of the state: a decode's result must not depend on which path its step
// takes. Against the CPU: the GPU rounds q̂ and k̂ to bf16 (2⁻⁹ relative),
// which moves the state by up to ~2e-3 of its largest value per token
// (~4e-3 seen after a prefill of 9 tokens), and the moves of successive
// steps add up: the state's tolerance grows by kStateTolPerToken a step
// (held at the first step's, 3e-3 on decodes alone failed ~1 seed in 10 by
// the third). Outputs per token: a head's
// output can be a small difference of large terms (q̂ · k̂ of nearly
// orthogonal keys).
TEST_P(CudaKernelFormTest, GatedDeltaNetFromTheConvOutput) {
  // Key heads of 128 dims (the 27B's; the fused kernel's half tile) and of
  // 160 (its full tile).
  for (const int64_t dk : {int64_t{128}, int64_t{160}}) {
    SCOPED_TRACE(dk);
    const int64_t hk = 2, hv = 6, dv = 64, slots = 4;
    const int64_t conv_dim = 2 * hk * dk + hv * dv;
    constexpr double kStateTolPerToken = 2e-3;
    // Decays e^g in about [0.05, 1), as a trained model's.
    Pair a_log = Weight(Shape{hv}, 0.0f, 1.5f);
    Pair dt_bias = Weight(Shape{hv}, -4.0f, -1.0f);
    auto run = [&](BatchLayout layout, double state_tol) {
      Pair state = Input(Shape{slots, hv, dk, dv}, -0.3f, 0.3f, kF32);
      Tensor composed_state = Upload(*gpu_, kF32, state.cpu.shape, state.values);
      for (int step = 0; step < 3; ++step) {
        SCOPED_TRACE(step);
        SetLayout(layout);
        const int64_t t = layout.num_tokens();
        Pair conv_out = Input(Shape{t, conv_dim}, -1, 1);
        Pair a = Input(Shape{t, hv}, -2, 1);
        Pair b = Input(Shape{t, hv}, -3, 3);
        Pair out = Output(Shape{t, hv, dv});
        Pair q = Output(Shape{t, hk, dk}), k = Output(Shape{t, hk, dk});
        Pair v = Output(Shape{t, hv, dv});
        Pair g = Output(Shape{t, hv}, kF32), beta = Output(Shape{t, hv}, kF32);
        const Backend::GdnScratch cpu_scratch{q.cpu, k.cpu, v.cpu, g.cpu, beta.cpu};
        const Backend::GdnScratch gpu_scratch{q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu};
        cpu_->GatedDeltaNet(conv_out.cpu, a.cpu, b.cpu, a_log.cpu, dt_bias.cpu,
                            cpu_scratch, state.cpu, out.cpu);
        gpu_->GatedDeltaNet(conv_out.gpu, a.gpu, b.gpu, a_log.gpu, dt_bias.gpu,
                            gpu_scratch, state.gpu, out.gpu);
        Pair composed_out = Output(Shape{t, hv, dv});
        gpu_->Backend::GatedDeltaNet(conv_out.gpu, a.gpu, b.gpu, a_log.gpu,
                                     dt_bias.gpu, gpu_scratch, composed_state,
                                     composed_out.gpu);
        ExpectClose(out, hv * dv, 2e-2, "GatedDeltaNet out");
        ExpectClose(state, dk * dv, state_tol + kStateTolPerToken * step,
                    "GatedDeltaNet state");
        EXPECT_EQ(Read(*gpu_, out.gpu), Read(*gpu_, composed_out.gpu));
        EXPECT_EQ(Read(*gpu_, state.gpu), Read(*gpu_, composed_state));
        int64_t offset = 0;
        for (SequenceSlice& s : layout.sequences) {
          s.first_position += s.num_tokens;
          s.token_offset = offset++;
          s.num_tokens = 1;
        }
      }
    };
    BatchLayout decodes = MixedLayout(4, 32);
    int64_t offset = 0;
    for (SequenceSlice& s : decodes.sequences) {
      s.first_position = 2;  // within the blocks drawn for more positions
      s.token_offset = offset++;
      s.num_tokens = 1;
    }
    {
      SCOPED_TRACE("decodes only");
      run(decodes, 3e-3);
    }
    {
      SCOPED_TRACE("prefills, then decodes");
      run(MixedLayout(4, 32), 1e-2);
    }
  }
}

// A gated attention layer's inputs (split, q/k norms, partial RoPE, the KV
// write) against the CPU's op-by-op composition, for a mixed step (a
// prefill, a decode, a later chunk): head dims 64 (rotary 16, the pairs in
// other lanes), 256 (rotary 64, the 27B's, 6 query heads per KV head) and
// 80 (not a multiple of the warp). Pool rows not written stay as they were.
TEST_P(CudaKernelFormTest, AttentionInputsEqualTheOps) {
  struct Dims {
    int64_t heads, kv_heads, head_dim, rotary_dim;
  };
  for (const Dims& d : {Dims{4, 2, 64, 16}, Dims{6, 1, 256, 64}, Dims{2, 2, 80, 20}}) {
    SCOPED_TRACE(d.head_dim);
    const int64_t block_size = 4, blocks = 32;
    const BatchLayout layout = MixedLayout(block_size, blocks);
    SetLayout(layout);
    const int64_t t = layout.num_tokens();
    const Shape kv_shape{t, d.kv_heads, d.head_dim};
    const Shape pool_shape{blocks, block_size, d.kv_heads, d.head_dim};
    Pair q_and_gate = Input(Shape{t, d.heads * 2 * d.head_dim}, -2, 2);
    Pair k = Input(kv_shape, -2, 2), v = Input(kv_shape, -2, 2);
    Pair q_norm = Weight(Shape{d.head_dim}, -0.5f, 0.5f);
    Pair k_norm = Weight(Shape{d.head_dim}, -0.5f, 0.5f);
    Pair k_pool = Input(pool_shape, -1, 1), v_pool = Input(pool_shape, -1, 1);
    Pair q = Output(Shape{t, d.heads, d.head_dim});
    Pair gate = Output(Shape{t, d.heads, d.head_dim});
    cpu_->AttentionInputs(q_and_gate.cpu, k.cpu, v.cpu, q_norm.cpu, k_norm.cpu,
                          1e-6f, d.rotary_dim, 10000.0f, q.cpu, gate.cpu,
                          k_pool.cpu, v_pool.cpu);
    gpu_->AttentionInputs(q_and_gate.gpu, k.gpu, v.gpu, q_norm.gpu, k_norm.gpu,
                          1e-6f, d.rotary_dim, 10000.0f, q.gpu, gate.gpu,
                          k_pool.gpu, v_pool.gpu);
    ExpectClose(q, d.head_dim, 1e-2, "q");
    ExpectClose(gate, d.head_dim, 1e-2, "gate");
    ExpectClose(k_pool, d.head_dim, 1e-2, "k_pool");
    ExpectClose(v_pool, d.head_dim, 1e-2, "v_pool");
  }
}

TEST_P(CudaKernelFormTest, WriteKvThenPagedAttention) {
  for (const AttentionDims& d : {AttentionDims{4, 2, 32}, AttentionDims{6, 1, 256}}) {
    SCOPED_TRACE(d.head_dim);
    const int64_t block_size = 4, blocks = 32;
    const BatchLayout layout = MixedLayout(block_size, blocks);
    SetLayout(layout);
    const int64_t t = layout.num_tokens();
    // The pools hold earlier tokens' keys and values already.
    Pair k_pool = Input(Shape{blocks, block_size, d.kv_heads, d.head_dim}, -1, 1);
    Pair v_pool = Input(Shape{blocks, block_size, d.kv_heads, d.head_dim}, -1, 1);
    Pair k = Input(Shape{t, d.kv_heads, d.head_dim}, -1, 1);
    Pair v = Input(Shape{t, d.kv_heads, d.head_dim}, -1, 1);
    cpu_->WriteKv(k.cpu, v.cpu, k_pool.cpu, v_pool.cpu);
    gpu_->WriteKv(k.gpu, v.gpu, k_pool.gpu, v_pool.gpu);
    ExpectClose(k_pool, d.head_dim, 0.0, "WriteKv k");
    ExpectClose(v_pool, d.head_dim, 0.0, "WriteKv v");
    AttendOverThePools(d, t, k_pool, v_pool);
  }
}

// Decode steps over a long context (the split attention's case: few tokens,
// many keys, every run's partial merged): contexts of 1000, 17 and 1 keys
// (one long, one of a few runs, a first token). The tensor-core form: the
// 27B's heads (24 query heads on 4 KV heads of 256: groups of 6), 20 query
// heads per KV head (two blocks of one KV head's group, the second with 12
// zero rows), a head of 240 (15 k-steps). The CUDA-core form (heads not a
// multiple of 16): a head of 232 (eight dims a lane, the last lanes' share
// partly past the head) and of 40 (two dims a lane, element loads).
TEST_P(CudaKernelFormTest, DecodeAttentionOverALongContext) {
  for (const AttentionDims& d : {AttentionDims{24, 4, 256}, AttentionDims{20, 1, 64},
                                 AttentionDims{8, 2, 240}, AttentionDims{8, 2, 232},
                                 AttentionDims{8, 2, 40}}) {
    SCOPED_TRACE(d.heads);
    AttentionAgainstTheCpu(d, {1, 1, 1}, {999, 16, 0}, 63);
  }
}

// Prefill chunks long enough for the flash kernel (16 new tokens or more:
// a 70-token prompt, two tiles of 64 rows with a short second one, and a
// 20-token chunk after 100 cached tokens), beside a decode step and a
// 5-token chunk that the split kernel takes, at the 27B's heads (groups of
// 6, head_dim 256) and at head_dim 32 and 64.
TEST_P(CudaKernelFormTest, PrefillAttentionBesideDecodes) {
  for (const AttentionDims& d : {AttentionDims{24, 4, 256}, AttentionDims{4, 2, 32},
                                 AttentionDims{8, 1, 64}}) {
    SCOPED_TRACE(d.head_dim);
    AttentionAgainstTheCpu(d, {70, 1, 20, 5}, {0, 50, 100, 33}, 8);
  }
}

TEST_F(CudaBackendTest, ABadCallIsReportedAndTheBackendGoesOn) {
  Pair x = Input(Shape{2, 8}, -1, 1);
  Pair w = Weight(Shape{4, 16}, -1, 1);  // in = 16, x has 8 columns
  Pair y = Output(Shape{2, 4});
  gpu_->MatMul(x.gpu, w.gpu, y.gpu);
  absl::Status s = gpu_->Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("MatMul"), std::string::npos) << s;
  EXPECT_TRUE(gpu_->Synchronize().ok()) << "the error is reported once";
  Pair z = Input(Shape{2, 8}, -1, 1);
  cpu_->SwiGlu(x.cpu, z.cpu, x.cpu);
  gpu_->SwiGlu(x.gpu, z.gpu, x.gpu);
  ExpectClose(x, 8, 1e-2, "SwiGlu after an error");
}

TEST_F(CudaBackendTest, OutOfMemoryIsResourceExhausted) {
  auto t = gpu_->Allocate(kF32, Shape{int64_t{1} << 20, int64_t{1} << 20});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
  EXPECT_TRUE(gpu_->Synchronize().ok()) << "an allocation failure is not sticky";
}

TEST(CudaBackendFactoryTest, ReportsWhyThereIsNoDevice) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) GTEST_SKIP() << "this machine has a device";
  EXPECT_FALSE(why.empty());
  BackendOptions options;
  options.kind = BackendKind::kCuda;
  auto backend = CreateBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(backend.status().code() == absl::StatusCode::kFailedPrecondition ||
              backend.status().code() == absl::StatusCode::kUnimplemented)
      << backend.status();
}

#if defined(TRIBUTARY_TEST_CUBLAS_LOADER)
// cuBLAS is loaded at run time (cublas_api.h): the library name and every
// symbol must resolve wherever the toolkit is installed, GPU or not.
TEST(CublasLoaderTest, LoadsEverySymbol) {
  auto api = cuda::LoadCublas();
  if (!api.ok() && api.status().message().find("cannot load") != std::string::npos) {
    GTEST_SKIP() << "no cuBLAS on this machine: " << api.status();
  }
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_NE((*api)->gemm_ex, nullptr);
  EXPECT_STREQ((*api)->status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  auto again = cuda::LoadCublas();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api) << "loaded once";
}
#endif

#if defined(TRIBUTARY_TEST_CUBLAS_LOADER)
// The same for cuBLASLt (cublas_lt_api.h), which the GEMM tuner loads.
TEST(CublasLoaderTest, LoadsEveryCublasLtSymbol) {
  auto api = cuda::LoadCublasLt();
  if (!api.ok() && api.status().message().find("cannot load") != std::string::npos) {
    GTEST_SKIP() << "no cuBLASLt on this machine: " << api.status();
  }
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_NE((*api)->heuristic, nullptr);
  EXPECT_NE((*api)->matmul, nullptr);
  auto again = cuda::LoadCublasLt();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api) << "loaded once";
}

#if !defined(TRIBUTARY_CUDA_EMULATION)
// What the loader says when a library or a symbol is missing (the C
// library stands in for cuBLAS: it is on every machine).
TEST(CublasLoaderTest, SaysWhatIsMissing) {
  auto none = cuda::SharedLibrary::Open("libtributary-no-such-library.so", "a test");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("libtributary-no-such-library.so"),
            std::string::npos) << none.status();
  EXPECT_NE(none.status().message().find("a test"), std::string::npos);
  auto libc = cuda::SharedLibrary::Open("libc.so.6", "the C library");
  ASSERT_TRUE(libc.ok()) << libc.status();
  int (*abs_fn)(int) = nullptr;
  void (*missing)() = nullptr;
  libc->Bind("abs", &abs_fn);
  libc->Bind("tributary_no_such_symbol", &missing);
  ASSERT_NE(abs_fn, nullptr);
  EXPECT_EQ(abs_fn(-3), 3);
  EXPECT_EQ(missing, nullptr);
  const absl::Status status = libc->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("lacks tributary_no_such_symbol"), std::string::npos)
      << status;
}
#endif

// The tuner's rule: the fastest candidate wins when it beats cublasGemmEx
// by the margin; ties go to the heuristic's earlier rank; a time that is
// not positive and finite (a candidate that did not run) never wins.
TEST(GemmTunerTest, ChoosesTheFastestByTheMargin) {
  using cuda::ChooseFastest;
  EXPECT_EQ(ChooseFastest(1.0, {0.99, 0.5, 0.7}, 0.03), 1);
  EXPECT_EQ(ChooseFastest(1.0, {0.98, 0.99}, 0.03), -1) << "within the margin";
  EXPECT_EQ(ChooseFastest(1.0, {0.96}, 0.03), 0) << "beyond the margin";
  EXPECT_EQ(ChooseFastest(1.0, {1.5, 2.0}, 0.0), -1) << "slower than the default";
  EXPECT_EQ(ChooseFastest(1.0, {0.5, 0.5}, 0.03), 0) << "ties: the earlier rank";
  EXPECT_EQ(ChooseFastest(1.0, {0.0, -1.0, NAN, INFINITY}, 0.0), -1);
  EXPECT_EQ(ChooseFastest(1.0, {0.0, 0.6, NAN}, 0.03), 1);
  EXPECT_EQ(ChooseFastest(1.0, {}, 0.0), -1) << "no candidate";
  EXPECT_EQ(ChooseFastest(0.0, {3.0, 2.0}, 0.03), 1) << "an untimed default";
  EXPECT_EQ(ChooseFastest(NAN, {3.0}, 0.03), 0);
}

TEST(GemmTunerTest, BucketsAndAlignments) {
  EXPECT_EQ(cuda::TokenBucket(1), 16);
  EXPECT_EQ(cuda::TokenBucket(9), 16);
  EXPECT_EQ(cuda::TokenBucket(16), 16);
  EXPECT_EQ(cuda::TokenBucket(17), 32);
  EXPECT_EQ(cuda::TokenBucket(64), 64);
  EXPECT_EQ(cuda::TokenBucket(65), 128);
  EXPECT_EQ(cuda::TokenBucket(256), 256);
  alignas(256) static char buffer[512];
  EXPECT_EQ(cuda::OperandAlignment(buffer), 256u);
  EXPECT_EQ(cuda::OperandAlignment(buffer + 128), 128u);
  EXPECT_EQ(cuda::OperandAlignment(buffer + 24), 8u);
  EXPECT_EQ(cuda::OperandAlignment(buffer + 1), 1u);
  EXPECT_EQ(cuda::OperandAlignment(buffer + 512 - 256), 256u);
}

TEST(GemmTunerTest, OptionsAreValidated) {
  cuda::GemmTuner::Options options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_candidates = 0;
  EXPECT_FALSE(options.Validate().ok());
  options = {};
  options.rounds = 0;
  EXPECT_FALSE(options.Validate().ok());
  options = {};
  options.min_gain = 1.0;
  EXPECT_FALSE(options.Validate().ok());
  options.min_gain = NAN;
  const absl::Status status = options.Validate();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("min_gain"), std::string::npos) << status;
}
#endif

#if defined(TRIBUTARY_CUDA_EMULATION)
// The tuner on the emulation, whose cuBLASLt offers kEmulatedLtAlgorithms
// algorithms that compute alike and whose speeds the test sets: each new
// product shape is timed once per bucket of token counts (the other counts
// of the bucket take its choice), the fastest of the candidates and
// cublasGemmEx is kept, and the products stay the CPU's; a shape tuned
// inside a graph region is captured and replayed on its choice; the
// few-token kernel's products and those of more tokens than kTuneMaxTokens
// are not tuned.
class CudaGemmTunerTest : public CudaBackendTest {
 protected:
  BackendOptions Options() const override {
    BackendOptions options;
    options.cuda.tune_gemms = true;
    return options;
  }
  void TearDown() override { cuda_emulation::ResetLtAlgorithmDelays(); }

  // One product of `tokens` tokens by w_ on both backends, checked; in a
  // graph region, twice on the same tensors (captured, then replayed).
  void Product(int64_t tokens, bool in_region = false) {
    Pair x = Input(Shape{tokens, 64}, -1, 1);
    Pair y = Output(Shape{tokens, 40});
    cpu_->MatMul(x.cpu, w_.cpu, y.cpu);
    if (in_region) {
      gpu_->BeginGraphRegion();
      gpu_->MatMul(x.gpu, w_.gpu, y.gpu);
      ASSERT_TRUE(gpu_->EndGraphRegion().ok());
      ExpectClose(y, 40, 1e-2, "tuned MatMul, captured");
    }
    if (in_region) gpu_->BeginGraphRegion();
    gpu_->MatMul(x.gpu, w_.gpu, y.gpu);
    if (in_region) {
      ASSERT_TRUE(gpu_->EndGraphRegion().ok());
    }
    ExpectClose(y, 40, 1e-2, "tuned MatMul");
  }

  Pair w_;
};

TEST_F(CudaGemmTunerTest, KeepsTheFastestAlgorithmOfEachShape) {
  auto* cuda = dynamic_cast<CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  ASSERT_TRUE(cuda->tune_gemms());
  w_ = Weight(Shape{40, 64}, -0.5f, 0.5f);
  // cublasGemmEx and every algorithm but the third take 5 ms a run on the
  // emulated device's clock, the third 1 ms.
  cuda_emulation::SetLtAlgorithmDelays(5e-3, {5e-3, 5e-3, 1e-3, 5e-3});
  Product(12);
  std::vector<GemmTuning> tunings = cuda->gemm_tunings();
  ASSERT_EQ(tunings.size(), 1u);
  EXPECT_EQ(tunings[0].out_features, 40);
  EXPECT_EQ(tunings[0].tokens, 12);
  EXPECT_EQ(tunings[0].in_features, 64);
  EXPECT_FALSE(tunings[0].f32_output);
  EXPECT_EQ(tunings[0].candidates, cuda_emulation::kEmulatedLtAlgorithms);
  EXPECT_EQ(tunings[0].chosen, 2);
  EXPECT_LT(tunings[0].best_ms, tunings[0].default_ms);
  EXPECT_TRUE(tunings[0].failure.empty()) << tunings[0].failure;
  // Known shapes, and other counts of their bucket (9–16 tokens), are not
  // timed again, whatever the speeds are now, and run on their choice: one
  // cuBLASLt product each.
  cuda_emulation::SetLtAlgorithmDelays(1e-3, {5e-3, 5e-3, 5e-3, 5e-3});
  int64_t lt_before = cuda_emulation::LtMatmulsRun();
  Product(12);
  Product(16);
  EXPECT_EQ(cuda->gemm_tunings().size(), 1u);
  EXPECT_EQ(cuda_emulation::LtMatmulsRun() - lt_before, 2);
  // An algorithm that declines at run time: cublasGemmEx does the product.
  cuda_emulation::FailNextGemms(1);
  lt_before = cuda_emulation::LtMatmulsRun();
  Product(12);
  EXPECT_EQ(cuda_emulation::LtMatmulsRun() - lt_before, 0);
  // The next bucket (17–32 tokens) is tuned anew: here cublasGemmEx is
  // fastest.
  Product(24);
  tunings = cuda->gemm_tunings();
  ASSERT_EQ(tunings.size(), 2u);
  EXPECT_EQ(tunings[1].tokens, 24);
  EXPECT_EQ(tunings[1].chosen, -1);
  EXPECT_GT(tunings[1].best_ms, tunings[1].default_ms);
  lt_before = cuda_emulation::LtMatmulsRun();
  Product(24);
  Product(17);
  EXPECT_EQ(cuda_emulation::LtMatmulsRun() - lt_before, 0) << "cublasGemmEx's";
  EXPECT_EQ(cuda->gemm_tunings().size(), 2u);
  // Tuned while its region is recorded, then captured and replayed.
  cuda_emulation::SetLtAlgorithmDelays(5e-3, {1e-3, 5e-3, 5e-3, 5e-3});
  Product(40, /*in_region=*/true);
  tunings = cuda->gemm_tunings();
  ASSERT_EQ(tunings.size(), 3u);
  EXPECT_EQ(tunings[2].chosen, 0);
  EXPECT_EQ(cuda->graph_stats().captured, 1);
  EXPECT_EQ(cuda->graph_stats().replayed, 1);
  lt_before = cuda_emulation::LtMatmulsRun();
  Product(40, /*in_region=*/true);
  EXPECT_EQ(cuda_emulation::LtMatmulsRun() - lt_before, 2) << "captured, replayed";
  // The few-token kernel's products and long ones are not tuned.
  Product(8);
  Product(CudaBackend::kTuneMaxTokens + 1);
  EXPECT_EQ(cuda->gemm_tunings().size(), 3u);
  // Off: new shapes go to cublasGemmEx untimed, the choices stay.
  ASSERT_TRUE(cuda->set_tune_gemms(false).ok());
  Product(100);
  EXPECT_EQ(cuda->gemm_tunings().size(), 3u);
}

// A product on a view from a row offset (an input 128 bytes past a 256-byte
// boundary) is tuned as its own shape, whose algorithms the heuristic chose
// for that alignment (the emulation refuses an algorithm on an operand less
// aligned than it was chosen for, as a device may), and stays the CPU's.
TEST_F(CudaGemmTunerTest, ViewsFromAnOffsetAreTheirOwnShapes) {
  auto* cuda = dynamic_cast<CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  w_ = Weight(Shape{40, 64}, -0.5f, 0.5f);
  cuda_emulation::SetLtAlgorithmDelays(5e-3, {1e-3, 5e-3, 5e-3, 5e-3});
  Product(12);
  ASSERT_EQ(cuda->gemm_tunings().size(), 1u);
  ASSERT_EQ(cuda->gemm_tunings()[0].chosen, 0);
  Pair x = Input(Shape{13, 64}, -1, 1);  // 128 bytes a bf16 row
  ASSERT_EQ(reinterpret_cast<uintptr_t>(x.gpu.data) % 256, 0u);
  Pair y = Output(Shape{12, 40});
  Tensor x_cpu = x.cpu, x_gpu = x.gpu;
  x_cpu.shape = x_gpu.shape = Shape{12, 64};
  x_cpu.data = static_cast<char*>(x.cpu.data) + 64 * sizeof(float);
  x_gpu.data = static_cast<char*>(x.gpu.data) + 64 * sizeof(uint16_t);
  cpu_->MatMul(x_cpu, w_.cpu, y.cpu);
  gpu_->MatMul(x_gpu, w_.gpu, y.gpu);
  ExpectClose(y, 40, 1e-2, "tuned MatMul on a view");
  const std::vector<GemmTuning> tunings = cuda->gemm_tunings();
  ASSERT_EQ(tunings.size(), 2u);
  EXPECT_EQ(tunings[1].tokens, 12);
  EXPECT_EQ(tunings[1].chosen, 0);
}

// A tuning that fails (here cublasGemmEx declining its first run) leaves
// the shape on cublasGemmEx for good, says why, and the product itself
// still runs: its result is the CPU's, in a graph region too (where a
// product left out would leave its graph without it).
TEST_F(CudaGemmTunerTest, AFailedTuningLeavesTheShapeOnCublasGemmEx) {
  auto* cuda = dynamic_cast<CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  w_ = Weight(Shape{40, 64}, -0.5f, 0.5f);
  cuda_emulation::FailNextGemms(1);
  Product(12, /*in_region=*/true);
  std::vector<GemmTuning> tunings = cuda->gemm_tunings();
  ASSERT_EQ(tunings.size(), 1u);
  EXPECT_EQ(tunings[0].chosen, -1);
  EXPECT_NE(tunings[0].failure.find("cublasGemmEx"), std::string::npos)
      << tunings[0].failure;
  // Not tuned again.
  Product(12);
  EXPECT_EQ(cuda->gemm_tunings().size(), 1u);
  EXPECT_EQ(cuda->graph_stats().captured, 1);
  EXPECT_EQ(cuda->graph_stats().eager, 0);
}

// A sticky device error during a tuning is the step's error, as any op's,
// not a tuning failure to remember.
TEST_F(CudaGemmTunerTest, AStickyErrorWhileTuningFailsTheStep) {
  auto* cuda = dynamic_cast<CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  w_ = Weight(Shape{40, 64}, -0.5f, 0.5f);
  Pair x = Input(Shape{12, 64}, -1, 1);
  Pair y = Output(Shape{12, 40});
  cuda_emulation::InjectStickyError(cudaErrorIllegalAddress);
  gpu_->MatMul(x.gpu, w_.gpu, y.gpu);
  const absl::Status status = gpu_->Synchronize();
  cuda_emulation::ClearStickyError();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_TRUE(cuda->gemm_tunings().empty());
}
#endif

TEST(CudaBackendFactoryTest, ParsesBackendNames) {
  EXPECT_EQ(*ParseBackendKind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(*ParseBackendKind("cuda"), BackendKind::kCuda);
  auto bad = ParseBackendKind("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tpu"), std::string::npos);
}

}  // namespace
}  // namespace tributary
