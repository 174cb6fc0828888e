// The fast gated delta rule (delta_rule.h) against its reference twins
// (reference_ops.h): chunked and recurrent forms on random inputs across the
// 64-token chunk boundaries, with grouped heads, dk ≠ dv and a non-zero
// initial state, on every instruction-set path this CPU has (which must agree
// bit for bit), and the same bits for any thread count.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "delta_rule_inputs.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/backend/cpu/flush_denormals.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {
namespace {

using Inputs = DeltaRuleInputs;

Inputs MakeInputs(int64_t tokens, int64_t hk, int64_t hv, int64_t dk,
                  int64_t dv, uint32_t seed) {
  return MakeDeltaRuleInputs(tokens, hk, hv, dk, dv, seed, 2.0f);
}

struct Result {
  std::vector<float> out, state;
};

Result RunReference(const Inputs& in, bool recurrent) {
  Result r{std::vector<float>(in.dims.num_tokens * in.dims.num_value_heads *
                              in.dims.value_dim),
           in.state};
  if (recurrent) {
    reference::GatedDeltaRuleRecurrent(in.dims, in.q.data(), in.k.data(),
                                       in.v.data(), in.g.data(), in.beta.data(),
                                       r.state.data(), r.out.data());
  } else {
    reference::GatedDeltaRuleChunked(in.dims, 64, in.q.data(), in.k.data(),
                                     in.v.data(), in.g.data(), in.beta.data(),
                                     r.state.data(), r.out.data());
  }
  return r;
}

// A call on `in`'s inputs, writing into `out` and updating `state`.
DeltaRuleCall CallOn(const Inputs& in, bool recurrent, float* out,
                     float* state) {
  DeltaRuleCall call;
  call.dims = in.dims;
  call.chunk_size = 64;
  call.q = in.q.data();
  call.k = in.k.data();
  call.v = in.v.data();
  call.g = in.g.data();
  call.beta = in.beta.data();
  call.state = state;
  call.out = out;
  call.recurrent = recurrent;
  return call;
}

Result RunFast(const Inputs& in, bool recurrent, ThreadPool* pool,
               CpuIsa isa) {
  Result r{std::vector<float>(
               in.dims.num_tokens * in.dims.num_value_heads * in.dims.value_dim,
               -7.0f),
           in.state};
  GatedDeltaRule(CallOn(in, recurrent, r.out.data(), r.state.data()), pool, isa);
  return r;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 float rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    ASSERT_TRUE(std::isfinite(got[i])) << what << " at " << i;
  }
  EXPECT_LE(max_diff, rel * max_ref) << what << " max_ref " << max_ref;
}

std::vector<CpuIsa> Paths() {
  std::vector<CpuIsa> paths = {CpuIsa::kScalar};
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuIsaSupported(isa)) paths.push_back(isa);
  }
  return paths;
}

struct Shape {
  int64_t hk, hv, dk, dv;
};

TEST(DeltaRuleFastTest, MatchesReferenceOnEveryPath) {
  const Shape shapes[] = {
      {2, 2, 32, 48}, {2, 4, 48, 32}, {1, 3, 40, 24}, {2, 2, 128, 128}};
  uint32_t seed = 1;
  for (const Shape& sh : shapes) {
    for (int64_t tokens : {1, 5, 63, 64, 65, 130}) {
      if (sh.dk == 128 && tokens != 130 && tokens != 5) continue;  // time
      const Inputs in = MakeInputs(tokens, sh.hk, sh.hv, sh.dk, sh.dv, seed++);
      for (bool recurrent : {false, true}) {
        const Result want = RunReference(in, recurrent);
        const std::string what =
            std::string(recurrent ? "recurrent" : "chunked") +
            " T=" + std::to_string(tokens) + " hk=" + std::to_string(sh.hk) +
            " hv=" + std::to_string(sh.hv) + " dk=" + std::to_string(sh.dk) +
            " dv=" + std::to_string(sh.dv);
        Result first;
        for (CpuIsa isa : Paths()) {
          const Result got = RunFast(in, recurrent, nullptr, isa);
          ExpectClose(got.out, want.out, 1e-5f,
                      what + " out " + CpuIsaName(isa));
          ExpectClose(got.state, want.state, 1e-5f,
                      what + " state " + CpuIsaName(isa));
          if (first.out.empty()) {
            first = got;
          } else {  // every path gives the same bits
            EXPECT_EQ(got.out, first.out) << what << " " << CpuIsaName(isa);
            EXPECT_EQ(got.state, first.state)
                << what << " " << CpuIsaName(isa);
          }
        }
      }
    }
  }
}

