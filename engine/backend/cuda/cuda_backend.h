// The CUDA backend (design.md §7): bf16 activations and matrix weights, f32
// accumulation, f32 GDN state and residual statistics. GEMMs go through
// cuBLAS (cublasGemmEx, f32 compute) except products of at most 8 tokens
// (the few-token kernel, grouped per layer by MatMuls); every other op is a
// kernel (cuda_kernels.h) checked against the CPU backend by the `gpu`
// tests. The fast kernels (split and flash attention, the tiled recurrent
// and the chunked delta rule, the fused GDN decode core and attention
// inputs, the few-token products, the fused add + norm) run by default; the
// straightforward ones (and cuBLAS for every product) stay behind
// straightforward_kernels, the baseline the fast ones are measured against.
//
// Graph regions (backend.h) become CUDA graphs: the region's launches are
// recorded with their exact arguments (launch_recorder.h), captured into a
// graph the first time and replayed while they stay the same.
//
// Ops are queued on one CUDA stream in issue order and return at once. A
// failed launch or argument check is remembered and returned by the next
// Synchronize() or CopyToHost() (backend.h). A sticky device error makes
// every later call fail with UNAVAILABLE (cuda_status.h): the engine treats
// that as fatal.
//
// Weights: ImportWeight copies host memory to the device; matrices (rank ≥ 2)
// are converted to the activation type (bf16) there, vectors (norm weights, A_log, dt_bias) keep
// their stored type (A_log stays f32, as vLLM keeps it: model-spec §6.3).
//
// Thread safety: one thread at a time (backend.h). The backend makes its
// device current on the calling thread in every memory call and in
// SetBatchLayout, so it may be created on one thread and used on another.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_options.h"

// The runtime's opaque handle types, declared so that this header needs no
// CUDA include (it is included by code g++ compiles without the toolkit's
// paths).
struct CUstream_st;
struct cublasContext;
struct CUgraphExec_st;

namespace tributary {
namespace cuda {
struct CublasApi;
struct GemmShape;
class GemmTuner;
class LaunchRecorder;
}  // namespace cuda


// What the GEMM tuner found for one product shape (CudaBackend::
// gemm_tunings; cuda/gemm_tuner.h's GemmChoice in the backend's terms).
struct GemmTuning {
  int64_t out_features = 0;
  int64_t tokens = 0;
  int64_t in_features = 0;
  bool f32_output = false;  // else bf16 (the activation type)
  int candidates = 0;       // cuBLASLt algorithms timed
  double default_ms = 0.0;  // cublasGemmEx's
  double best_ms = 0.0;     // the fastest candidate's (0: none ran)
  int chosen = -1;          // the heuristic's rank of the one used; -1: cublasGemmEx
  std::string failure;      // why tuning stopped short (then cublasGemmEx)
};

class CudaBackend final : public Backend {
 public:
  // FAILED_PRECONDITION when there is no such device or no driver (the
  // message says which), else the first CUDA or cuBLAS error.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      const CudaBackendOptions& options);
  ~CudaBackend() override;
  // The number of CUDA devices; 0 with `why` set when there is none or no
  // driver (a machine without a GPU).
  static int DeviceCount(std::string* why);

