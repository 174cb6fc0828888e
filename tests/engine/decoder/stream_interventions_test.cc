// HybridDecoder's interventions on the residual stream
// (stream_interventions.h) on the default model: neutral interventions
// change nothing bit for bit, skipping every layer is the direct path,
// ablation leaves the stream orthogonal to the direction at every point,
// and the logit lens equals the logits at the last layer and the
// skip-the-rest computation at every other layer.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"

namespace tributary {
namespace {

constexpr int64_t kBlockSize = 16;

const ModelDirectory& Model() {
  static const ModelDirectory* model = [] {
    auto m = ModelDirectory::Load(std::string(TRIBUTARY_SOURCE_DIR) +
                                  "/models/tiny-shakespeare");
    EXPECT_TRUE(m.ok()) << m.status();
    return new ModelDirectory(std::move(*m));
  }();
  return *model;
}

// Every op goes to a CpuBackend; ResidualAdd first measures how much of the
// stream lies along `probe` (|x · u| / ‖x‖, the largest over rows and calls).
class ProbeBackend final : public Backend {
 public:
  explicit ProbeBackend(std::unique_ptr<CpuBackend> inner)
      : in_(std::move(inner)) {}
  std::vector<float> probe;  // unit vector; empty = off
  double max_alignment = 0.0;
  int num_probed_adds = 0;

  const char* name() const override { return "probe"; }
  ElementType activation_type() const override {
    return in_->activation_type();
  }
  ElementType weight_type(ElementType stored, int rank) const override {
    return in_->weight_type(stored, rank);
  }
  absl::StatusOr<Tensor> Allocate(ElementType t, const Shape& s) override {
    return in_->Allocate(t, s);
  }
  void Free(Tensor& t) override { in_->Free(t); }
  absl::StatusOr<Tensor> ImportWeight(const void* h, ElementType t,
                                      const Shape& s) override {
    return in_->ImportWeight(h, t, s);
  }
  absl::StatusOr<Tensor> PrepareMatMulWeight(const Tensor& w) override {
    return in_->PrepareMatMulWeight(w);
  }
  absl::Status CopyFromHost(const void* s, const Tensor& d) override {
    return in_->CopyFromHost(s, d);
  }
  absl::Status CopyToHost(const Tensor& s, void* d) override {
    return in_->CopyToHost(s, d);
  }
  void Zero(const Tensor& t) override { in_->Zero(t); }
  void ZeroRows(const Tensor& t, int64_t b, int64_t e) override {
    in_->ZeroRows(t, b, e);
  }
  void CopyRows(const Tensor& t, int64_t src, int64_t dst, int64_t n) override {
    in_->CopyRows(t, src, dst, n);
  }
  void FillRandom(const Tensor& t, uint64_t seed, float low, float high,
                  ElementType value_type) override {
    in_->FillRandom(t, seed, low, high, value_type);
  }
  absl::Status Synchronize() override { return in_->Synchronize(); }
  absl::Status SetBatchLayout(const BatchLayout& l) override {
    return in_->SetBatchLayout(l);
  }
  void MatMul(const Tensor& x, const Tensor& w, const Tensor& y) override {
    in_->MatMul(x, w, y);
  }
  void EmbeddingGather(const Tensor& i, const Tensor& t,
                       const Tensor& o) override {
    in_->EmbeddingGather(i, t, o);
  }
  void RmsNorm(const Tensor& x, const Tensor& w, float e,
               const Tensor& o) override {
    in_->RmsNorm(x, w, e, o);
  }
  void GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w, float e,
                    const Tensor& out) override {
    in_->GatedRmsNorm(o, z, w, e, out);
  }
  void ResidualAdd(const Tensor& x, const Tensor& u,
                   const Tensor& stats) override {
    if (!probe.empty()) {
      ++num_probed_adds;
      const float* p = x.as<float>();
      const int64_t d = x.cols();
      for (int64_t r = 0; r < x.rows(); ++r) {
        double dot = 0.0, sq = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          dot += static_cast<double>(p[r * d + i]) * probe[i];
          sq += static_cast<double>(p[r * d + i]) * p[r * d + i];
        }
        max_alignment = std::max(max_alignment, std::abs(dot) / std::sqrt(sq));
      }
    }
    in_->ResidualAdd(x, u, stats);
  }
  void SwiGlu(const Tensor& g, const Tensor& u, const Tensor& o) override {
    in_->SwiGlu(g, u, o);
  }
  void SigmoidGate(const Tensor& o, const Tensor& g) override {
    in_->SigmoidGate(o, g);
  }
  void L2NormRows(const Tensor& x, int64_t d, float s) override {
    in_->L2NormRows(x, d, s);
  }
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& al,
                const Tensor& dt, const Tensor& g, const Tensor& be) override {
    in_->GdnGates(a, b, al, dt, g, be);
  }
  void CopyColumns(const Tensor& s, int64_t c, const Tensor& d) override {
    in_->CopyColumns(s, c, d);
  }
  void GatherRows(const Tensor& s, const Tensor& r, const Tensor& d) override {
    in_->GatherRows(s, r, d);
  }
  void ArgMaxRows(const Tensor& x, const Tensor& ids) override {
    in_->ArgMaxRows(x, ids);
  }
  void ChooseTokens(const Tensor& x, const Tensor& c, const Tensor& h,
                    const Tensor& ids, const Tensor& lp) override {
    in_->ChooseTokens(x, c, h, ids, lp);
  }
  void AddScaledVector(const Tensor& x, int64_t b, int64_t e, const Tensor& v,
                       float s) override {
    in_->AddScaledVector(x, b, e, v, s);
  }
  void ProjectOut(const Tensor& x, int64_t b, int64_t e,
                  const Tensor& u) override {
    in_->ProjectOut(x, b, e, u);
  }
  void Rope(const Tensor& x, int64_t r, float t) override {
    in_->Rope(x, r, t);
  }
  void CausalConv1dSilu(const Tensor& x, const Tensor& w, const Tensor& p,
                        const Tensor& o) override {
    in_->CausalConv1dSilu(x, w, p, o);
  }
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& g, const Tensor& b, const Tensor& s,
                      const Tensor& o) override {
    in_->GatedDeltaRule(q, k, v, g, b, s, o);
  }
  void WriteKv(const Tensor& k, const Tensor& v, const Tensor& kp,
               const Tensor& vp) override {
    in_->WriteKv(k, v, kp, vp);
  }
  void PagedAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                      float s, const Tensor& o) override {
    in_->PagedAttention(q, k, v, s, o);
  }

 private:
  std::unique_ptr<CpuBackend> in_;
};

class InterventionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cpu = CpuBackend::Create({/*num_threads=*/2});
    ASSERT_TRUE(cpu.ok());
    backend_ = std::make_unique<ProbeBackend>(std::move(*cpu));
    auto decoder = HybridDecoder::Create(Model().config(), Model().weights(),
                                         backend_.get(), {64, kBlockSize, 4});
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    decoder_ = std::move(*decoder);
  }

  // A fresh prefill of `ids` (slot 0) with every token's logits.
  ForwardOutput Run(const std::vector<int32_t>& ids,
                    const StepInterventions* iv = nullptr) {
    EXPECT_TRUE(decoder_->ResetStateSlot(0).ok());
    BatchLayout layout;
    SequenceSlice s;
    s.num_tokens = static_cast<int64_t>(ids.size());
    s.state_slot = 0;
    for (int64_t p = 0; p < s.num_tokens; p += kBlockSize) {
      s.block_table.push_back(static_cast<int32_t>(p / kBlockSize));
    }
    layout.sequences.push_back(s);
    ForwardOptions options;
    options.residual_stats = true;
    options.logits_for_all_tokens = true;
    options.interventions = iv;
    auto out = decoder_->Forward(layout, ids, options);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *std::move(out) : ForwardOutput{};
  }

  int64_t Hidden() const { return Model().config().hidden_size; }
  int64_t Vocab() const { return Model().config().vocab_size; }
  int32_t Layers() const {
    return static_cast<int32_t>(Model().config().num_hidden_layers);
  }

  const std::vector<int32_t> ids_ = {39, 421, 78, 12, 900, 5, 61, 2000, 7, 33};
  std::unique_ptr<ProbeBackend> backend_;
  std::unique_ptr<HybridDecoder> decoder_;
};

std::vector<float> RandomUnit(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  double sq = 0.0;
  for (float& x : v) {
    x = normal(rng);
    sq += static_cast<double>(x) * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(sq));
  return v;
}

TEST_F(InterventionsTest, NeutralInterventionsChangeNothingBitForBit) {
  const ForwardOutput plain = Run(ids_);
  const std::vector<float> zero(static_cast<size_t>(Hidden()), 0.0f);
  const std::vector<float> v = RandomUnit(Hidden(), 1);
  StepInterventions iv;
  const int64_t n = static_cast<int64_t>(ids_.size());
  iv.steers.push_back({3, 0, n, &zero, 5.0f});  // a zero vector
  iv.steers.push_back({6, 0, n, &v, 0.0f});     // a scale of 0
  const ForwardOutput steered = Run(ids_, &iv);
  EXPECT_EQ(steered.logits, plain.logits);
  EXPECT_EQ(steered.residual_stats, plain.residual_stats);
  // Skipping no layers but reading a lens: the same logits too.
  StepInterventions lens_only;
  lens_only.lens.push_back({2, n - 1});
  EXPECT_EQ(Run(ids_, &lens_only).logits, plain.logits);
}

