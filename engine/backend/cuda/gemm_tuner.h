// GemmTuner: the algorithm of a product chosen by measuring it on the
// device for the model's shapes (CudaBackendOptions::tune_gemms).
//
// cublasGemmEx runs the first algorithm of cuBLASLt's heuristic for a
// shape. The heuristic ranks by a model of the device, and for the skinny
// products of batched decode (a few dozen tokens against matrices of
// thousands of rows) its first choice need not be the fastest. For each new
// shape, the tuner asks cuBLASLt for its first `max_candidates` algorithms
// that fit the workspace and runs each of them and cublasGemmEx on the
// product's operands: once untimed, then in `rounds` interleaved rounds (so
// that a slow phase of the device hits all of them), each run timed alone
// between two events after a write of the flush buffer (twice the L2: a
// decode step reads its weights from memory, not from an L2 that the
// previous run filled; and the write keeps the device busy while the host
// issues the next run, so that the events time the device, not the host's
// launch). It keeps the fastest median when it beats cublasGemmEx's by at
// least `min_gain`; otherwise cublasGemmEx stays. The choice holds for the
// life of the tuner.
//
// A tuning that fails short of a sticky device error (cuBLASLt declining
// the shape, no memory for events) leaves the shape on cublasGemmEx, noted
// in its GemmChoice, and is not tried again.
//
// Token counts are tuned by bucket (TokenBucket: powers of two from 16):
// the first count of a bucket met is timed, and the other counts of the
// bucket take its choice, each checked with cublasLtMatmulAlgoCheck for its
// own layouts (cublasGemmEx where the check fails).
//
// What it costs: each new bucket of each shape, once, (1 + rounds) ×
// (1 + candidates) runs of the product, rounds × (1 + candidates) writes of
// the flush buffer and a synchronization of the stream; a new count in a
// tuned bucket, an algorithm check. What it changes: a product's bits may
// differ from cublasGemmEx's (another algorithm sums in another order),
// and, since the choice is a measurement, from one process to the next;
// hence opt-in.
//
// Thread safety: one thread at a time, the backend's.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_GEMM_TUNER_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_GEMM_TUNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/cublas_api.h"
#include "engine/backend/cuda/cublas_lt_api.h"
#include "engine/backend/cuda/cuda_api.h"

namespace tributary {
namespace cuda {

// A product in cuBLAS's column-major terms, as CudaBackend::MatMul issues
// it: D [m, n] = Aᵀ · B, A stored [k, m] (lda = k: the weight [out, in]
// row-major), B [k, n] (ldb = k: the tokens' inputs), D ldd = m (the
// outputs [tokens, out] row-major). So m = out_features, n = tokens,
// k = in_features. The operands' alignments are part of it: cuBLASLt's
// heuristic offers only algorithms that the given alignments allow (it
// assumes 256 bytes otherwise), so a product on a view of a buffer (rows
// from an offset) is its own shape.
struct GemmShape {
  int m = 0;
  int n = 0;
  int k = 0;
  cudaDataType_t ab_type = CUDA_R_16BF;  // A's and B's
  cudaDataType_t d_type = CUDA_R_16BF;
  // Bytes (powers of two, at most kMaxAlignment) by which A, B and D are
  // aligned (OperandAlignment).
  uint32_t a_alignment = kMaxAlignment;
  uint32_t b_alignment = kMaxAlignment;
  uint32_t d_alignment = kMaxAlignment;

  static constexpr uint32_t kMaxAlignment = 256;

  bool operator==(const GemmShape& o) const {
    return m == o.m && n == o.n && k == o.k && ab_type == o.ab_type &&
           d_type == o.d_type && a_alignment == o.a_alignment &&
           b_alignment == o.b_alignment && d_alignment == o.d_alignment;
  }
};

// The largest power of two, at most GemmShape::kMaxAlignment, that divides
// the address.
uint32_t OperandAlignment(const void* p);

// The bucket of token counts a tuning covers: the least power of two ≥
// `tokens`, at least 16 (1–16, 17–32, 33–64, …).
int TokenBucket(int tokens);

struct GemmShapeHash {
  size_t operator()(const GemmShape& s) const;
};

// What tuning found for one shape (the benchmark reports these).
struct GemmChoice {
  GemmShape shape;
  int candidates = 0;       // cuBLASLt algorithms timed
  double default_ms = 0.0;  // cublasGemmEx, median of the rounds
  double best_ms = 0.0;     // the fastest candidate's median; 0 without one
  int chosen = -1;          // its rank in the heuristic's list; -1: cublasGemmEx
  std::string failure;      // why tuning stopped short (then cublasGemmEx); empty
};

// Which algorithm wins: the index of the fastest of `candidate_ms` (ties to
// the lower index) when it is at least `min_gain` (a fraction) faster than
// `default_ms`, else -1 (cublasGemmEx's default). Non-positive and
// non-finite times never win.
int ChooseFastest(double default_ms, const std::vector<double>& candidate_ms,
                  double min_gain);

class GemmTuner {
 public:
  struct Options {
    int max_candidates = 8;  // the heuristic's first ones, at most
    int rounds = 5;          // timed runs of each, interleaved
    double min_gain = 0.03;  // how much faster than cublasGemmEx a choice must be