  const char* name() const override { return "cuda"; }
  ElementType activation_type() const override {
    return options_.activation_type;
  }
  ElementType weight_type(ElementType stored, int rank) const override {
    return rank >= 2 && stored != ElementType::kI32 ? options_.activation_type
                                                    : stored;
  }
  // "NVIDIA H200, 139.8 GiB, sm_90" and the like.
  const std::string& device_description() const { return description_; }
  // Bytes of device memory this backend holds now.
  size_t allocated_bytes() const { return allocated_bytes_; }
  // Switches between the fast and the straightforward kernels between
  // steps (CudaBackendOptions::straightforward_kernels), so that a
  // benchmark can interleave the two on one model.
  void set_straightforward_kernels(bool on) {
    options_.straightforward_kernels = on;
  }
  // The same for CudaBackendOptions::graphs (takes effect at the next
  // region).
  void set_graphs(bool on) { options_.graphs = on; }
  // The same for CudaBackendOptions::programmatic_launch (from the next
  // launch; a graph region records the setting with its launches, so call
  // it between steps). Stays off on a device before Hopper or with kernels
  // not built for it; programmatic_launch() says whether it took.
  void set_programmatic_launch(bool on);
  bool programmatic_launch() const { return options_.programmatic_launch; }
  // The same for CudaBackendOptions::tune_gemms (from the next product).
  // The first time it is turned on (here or by the options) the tuner is
  // made: cuBLASLt loaded (FAILED_PRECONDITION when it cannot be) and a
  // scratch of max(kTuneScratchBytes, twice the device's L2) allocated (the
  // candidates' output, and the buffer written between timed runs).
  // Turning it off keeps the choices for when it is turned on again.
  absl::Status set_tune_gemms(bool on);
  bool tune_gemms() const { return options_.tune_gemms; }
  // Every shape tuned so far, in the order it was.
  std::vector<GemmTuning> gemm_tunings() const;
  // The most tokens of a tuned product, and the least size of the scratch
  // the tuner runs the candidates into: a product whose output does not
  // fit it keeps cublasGemmEx's default.
  static constexpr int64_t kTuneMaxTokens = 256;
  static constexpr size_t kTuneScratchBytes = size_t{64} << 20;
  // What the graph regions did so far: captured into a new graph, replayed
  // a kept one, or ran as plain launches (graphs off, or a capture failed).
  struct GraphStats {
    int64_t captured = 0;
    int64_t replayed = 0;
    int64_t eager = 0;
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

  absl::StatusOr<Tensor> Allocate(ElementType type,
                                  const Shape& shape) override;
  void Free(Tensor& tensor) override;
  // cuBLAS reads the imported [out, in] matrix as it is.
  absl::StatusOr<Tensor> PrepareMatMulWeight(const Tensor& w) override {
    return w;
  }
  absl::StatusOr<Tensor> ImportWeight(const void* host, ElementType type,
                                      const Shape& shape) override;
  absl::Status CopyFromHost(const void* src, const Tensor& dst) override;
  absl::Status CopyToHost(const Tensor& src, void* dst) override;
  void Zero(const Tensor& tensor) override;
  void ZeroRows(const Tensor& tensor, int64_t row_begin,
                int64_t row_end) override;
  void CopyRows(const Tensor& tensor, int64_t src_row, int64_t dst_row,
                int64_t num_rows) override;
  void FillRandom(const Tensor& tensor, uint64_t seed, float low, float high,
                  ElementType value_type) override;
  absl::Status Synchronize() override;
  absl::Status SetBatchLayout(const BatchLayout& layout) override;
  void BeginGraphRegion() override;
  absl::Status EndGraphRegion() override;

  void MatMul(const Tensor& x, const Tensor& w, const Tensor& y) override;
  void MatMuls(const Tensor& x, absl::Span<const MatMulTarget> targets) override;
  void EmbeddingGather(const Tensor& ids, const Tensor& table,
                       const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& w, float eps,
               const Tensor& out) override;
  void GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w,
                    float eps, const Tensor& out) override;
  void ResidualAdd(const Tensor& x, const Tensor& u,
                   const Tensor& stats) override;
  void ResidualAddRmsNorm(const Tensor& x, const Tensor& u,
                          const Tensor& stats, const Tensor& w, float eps,
                          const Tensor& normed) override;
  void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void GateUpSwiGlu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                    const Tensor& gate, const Tensor& up, const Tensor& out) override;
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
  // Fast kernels and a step of decodes only (no chunked sequence): one fused
  // kernel; otherwise the default composition.
  void GatedDeltaNet(const Tensor& conv_out, const Tensor& a, const Tensor& b,
                     const Tensor& a_log, const Tensor& dt_bias,
                     const GdnScratch& scratch, const Tensor& state_pool,
                     const Tensor& out) override;
  void WriteKv(const Tensor& k, const Tensor& v, const Tensor& k_pool,
               const Tensor& v_pool) override;
  // Fast kernels: one fused kernel; straightforward: the default
  // composition.
  void AttentionInputs(const Tensor& q_and_gate, const Tensor& k,
                       const Tensor& v, const Tensor& q_norm,
                       const Tensor& k_norm, float eps, int64_t rotary_dim,
                       float theta, const Tensor& q, const Tensor& gate,
                       const Tensor& k_pool, const Tensor& v_pool) override;
  void PagedAttention(const Tensor& q, const Tensor& k_pool,
                      const Tensor& v_pool, float scale,
                      const Tensor& out) override;