TEST(DeltaRuleFastTest, ChunkedMatchesRecurrentReference) {
  const Inputs in = MakeInputs(130, 2, 6, 64, 80, 99);
  const Result want = RunReference(in, /*recurrent=*/true);
  const Result got =
      RunFast(in, /*recurrent=*/false, nullptr, CpuIsa::kAuto);
  ExpectClose(got.out, want.out, 1e-5f, "out");
  ExpectClose(got.state, want.state, 1e-5f, "state");
}

TEST(DeltaRuleFastTest, SameBitsForAnyThreadCount) {
  const Inputs in = MakeInputs(130, 2, 6, 64, 64, 7);
  for (bool recurrent : {false, true}) {
    const Result alone = RunFast(in, recurrent, nullptr, CpuIsa::kAuto);
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool pool(threads);
      const Result got = RunFast(in, recurrent, &pool, CpuIsa::kAuto);
      EXPECT_EQ(got.out, alone.out) << threads << " threads";
      EXPECT_EQ(got.state, alone.state) << threads << " threads";
    }
  }
}

// The recurrent form runs value heads in groups (RecurrentHeads, dv 16, 32
// or 64): each head's bits are those of the head run alone, on every path,
// for ranges that start inside a group and end with heads left over.
TEST(DeltaRuleFastTest, HeadsInGroupsGiveTheBitsOfOneByOne) {
  const Shape shapes[] = {{2, 10, 24, 16}, {2, 6, 32, 32}, {1, 5, 40, 64},
                          {2, 4, 32, 48}};
  uint32_t seed = 300;
  for (const Shape& sh : shapes) {
    for (int64_t tokens : {1, 7}) {
      const Inputs in = MakeInputs(tokens, sh.hk, sh.hv, sh.dk, sh.dv, seed++);
      for (CpuIsa isa : Paths()) {
        const std::string what = "T=" + std::to_string(tokens) +
                                 " hv=" + std::to_string(sh.hv) +
                                 " dv=" + std::to_string(sh.dv) + " " +
                                 CpuIsaName(isa);
        DeltaRuleCall call = CallOn(in, true, nullptr, nullptr);
        std::vector<float> scratch(DeltaRuleScratchBytes(call) / sizeof(float) + 16);
        const size_t out_size =
            static_cast<size_t>(tokens * sh.hv * sh.dv);
        std::vector<float> one_out(out_size, -7.0f), one_state = in.state;
        call.out = one_out.data();
        call.state = one_state.data();
        for (int64_t h = 0; h < sh.hv; ++h) {
          GatedDeltaRuleHead(call, h, scratch.data(), isa);
        }
        for (int64_t begin : {int64_t{0}, int64_t{1}}) {
          std::vector<float> out(out_size, -7.0f), state = in.state;
          call.out = out.data();
          call.state = state.data();
          if (begin > 0) GatedDeltaRuleHeads(call, 0, begin, scratch.data(), isa);
          GatedDeltaRuleHeads(call, begin, sh.hv, scratch.data(), isa);
          EXPECT_EQ(out, one_out) << what << " from head " << begin;
          EXPECT_EQ(state, one_state) << what << " from head " << begin;
        }
      }
    }
  }
}

TEST(DeltaRuleFastTest, StrongDecayStaysFinite) {
  Inputs in = MakeInputs(130, 1, 2, 32, 32, 5);
  for (float& g : in.g) g *= 20.0f;  // G down to about −5000 within a chunk
  for (bool recurrent : {false, true}) {
    const Result want = RunReference(in, recurrent);
    const Result got = RunFast(in, recurrent, nullptr, CpuIsa::kAuto);
    ExpectClose(got.out, want.out, 1e-5f, "out");
    ExpectClose(got.state, want.state, 1e-5f, "state");
  }
}

// The MXCSR control bits (the status flags, bits 0–5, are sticky: the
// reference raises them, and the scope puts back the caller's).
unsigned MxcsrControls() { return _mm_getcsr() & ~0x3Fu; }

// A float's bits (a comparison would itself read a subnormal as zero under
// DAZ).
uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// ScopedFlushDenormals: inside, a subnormal result is zero (FTZ) and a
// subnormal input reads as zero (DAZ); after, both as before.
TEST(ScopedFlushDenormalsTest, FlushesInsideAndRestoresAfter) {
  volatile float small = 1e-20f;  // normal; its square is subnormal
  volatile float tiny = 1e-39f;   // subnormal
  volatile float big = 1e30f;
  const unsigned before = MxcsrControls();
  EXPECT_NE(Bits(small * small), 0u);
  EXPECT_NE(Bits(tiny * big), 0u);
  {
    const ScopedFlushDenormals flush;
    EXPECT_EQ(Bits(small * small), 0u);  // FTZ
    EXPECT_EQ(Bits(tiny * big), 0u);     // DAZ: 0 · 1e30
  }
  EXPECT_NE(Bits(small * small), 0u);
  EXPECT_NE(Bits(tiny * big), 0u);
  EXPECT_EQ(MxcsrControls(), before);
}

