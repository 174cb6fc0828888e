// A Backend that times every call of another (bench only): the per-op
// breakdown of a real decoder step, on the CPU (step_ops_bench) or a GPU
// (tributary-gpu-bench).
#ifndef TRIBUTARY_BENCH_COMMON_TIMING_BACKEND_H_
#define TRIBUTARY_BENCH_COMMON_TIMING_BACKEND_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"

namespace tributary {

// Forwards to `inner`, adding each call's wall time to totals[key], keyed
// by op (and weight shape for MatMul). For an asynchronous backend (CUDA)
// `synchronize` makes each timed call wait for its own work, so that its
// time is its cost (and the steps run slower than untimed). Errors a
// synchronize reports are kept for the next Synchronize() or CopyToHost().
// While disabled, calls are forwarded untimed.
class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend* inner, bool synchronize = false)
      : inner_(inner), synchronize_(synchronize) {}

  std::map<std::string, double>& totals() { return totals_; }
  void set_enabled(bool enabled) { enabled_ = enabled; }

  const char* name() const override { return inner_->name(); }
  ElementType activation_type() const override {
    return inner_->activation_type();
  }
  ElementType weight_type(ElementType stored, int rank) const override {
    return inner_->weight_type(stored, rank);
  }
  absl::StatusOr<Tensor> Allocate(ElementType type,
                                  const Shape& shape) override {
    return inner_->Allocate(type, shape);
  }
  void Free(Tensor& tensor) override { inner_->Free(tensor); }
  absl::StatusOr<Tensor> ImportWeight(const void* host, ElementType type,
                                      const Shape& shape) override {
    return inner_->ImportWeight(host, type, shape);
  }
  absl::StatusOr<Tensor> PrepareMatMulWeight(const Tensor& w) override {
    return inner_->PrepareMatMulWeight(w);
  }
  absl::Status CopyFromHost(const void* src, const Tensor& dst) override {
    return Time("CopyFromHost", [&] { return inner_->CopyFromHost(src, dst); });
  }
  absl::Status CopyToHost(const Tensor& src, void* dst) override {
    absl::Status status =
        Time("CopyToHost", [&] { return inner_->CopyToHost(src, dst); });
    if (!pending_.ok()) status = std::exchange(pending_, absl::OkStatus());
    return status;
  }
  void Zero(const Tensor& t) override { inner_->Zero(t); }
  void FillRandom(const Tensor& t, uint64_t seed, float low, float high,
                  ElementType value_type) override {
    inner_->FillRandom(t, seed, low, high, value_type);
  }
  void ZeroRows(const Tensor& t, int64_t b, int64_t e) override {
    inner_->ZeroRows(t, b, e);
  }
  void CopyRows(const Tensor& t, int64_t src, int64_t dst, int64_t n) override {
    inner_->CopyRows(t, src, dst, n);
  }
  absl::Status Synchronize() override {
    absl::Status status = inner_->Synchronize();
    if (!pending_.ok()) status = std::exchange(pending_, absl::OkStatus());
    return status;
  }
  absl::Status SetBatchLayout(const BatchLayout& layout) override {
    return Time("SetBatchLayout",
                [&] { return inner_->SetBatchLayout(layout); });
  }
  // A step in parts runs on the inner backend's parts, untimed op by op
  // (they run at once on several threads): the whole of it is one entry.
  int StepParts(const BatchLayout& layout) const override {
    return inner_->StepParts(layout);
  }
  absl::Status RunInParts(
      int parts,
      absl::FunctionRef<absl::Status(int, Backend&)> body) override {
    return Time("RunInParts (its ops untimed)",
                [&] { return inner_->RunInParts(parts, body); });
  }
  // Graph regions pass through untimed while timing is off; while it is on,
  // every op is issued (and, with `synchronize`, waited for) on its own.
  void BeginGraphRegion() override {
    in_region_ = !enabled_;
    if (in_region_) inner_->BeginGraphRegion();
  }
  absl::Status EndGraphRegion() override {
    if (!in_region_) return absl::OkStatus();
    in_region_ = false;
    return inner_->EndGraphRegion();
  }
  void MatMul(const Tensor& x, const Tensor& w, const Tensor& y) override {
    TimeVoid(absl::StrCat("MatMul ", w.shape[0], "x", w.shape[1]),
             [&] { inner_->MatMul(x, w, y); });
  }
  void MatMuls(const Tensor& x, absl::Span<const MatMulTarget> targets) override {
    std::string key = "MatMuls";
    for (const MatMulTarget& t : targets) {
      absl::StrAppend(&key, " ", t.w->shape[0], "x", t.w->shape[1]);
    }
    TimeVoid(key, [&] { inner_->MatMuls(x, targets); });
  }
  void EmbeddingGather(const Tensor& ids, const Tensor& table,
                       const Tensor& out) override {
    TimeVoid("EmbeddingGather",
             [&] { inner_->EmbeddingGather(ids, table, out); });
  }
  void RmsNorm(const Tensor& x, const Tensor& w, float eps,
               const Tensor& out) override {
    TimeVoid(absl::StrCat("RmsNorm dim ", w.num_elements()),
             [&] { inner_->RmsNorm(x, w, eps, out); });
  }
  void GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w,
                    float eps, const Tensor& out) override {
    TimeVoid("GatedRmsNorm", [&] { inner_->GatedRmsNorm(o, z, w, eps, out); });
  }
  void ResidualAdd(const Tensor& x, const Tensor& u,
                   const Tensor& stats) override {
    TimeVoid("ResidualAdd", [&] { inner_->ResidualAdd(x, u, stats); });
  }
  void ResidualAddRmsNorm(const Tensor& x, const Tensor& u, const Tensor& stats,
                          const Tensor& w, float eps,
                          const Tensor& normed) override {
    TimeVoid("ResidualAddRmsNorm",
             [&] { inner_->ResidualAddRmsNorm(x, u, stats, w, eps, normed); });
  }
  void SwiGlu(const Tensor& g, const Tensor& u, const Tensor& out) override {
    TimeVoid("SwiGlu", [&] { inner_->SwiGlu(g, u, out); });
  }
  void GateUpSwiGlu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                    const Tensor& gate, const Tensor& up, const Tensor& out) override {
    TimeVoid("GateUpSwiGlu",
             [&] { inner_->GateUpSwiGlu(x, w_gate, w_up, gate, up, out); });
  }
  void SigmoidGate(const Tensor& o, const Tensor& gate) override {
    TimeVoid("SigmoidGate", [&] { inner_->SigmoidGate(o, gate); });
  }
  void L2NormRows(const Tensor& x, int64_t dim, float scale) override {
    TimeVoid("L2NormRows", [&] { inner_->L2NormRows(x, dim, scale); });
  }
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log,
                const Tensor& dt_bias, const Tensor& g,
                const Tensor& beta) override {
    TimeVoid("GdnGates",
             [&] { inner_->GdnGates(a, b, a_log, dt_bias, g, beta); });
  }
  void CopyColumns(const Tensor& src, int64_t col_begin,
                   const Tensor& dst) override {
    TimeVoid("CopyColumns", [&] { inner_->CopyColumns(src, col_begin, dst); });
  }
  void GatherRows(const Tensor& src, const Tensor& rows,
                  const Tensor& dst) override {
    TimeVoid("GatherRows", [&] { inner_->GatherRows(src, rows, dst); });
  }
  void ArgMaxRows(const Tensor& x, const Tensor& ids) override {
    TimeVoid("ArgMaxRows", [&] { inner_->ArgMaxRows(x, ids); });
  }
  void ChooseTokens(const Tensor& x, const Tensor& choices,
                    const Tensor& history, const Tensor& ids,
                    const Tensor& logprobs) override {
    TimeVoid("ChooseTokens",
             [&] { inner_->ChooseTokens(x, choices, history, ids, logprobs); });
  }
  void AddScaledVector(const Tensor& x, int64_t row_begin, int64_t row_end,
                       const Tensor& v, float scale) override {
    TimeVoid("AddScaledVector", [&] {
      inner_->AddScaledVector(x, row_begin, row_end, v, scale);
    });
  }
  void ProjectOut(const Tensor& x, int64_t row_begin, int64_t row_end,
                  const Tensor& u) override {
    TimeVoid("ProjectOut",
             [&] { inner_->ProjectOut(x, row_begin, row_end, u); });
  }
  void Rope(const Tensor& x, int64_t rotary_dim, float theta) override {
    TimeVoid("Rope", [&] { inner_->Rope(x, rotary_dim, theta); });
  }
  void CausalConv1dSilu(const Tensor& x, const Tensor& w,
                        const Tensor& window_pool, const Tensor& out) override {
    TimeVoid("CausalConv1dSilu",
             [&] { inner_->CausalConv1dSilu(x, w, window_pool, out); });
  }
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& g, const Tensor& beta,
                      const Tensor& state_pool, const Tensor& out) override {
    TimeVoid("GatedDeltaRule", [&] {
      inner_->GatedDeltaRule(q, k, v, g, beta, state_pool, out);
    });
  }
  // One entry for the whole core (the inner backend's composition or its
  // fused kernel).
  void GatedDeltaNet(const Tensor& conv_out, const Tensor& a, const Tensor& b,
                     const Tensor& a_log, const Tensor& dt_bias,
                     const GdnScratch& scratch, const Tensor& state_pool,
                     const Tensor& out) override {
    TimeVoid("GatedDeltaNet", [&] {
      inner_->GatedDeltaNet(conv_out, a, b, a_log, dt_bias, scratch, state_pool,
                            out);
    });
  }
  void WriteKv(const Tensor& k, const Tensor& v, const Tensor& k_pool,
               const Tensor& v_pool) override {
    TimeVoid("WriteKv", [&] { inner_->WriteKv(k, v, k_pool, v_pool); });
  }
  void AttentionInputs(const Tensor& q_and_gate, const Tensor& k,
                       const Tensor& v, const Tensor& q_norm,
                       const Tensor& k_norm, float eps, int64_t rotary_dim,
                       float theta, const Tensor& q, const Tensor& gate,
                       const Tensor& k_pool, const Tensor& v_pool) override {
    TimeVoid("AttentionInputs", [&] {
      inner_->AttentionInputs(q_and_gate, k, v, q_norm, k_norm, eps, rotary_dim,
                              theta, q, gate, k_pool, v_pool);
    });
  }
  void PagedAttention(const Tensor& q, const Tensor& k_pool,
                      const Tensor& v_pool, float scale,
                      const Tensor& out) override {
    TimeVoid("PagedAttention",
             [&] { inner_->PagedAttention(q, k_pool, v_pool, scale, out); });
  }

 private:
  template <typename Fn>
  absl::Status Time(const std::string& key, Fn fn) {
    if (!enabled_) return fn();
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = fn();
    Wait();
    totals_[key] += std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    return status;
  }
  template <typename Fn>
  void TimeVoid(const std::string& key, Fn fn) {
    if (!enabled_) {
      fn();
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    fn();
    Wait();
    totals_[key] += std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  }
  void Wait() {
    if (!synchronize_) return;
    absl::Status status = inner_->Synchronize();
    if (pending_.ok() && !status.ok()) pending_ = status;
  }

  Backend* inner_;
  bool synchronize_;
  bool enabled_ = true;
  bool in_region_ = false;
  absl::Status pending_;
  std::map<std::string, double> totals_;
};

}  // namespace tributary

#endif  // TRIBUTARY_BENCH_COMMON_TIMING_BACKEND_H_