    absl::Status Validate() const;
  };

  // The handles, the stream and the buffers are the backend's (the tuner
  // keeps them, not owns them). `workspace` [workspace_bytes] is the one
  // cuBLAS was given: the stream orders their uses. `scratch`
  // [scratch_bytes] is what the candidates write their output into (a
  // shape whose output is larger is not tuned), and its first
  // `flush_bytes` (at most scratch_bytes; 0: no flush) what is written
  // before each timed run. Loads cuBLASLt (FAILED_PRECONDITION when it
  // cannot).
  static absl::StatusOr<std::unique_ptr<GemmTuner>> Create(
      const CublasApi& blas, cublasHandle_t blas_handle, cudaStream_t stream,
      void* workspace, size_t workspace_bytes, void* scratch,
      size_t scratch_bytes, size_t flush_bytes, const Options& options);
  ~GemmTuner();

  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;

  // A chosen cuBLASLt algorithm with its descriptors (destroyed with it).
  struct Plan;

  // The plan for `shape`, or null when cublasGemmEx stays. A shape of a new
  // bucket is tuned first, on `a` and `b` (read) into the scratch (nothing
  // else is written), which synchronizes the stream: never call it while
  // the stream captures. A new bucket whose output would not fit the
  // scratch keeps cublasGemmEx, untuned and unrecorded. An error only for
  // a sticky device error (UNAVAILABLE, cuda_status.h).
  absl::StatusOr<const Plan*> Choose(const GemmShape& shape, const void* a,
                                     const void* b);

  // Issues D = Aᵀ · B of the plan's shape with its algorithm on the stream
  // (graph capture records it).
  cublasStatus_t Run(const Plan& plan, const void* a, const void* b,
                     void* d) const;

  // Every bucket tuned so far (its shape: the count it was timed at), in
  // the order it was.
  const std::vector<GemmChoice>& choices() const { return choices_; }

 private:
  GemmTuner(const CublasApi& blas, const CublasLtApi& lt,
            cublasHandle_t blas_handle, cudaStream_t stream, void* workspace,
            size_t workspace_bytes, void* scratch, size_t scratch_bytes,
            size_t flush_bytes, const Options& options);
  // Choose's measurement: the plan to keep (null: cublasGemmEx), `choice`
  // filled; any error stops it.
  absl::StatusOr<std::unique_ptr<Plan>> Tune(const GemmShape& shape,
                                             const void* a, const void* b,
                                             GemmChoice* choice);
  // The plan of a count of a tuned bucket: the bucket's algorithm if
  // cuBLASLt's check accepts it for the count's layouts, else null; an
  // error from making the descriptors.
  absl::StatusOr<std::unique_ptr<Plan>> Reuse(const GemmShape& shape,
                                              const cublasLtMatmulAlgo_t& algo);
  // cublasGemmEx on the shape, as the backend issues it.
  cublasStatus_t RunDefault(const GemmShape& shape, const void* a,
                            const void* b, void* d) const;
  // The plan's descriptors for `shape`, its algorithm not yet set.
  absl::StatusOr<std::unique_ptr<Plan>> Describe(const GemmShape& shape) const;

  const CublasApi& blas_;
  const CublasLtApi& lt_;
  cublasHandle_t blas_handle_;
  cublasLtHandle_t lt_handle_ = nullptr;
  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  void* scratch_;
  size_t scratch_bytes_;
  size_t flush_bytes_;
  Options options_;

  // Every shape met; a null plan: cublasGemmEx. Plans never move (the
  // backend's recorded graph work holds pointers to them).
  std::unordered_map<GemmShape, std::unique_ptr<Plan>, GemmShapeHash> plans_;
  // Every tuned bucket (its shape with n = TokenBucket(n)): its algorithm,
  // or none (cublasGemmEx).
  std::unordered_map<GemmShape, std::optional<cublasLtMatmulAlgo_t>, GemmShapeHash>
      buckets_;
  std::vector<GemmChoice> choices_;
};

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_GEMM_TUNER_H_