// The kernels run flushed: values of 1e-39 (subnormal) with a zero state
// read as zero inside, so every output and state element is exactly zero on
// every path and in both forms, where the unflushed reference carries them
// through as tiny non-zero numbers.
TEST(DeltaRuleFastTest, KernelsReadSubnormalsAsZero) {
  Inputs in = MakeInputs(70, 1, 2, 32, 32, 10);
  for (float& x : in.v) x = 1e-39f;
  for (float& x : in.state) x = 0.0f;
  for (bool recurrent : {false, true}) {
    const Result want = RunReference(in, recurrent);
    EXPECT_TRUE(std::any_of(want.out.begin(), want.out.end(),
                            [](float x) { return x != 0.0f; }));
    for (CpuIsa isa : Paths()) {
      const Result got = RunFast(in, recurrent, nullptr, isa);
      EXPECT_TRUE(std::all_of(got.out.begin(), got.out.end(),
                              [](float x) { return x == 0.0f; }))
          << CpuIsaName(isa) << (recurrent ? " recurrent" : " chunked");
      EXPECT_TRUE(std::all_of(got.state.begin(), got.state.end(),
                              [](float x) { return x == 0.0f; }))
          << CpuIsaName(isa) << (recurrent ? " recurrent" : " chunked");
    }
  }
}

// Decays that land in the subnormal range (a log decay of about −2.5 a
// token puts e^(G_i − G_j) below 2^−126 across a chunk): flushed, they move
// nothing visible against the reference, every path keeps the same bits,
// and the caller's control bits are as they were.
TEST(DeltaRuleFastTest, SubnormalDecaysAreFlushedInsideOnly) {
  Inputs in = MakeInputs(130, 1, 2, 32, 32, 9);
  for (float& g : in.g) g = -2.0f + 0.5f * g;  // −3 … −2 a token
  const unsigned csr_before = MxcsrControls();
  for (bool recurrent : {false, true}) {
    const Result want = RunReference(in, recurrent);
    const Result got = RunFast(in, recurrent, nullptr, CpuIsa::kAuto);
    ExpectClose(got.out, want.out, 1e-5f, "out");
    ExpectClose(got.state, want.state, 1e-5f, "state");
    for (CpuIsa isa : Paths()) {
      const Result path = RunFast(in, recurrent, nullptr, isa);
      EXPECT_EQ(path.out, got.out) << CpuIsaName(isa);
      EXPECT_EQ(path.state, got.state) << CpuIsaName(isa);
    }
  }
  EXPECT_EQ(MxcsrControls(), csr_before);
}

// The form each sequence takes. As transformers: recurrent only for one
// token after cached ones. Fastest: a token or two always recurrent (they
// never amortise the chunked form's products); longer runs recurrent while a
// head's state fits in L1 (the default model's 32 × 32), chunked for the
// 27B's 128 × 128 heads; never a function of anything but the sequence.
TEST(DeltaRuleFormTest, EachFormChoosesAsItsContractSays) {
  using F = DeltaRuleForm;
  EXPECT_TRUE(DeltaRuleTakesRecurrentForm(F::kAsTransformers, 1, 5, 128, 128));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kAsTransformers, 1, 0, 32, 32));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kAsTransformers, 2, 5, 32, 32));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kAsTransformers, 512, 0, 8, 8));

  EXPECT_TRUE(DeltaRuleTakesRecurrentForm(F::kFastest, 1, 0, 128, 128));
  EXPECT_TRUE(DeltaRuleTakesRecurrentForm(F::kFastest, 2, 7, 128, 128));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kFastest, 64, 0, 128, 128));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kFastest, 512, 64, 128, 128));
  EXPECT_TRUE(DeltaRuleTakesRecurrentForm(F::kFastest, 512, 0, 32, 32));
  EXPECT_TRUE(DeltaRuleTakesRecurrentForm(F::kFastest, 32, 0, 64, 64));
  EXPECT_FALSE(DeltaRuleTakesRecurrentForm(F::kFastest, 32, 0, 64, 65));
}