 private:
  struct DeviceLayoutBuffer;

  explicit CudaBackend(const CudaBackendOptions& options);
  absl::Status Init();
  // Makes the device current on this thread; false (and the error
  // remembered) when that fails.
  bool Activate();
  // Remembers the first error since the last Synchronize (and a sticky one
  // for good). Returns `status.ok()`.
  bool Record(const absl::Status& status);
  // After a launch: the launch error, if any.
  void CheckLaunch(const char* what);
  // An argument the decoder should never pass: remembered as INTERNAL.
  bool Require(bool condition, const char* what);
  // Whether the few-token kernel takes x · wᵀ (cuda_kernels.h: LaunchGemv).
  bool TakesGemv(const Tensor& x, const Tensor& w) const;
  // The tuned algorithm of y [n, m] = x [n, k] · w [m, k]ᵀ (tuned now if
  // new), null for cublasGemmEx's default; false (the error remembered)
  // on a sticky device error.
  bool TunedPlan(const cuda::GemmShape& shape, const void* w, const void* x,
                 const void** plan);
  absl::StatusOr<void*> DeviceAlloc(size_t bytes, const char* what);
  void DeviceFree(void* data);
  // Issues `work` now, or records it in the graph region under the key
  // words of `key` (its exact arguments).
  template <typename Work, typename... Key>
  void IssueOrRecord(Work&& work, const Key&... key);
  // Runs the region's recorded work as plain launches.
  void IssueRecorded();
  // Issues the region's recorded work: a kept graph, a new one, or plain
  // launches.
  absl::Status IssueRegion();
  // Drops every kept graph.
  void ClearGraphs();

  // A device buffer that only grows, kept between steps.
  struct ScratchBuffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // `buffer` grown to at least `bytes`; null (the error remembered) when
  // that fails.
  float* Scratch(ScratchBuffer& buffer, size_t bytes, const char* what);

  CudaBackendOptions options_;
  std::string description_;
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  const cuda::CublasApi* cublas_api_ = nullptr;  // loaded in Init
  void* cublas_workspace_ = nullptr;
  std::unique_ptr<DeviceLayoutBuffer> layout_;
  int multiprocessors_ = 1;
  size_t l2_bytes_ = 0;  // the device's L2
  bool programmatic_launch_possible_ = false;  // set by Init
  // The GEMM tuner (tune_gemms), made when tuning is first turned on (its
  // scratch is one of allocation_bytes_).
  std::unique_ptr<cuda::GemmTuner> tuner_;
  // The most keys a token of this step attends to (its position + 1), and
  // the same and the token count over the sequences the flash kernel may
  // take no part in (fewer than kFlashMinTokens new tokens).
  int64_t max_keys_ = 0;
  int64_t max_keys_without_flash_ = 0;
  int64_t tokens_without_flash_ = 0;
  // The most 64-token chunks a sequence of this step has in the chunked
  // delta rule.
  int64_t max_delta_chunks_ = 0;
  ScratchBuffer attention_partials_;
  ScratchBuffer delta_rule_workspace_;
  // Scratch buffers replaced inside a graph region, freed at its end.
  std::vector<void*> retired_;
  // Graph regions.
  struct KeptGraph {
    std::vector<uint64_t> words;  // the region's exact launches
    CUgraphExec_st* exec = nullptr;
    uint64_t last_use = 0;
  };
  std::unique_ptr<cuda::LaunchRecorder> recorder_;
  bool in_region_ = false;
  std::unordered_multimap<uint64_t, KeptGraph> graphs_;  // by hash of words
  uint64_t graph_clock_ = 0;
  GraphStats graph_stats_;
  absl::Status pending_;  // first error since the last Synchronize
  absl::Status sticky_;   // a sticky device error: every call fails with it
  std::unordered_map<void*, size_t> allocation_bytes_;  // ours to free
  size_t allocated_bytes_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_