TEST_F(InterventionsTest, SteeringAddsToTheStream) {
  const ForwardOutput plain = Run(ids_);
  const std::vector<float> v = RandomUnit(Hidden(), 2);
  StepInterventions iv;
  const int64_t n = static_cast<int64_t>(ids_.size());
  iv.steers.push_back({5, 4, n, &v, 20.0f});  // rows 4.. after layer 2's ffn
  const ForwardOutput steered = Run(ids_, &iv);
  const int64_t vocab = Vocab();
  // Rows before 4 are untouched (causal), later rows change.
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_TRUE(std::equal(plain.logits.begin() + t * vocab,
                           plain.logits.begin() + (t + 1) * vocab,
                           steered.logits.begin() + t * vocab));
  }
  EXPECT_NE(
      std::vector<float>(plain.logits.begin() + 4 * vocab, plain.logits.end()),
      std::vector<float>(steered.logits.begin() + 4 * vocab,
                         steered.logits.end()));
}

TEST_F(InterventionsTest, SkippingEveryLayerIsTheDirectPath) {
  StepInterventions iv;
  const int64_t n = static_cast<int64_t>(ids_.size());
  for (int32_t s = 0; s < 2 * Layers(); ++s) iv.skips.push_back({s, 0, n});
  const ForwardOutput skipped = Run(ids_, &iv);
  // Direct: embedding -> final norm -> lm_head, with the reference ops.
  const ModelWeights& w = Model().weights();
  ASSERT_EQ(w.embed_tokens.dtype, DType::kBF16);
  std::vector<float> x(static_cast<size_t>(n * Hidden()));
  reference::EmbeddingGather(ids_.data(), n, w.embed_tokens.data,
                             ElementType::kBF16, Hidden(), x.data());
  reference::RmsNormZeroCentred(
      x.data(), n, Hidden(), w.final_norm.data, ElementType::kBF16,
      static_cast<float>(Model().config().rms_norm_eps), x.data());
  std::vector<float> logits(static_cast<size_t>(n * Vocab()));
  reference::MatMul(x.data(), n, Hidden(), w.lm_head.data, ElementType::kBF16,
                    Vocab(), logits.data());
  ASSERT_EQ(skipped.logits.size(), logits.size());
  double max_err = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_err = std::max(
        max_err, std::abs(static_cast<double>(skipped.logits[i]) - logits[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(logits[i])));
  }
  // Fast and reference kernels differ only in summation order.
  EXPECT_LT(max_err, 1e-4 * max_abs);
  // Every update was zeroed: the statistics say so.
  for (size_t r = 0; r < skipped.residual_stats.size();
       r += kResidualStatsColumns) {
    EXPECT_EQ(skipped.residual_stats[r + kStatUpdateNorm], 0.0f);
  }
}

TEST_F(InterventionsTest, AblationLeavesTheStreamOrthogonalEverywhere) {
  const std::vector<float> u = RandomUnit(Hidden(), 3);
  StepInterventions iv;
  iv.ablations.push_back({0, static_cast<int64_t>(ids_.size()), &u});
  backend_->probe = u;
  Run(ids_, &iv);
  EXPECT_EQ(backend_->num_probed_adds, 2 * Layers());
  EXPECT_LT(backend_->max_alignment, 1e-5);
  // Without the ablation the stream does have a component along u.
  backend_->max_alignment = 0.0;
  Run(ids_);
  EXPECT_GT(backend_->max_alignment, 1e-3);
}

TEST_F(InterventionsTest,
       LensAtTheLastLayerIsTheLogitsAndElsewhereSkipTheRest) {
  const int64_t n = static_cast<int64_t>(ids_.size());
  const size_t vocab = static_cast<size_t>(Vocab());
  StepInterventions iv;
  for (int32_t layer = 0; layer < Layers(); ++layer) {
    iv.lens.push_back({layer, n - 1});
    iv.lens.push_back({layer, 2});
  }
  const ForwardOutput out = Run(ids_, &iv);
  ASSERT_EQ(out.lens_logits.size(), iv.lens.size() * vocab);
  // Row `row` of a [rows, vocab] logits buffer.
  auto row_of = [vocab](const std::vector<float>& logits, size_t row) {
    return std::vector<float>(logits.begin() + row * vocab,
                              logits.begin() + (row + 1) * vocab);
  };
  for (int32_t layer = 0; layer < Layers(); ++layer) {
    SCOPED_TRACE(layer);
    // The same stream as the lens reads: every later sublayer skipped
    // (adding a zeroed update leaves the stream as it is, bit for bit).
    StepInterventions rest;
    for (int32_t s = 2 * layer + 2; s < 2 * Layers(); ++s) {
      rest.skips.push_back({s, 0, n});
    }
    const ForwardOutput direct = Run(ids_, &rest);
    for (size_t k = 0; k < 2; ++k) {
      const size_t row = k == 0 ? static_cast<size_t>(n - 1) : 2;
      EXPECT_EQ(row_of(out.lens_logits, 2 * static_cast<size_t>(layer) + k),
                row_of(direct.logits, row))
          << "row " << row;
    }
  }
  // The last layer's lens is the model's own logits, bit for bit.
  EXPECT_EQ(row_of(out.lens_logits, 2 * static_cast<size_t>(Layers() - 1)),
            row_of(out.logits, static_cast<size_t>(n - 1)));
}

}  // namespace
}  // namespace tributary