// The CPU backend runs each sequence in the form its options pick
// (DeltaRuleTakesRecurrentForm), bit for bit the kernel's result in that
// form, with both forms in one call. Heads of 80 × 80 (25 KiB, past the
// L1 bound): a 70-token prompt takes the chunked form either way; a 1-token
// prompt and a 2-token continuation take the recurrent form when fastest and
// the chunked form as transformers, so a backend that ignored its option
// (or ran one form for the whole call) would give other bits.
TEST(CpuBackendDeltaRuleTest, EachSequenceTakesTheFormItsOptionPicks) {
  const int64_t hk = 1, hv = 2, dk = 80, dv = 80;
  struct Seq {
    Inputs in;
    int64_t first_position;
  };
  const std::vector<Seq> seqs = {{MakeInputs(70, hk, hv, dk, dv, 11), 0},
                                 {MakeInputs(1, hk, hv, dk, dv, 12), 0},
                                 {MakeInputs(2, hk, hv, dk, dv, 13), 3}};
  int64_t tokens = 0;
  for (const Seq& s : seqs) tokens += s.in.dims.num_tokens;
  for (const DeltaRuleForm form :
       {DeltaRuleForm::kFastest, DeltaRuleForm::kAsTransformers}) {
    SCOPED_TRACE(form == DeltaRuleForm::kFastest ? "fastest"
                                                 : "as transformers");
    auto backend = CpuBackend::Create({2, MatMulPrecision::kF32, form});
    ASSERT_TRUE(backend.ok()) << backend.status();
    CpuBackend& b = **backend;
    const int64_t num_slots = static_cast<int64_t>(seqs.size());
    absl::StatusOr<Tensor> q = b.Allocate(ElementType::kF32, {tokens, hk, dk});
    absl::StatusOr<Tensor> k = b.Allocate(ElementType::kF32, {tokens, hk, dk});
    absl::StatusOr<Tensor> v = b.Allocate(ElementType::kF32, {tokens, hv, dv});
    absl::StatusOr<Tensor> g = b.Allocate(ElementType::kF32, {tokens, hv});
    absl::StatusOr<Tensor> beta = b.Allocate(ElementType::kF32, {tokens, hv});
    absl::StatusOr<Tensor> state =
        b.Allocate(ElementType::kF32, {num_slots, hv, dk, dv});
    absl::StatusOr<Tensor> out =
        b.Allocate(ElementType::kF32, {tokens, hv, dv});
    ASSERT_TRUE(q.ok() && k.ok() && v.ok() && g.ok() && beta.ok() &&
                state.ok() && out.ok());
    BatchLayout layout;
    int64_t offset = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Inputs& in = seqs[i].in;
      const int64_t n = in.dims.num_tokens;
      const auto put = [&](const std::vector<float>& host, const Tensor& t,
                           int64_t row) {
        std::memcpy(t.as<float>() + offset * row, host.data(),
                    host.size() * sizeof(float));
      };
      put(in.q, *q, hk * dk);
      put(in.k, *k, hk * dk);
      put(in.v, *v, hv * dv);
      put(in.g, *g, hv);
      put(in.beta, *beta, hv);
      std::memcpy(state->as<float>() + i * hv * dk * dv, in.state.data(),
                  in.state.size() * sizeof(float));
      SequenceSlice& s = layout.sequences.emplace_back();
      s.token_offset = offset;
      s.num_tokens = n;
      s.first_position = seqs[i].first_position;
      s.state_slot = static_cast<int32_t>(i);
      offset += n;
    }
    ASSERT_TRUE(b.SetBatchLayout(layout).ok());
    b.GatedDeltaRule(*q, *k, *v, *g, *beta, *state, *out);
    offset = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Inputs& in = seqs[i].in;
      const int64_t n = in.dims.num_tokens;
      const bool recurrent =
          DeltaRuleTakesRecurrentForm(form, n, seqs[i].first_position, dk, dv);
      EXPECT_EQ(recurrent, form == DeltaRuleForm::kFastest && n <= 2)
          << "sequence " << i;
      const Result want = RunFast(in, recurrent, nullptr, CpuIsa::kAuto);
      const float* got_out = out->as<float>() + offset * hv * dv;
      const float* got_state = state->as<float>() + i * hv * dk * dv;
      EXPECT_EQ(std::vector<float>(got_out, got_out + want.out.size()),
                want.out)
          << "sequence " << i;
      EXPECT_EQ(std::vector<float>(got_state, got_state + want.state.size()),
                want.state)
          << "sequence " << i;
      offset += n;
    }
  }
}

}  // namespace
}  // namespace tributary
