// The CPU backend: f32 activations in host memory, weights aliased in their
// stored type (bf16/f16/f32) straight from the mmap'd checkpoint (with bf16
// products, matrices packed once as bf16 pairs instead), the fast
// kernels on a thread pool (matmul.h, elementwise.h, delta_rule.h,
// attention.h), and the reference ops (reference_ops.h) for the few cheap
// rest (embedding gather, RoPE, KV writes). Ops run synchronously on
// the calling thread (and the pool), so Synchronize() only reports errors. A
// step of several sequences may run in parts (RunInParts), one per thread,
// each part's ops on a one-thread backend of its own.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>
#include <unordered_set>
#include <vector>

#include "engine/backend/backend_options.h"
#include "engine/backend/backend.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/backend/cpu/matmul.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {


class CpuBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(
      const CpuBackendOptions& options);
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  ElementType activation_type() const override { return ElementType::kF32; }
  ElementType weight_type(ElementType stored, int /*rank*/) const override {
    return stored;
  }
  int num_threads() const { return pool_->num_threads(); }
  // With step_in_parts and more than one thread: one part per thread, up to
  // one per sequence; otherwise 1. Also 1 when the step has fewer than
  // min_part_tokens tokens a part, or fewer than 64 a part while the matmul
  // weights exceed a quarter of the shared cache (each part would stream
  // them all from memory); and fewer parts while the largest would hold
  // more than max_part_imbalance times its share.
  int StepParts(const BatchLayout& layout) const override;
  // The bytes of every matmul weight PrepareMatMulWeight was given (what a
  // step's products read).
  int64_t matmul_weight_bytes() const { return matmul_weight_bytes_; }
  // Part p runs on a one-thread backend of its own, the parts claimed by the
  // pool's threads as any job's chunks are. More parts than StepParts can
  // give (num_threads() with step_in_parts, else 1): INVALID_ARGUMENT.
  absl::Status RunInParts(
      int parts,
      absl::FunctionRef<absl::Status(int part, Backend& backend)> body) override;
  MatMulPrecision matmul_precision() const { return matmul_precision_; }
  // Products on a bf16 matrix PrepareMatMulWeight had not packed (bf16
  // products pack it for that call alone; f32 products take the stored
  // rows' order): 0 for a model whose loader prepares every matmul weight.
  int64_t unprepared_bf16_matmuls() const;

  absl::StatusOr<Tensor> Allocate(ElementType type,
                                  const Shape& shape) override;
  void Free(Tensor& tensor) override;
  absl::StatusOr<Tensor> ImportWeight(const void* host, ElementType type,
                                      const Shape& shape) override;
  // A bf16 matrix packed as bf16 pairs (matmul.h, PackBf16Pairs), for the
  // f32 products' and the bf16 products' fast tiles (no lane tree, no
  // widening pass); otherwise `w`.
  absl::StatusOr<Tensor> PrepareMatMulWeight(const Tensor& w) override;
  absl::Status CopyFromHost(const void* src, const Tensor& dst) override;
  absl::Status CopyToHost(const Tensor& src, void* dst) override;
  void Zero(const Tensor& tensor) override;
  void ZeroRows(const Tensor& tensor, int64_t row_begin,
                int64_t row_end) override;
  void CopyRows(const Tensor& tensor, int64_t src_row, int64_t dst_row,
                int64_t num_rows) override;
  void FillRandom(const Tensor& tensor, uint64_t seed, float low, float high,
                  ElementType value_type) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::Status SetBatchLayout(const BatchLayout& layout) override;

  void MatMul(const Tensor& x, const Tensor& w, const Tensor& y) override;
  void MatMuls(const Tensor& x,
               absl::Span<const MatMulTarget> targets) override;
  void EmbeddingGather(const Tensor& ids, const Tensor& table,
                       const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& w, float eps,
               const Tensor& out) override;
  void GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w,
                    float eps, const Tensor& out) override;
  void ResidualAdd(const Tensor& x, const Tensor& u,
                   const Tensor& stats) override;
  void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void SigmoidGate(const Tensor& o, const Tensor& gate) override;
  void L2NormRows(const Tensor& x, int64_t dim, float scale) override;
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log,
                const Tensor& dt_bias, const Tensor& g,
                const Tensor& beta) override;
  void CopyColumns(const Tensor& src, int64_t col_begin,
                   const Tensor& dst) override;
  void GatherRows(const Tensor& src, const Tensor& rows,
                  const Tensor& dst) override;
  void ArgMaxRows(const Tensor& x, const Tensor& ids) override;
  void ChooseTokens(const Tensor& x, const Tensor& choices,
                    const Tensor& history, const Tensor& ids,
                    const Tensor& logprobs) override;
  void AddScaledVector(const Tensor& x, int64_t row_begin, int64_t row_end,
                       const Tensor& v, float scale) override;
  void ProjectOut(const Tensor& x, int64_t row_begin, int64_t row_end,
                  const Tensor& u) override;
  void Rope(const Tensor& x, int64_t rotary_dim, float theta) override;
  void CausalConv1dSilu(const Tensor& x, const Tensor& w,
                        const Tensor& window_pool, const Tensor& out) override;
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& g, const Tensor& beta,
                      const Tensor& state_pool, const Tensor& out) override;
  void WriteKv(const Tensor& k, const Tensor& v, const Tensor& k_pool,
               const Tensor& v_pool) override;
  void PagedAttention(const Tensor& q, const Tensor& k_pool,
                      const Tensor& v_pool, float scale,
                      const Tensor& out) override;

 private:
  CpuBackend(int num_threads, MatMulPrecision matmul_precision,
             DeltaRuleForm delta_rule_form);

  std::unique_ptr<ThreadPool> pool_;
  // The one-thread backends that run a step's parts ([num_threads] with
  // step_in_parts and more than one thread, else empty). They read this
  // backend's packed weights (packed_) and allocate nothing.
  std::vector<std::unique_ptr<CpuBackend>> parts_;
  const MatMulPrecision matmul_precision_;
  const DeltaRuleForm delta_rule_form_;
  int64_t min_part_tokens_ = 1;        // CpuBackendOptions::min_part_tokens
  double max_part_imbalance_ = 1.5;    // CpuBackendOptions::max_part_imbalance
  BatchLayout layout_;
  std::vector<int32_t> positions_;  // [T], from layout_
  std::unordered_set<void*> allocations_;
  // The allocations that hold weights packed by PrepareMatMulWeight (a
  // subset of allocations_): MatMul reads them as WeightLayout::kBf16Pairs.
  std::unordered_set<const void*> bf16_pairs_;
  // The set MatMul looks packed weights up in: bf16_pairs_, or a part's
  // owner's.
  const std::unordered_set<const void*>* packed_ = &bf16_pairs_;

  // Counts the products on an unprepared bf16 matrix.
  WeightLayout LayoutOf(const Tensor& w) {
    if (packed_->count(w.data) != 0) return WeightLayout::kBf16Pairs;
    if (w.type == ElementType::kBF16) ++unprepared_bf16_matmuls_;
    return WeightLayout::kRows;
  }
  int64_t unprepared_bf16_matmuls_ = 0;
  int64_t matmul_weight_bytes_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
