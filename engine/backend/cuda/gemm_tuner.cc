#include "engine/backend/cuda/gemm_tuner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_status.h"
#include "base/status_macros.h"

namespace tributary {
namespace cuda {

struct GemmTuner::Plan {
  explicit Plan(const CublasLtApi& api) : lt(api) {}
  ~Plan() {
    if (d != nullptr) (void)lt.layout_destroy(d);
    if (b != nullptr) (void)lt.layout_destroy(b);
    if (a != nullptr) (void)lt.layout_destroy(a);
    if (desc != nullptr) (void)lt.desc_destroy(desc);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const CublasLtApi& lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;  // what the algorithm needs (≤ the tuner's)
};

namespace {

// The events of one tuning, destroyed with it.
class Events {
 public:
  ~Events() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  absl::StatusOr<cudaEvent_t> Add() {
    cudaEvent_t e = nullptr;
    RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&e), "cudaEventCreate"));
    events_.push_back(e);
    return e;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

size_t GemmShapeHash::operator()(const GemmShape& s) const {
  size_t h = std::hash<int>{}(s.m);
  for (int64_t v : {int64_t{s.n}, int64_t{s.k}, int64_t{s.ab_type},
                    int64_t{s.d_type}, int64_t{s.a_alignment},
                    int64_t{s.b_alignment}, int64_t{s.d_alignment}}) {
    h = h * 1000003u ^ std::hash<int64_t>{}(v);
  }
  return h;
}

int TokenBucket(int tokens) {
  int bucket = 16;
  while (bucket < tokens) bucket *= 2;
  return bucket;
}

uint32_t OperandAlignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = GemmShape::kMaxAlignment;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

int ChooseFastest(double default_ms, const std::vector<double>& candidate_ms,
                  double min_gain) {
  int best = -1;
  for (size_t i = 0; i < candidate_ms.size(); ++i) {
    const double t = candidate_ms[i];
    if (!(t > 0.0) || !std::isfinite(t)) continue;
    if (best < 0 || t < candidate_ms[static_cast<size_t>(best)]) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) return -1;
  // A default that did not time (non-positive, NaN) loses to any candidate.
  const bool default_timed = default_ms > 0.0 && std::isfinite(default_ms);
  if (default_timed &&
      !(candidate_ms[static_cast<size_t>(best)] <= (1.0 - min_gain) * default_ms)) {
    return -1;
  }
  return best;
}

absl::Status GemmTuner::Options::Validate() const {
  if (max_candidates < 1 || max_candidates > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm tuner: max_candidates = ", max_candidates, " must be in [1, 64]"));
  }
  if (rounds < 1 || rounds > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm tuner: rounds = ", rounds, " must be in [1, 100]"));
  }
  if (!(min_gain >= 0.0 && min_gain < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm tuner: min_gain = ", min_gain, " must be in [0, 1)"));
  }
  return absl::OkStatus();
}

GemmTuner::GemmTuner(const CublasApi& blas, const CublasLtApi& lt,
                     cublasHandle_t blas_handle, cudaStream_t stream,
                     void* workspace, size_t workspace_bytes, void* scratch,
                     size_t scratch_bytes, size_t flush_bytes,
                     const Options& options)
    : blas_(blas),
      lt_(lt),
      blas_handle_(blas_handle),
      stream_(stream),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes),
      scratch_(scratch),
      scratch_bytes_(scratch == nullptr ? 0 : scratch_bytes),
      flush_bytes_(std::min(flush_bytes, scratch_bytes_)),
      options_(options) {}

absl::StatusOr<std::unique_ptr<GemmTuner>> GemmTuner::Create(
    const CublasApi& blas, cublasHandle_t blas_handle, cudaStream_t stream,
    void* workspace, size_t workspace_bytes, void* scratch,
    size_t scratch_bytes, size_t flush_bytes, const Options& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(const CublasLtApi* lt, LoadCublasLt());
  std::unique_ptr<GemmTuner> tuner(
      new GemmTuner(blas, *lt, blas_handle, stream, workspace, workspace_bytes,
                    scratch, scratch_bytes, flush_bytes, options));
  cublasLtHandle_t handle = nullptr;
  RETURN_IF_ERROR(CublasStatus(blas, lt->create(&handle), "cublasLtCreate"));
  tuner->lt_handle_ = handle;
  return tuner;
}

GemmTuner::~GemmTuner() {
  plans_.clear();  // their descriptors, before the handle
  if (lt_handle_ != nullptr) (void)lt_.destroy(lt_handle_);
}

absl::StatusOr<std::unique_ptr<GemmTuner::Plan>> GemmTuner::Reuse(
    const GemmShape& shape, const cublasLtMatmulAlgo_t& algo) {
  ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, Describe(shape));
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t status = lt_.algo_check(
      lt_handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, &algo, &result);
  if (status != CUBLAS_STATUS_SUCCESS || result.workspaceSize > workspace_bytes_) {
    return std::unique_ptr<Plan>();
  }
  plan->algo = algo;
  plan->workspace_bytes = result.workspaceSize;
  return plan;
}

cublasStatus_t GemmTuner::RunDefault(const GemmShape& s, const void* a,
                                     const void* b, void* d) const {
  const float alpha = 1.0f, beta = 0.0f;
  return blas_.gemm_ex(blas_handle_, CUBLAS_OP_T, CUBLAS_OP_N, s.m, s.n, s.k,
                       &alpha, a, s.ab_type, s.k, b, s.ab_type, s.k, &beta, d,
                       s.d_type, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t GemmTuner::Run(const Plan& plan, const void* a, const void* b,
                              void* d) const {
  const float alpha = 1.0f, beta = 0.0f;
  return lt_.matmul(lt_handle_, plan.desc, &alpha, a, plan.a, b, plan.b, &beta,
                    d, plan.d, d, plan.d, &plan.algo, workspace_,
                    plan.workspace_bytes, stream_);
}

absl::StatusOr<std::unique_ptr<GemmTuner::Plan>> GemmTuner::Describe(
    const GemmShape& s) const {
  auto plan = std::make_unique<Plan>(lt_);
  RETURN_IF_ERROR(CublasStatus(
      blas_, lt_.desc_create(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  // The attributes are int32 (cublasLt.h).
  const int32_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  RETURN_IF_ERROR(CublasStatus(
      blas_, lt_.desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                    &transpose, sizeof transpose),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  RETURN_IF_ERROR(CublasStatus(
      blas_, lt_.desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                    &keep, sizeof keep),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  RETURN_IF_ERROR(CublasStatus(blas_, lt_.layout_create(&plan->a, s.ab_type, s.k, s.m, s.k),
                               "cublasLtMatrixLayoutCreate(A)"));
  RETURN_IF_ERROR(CublasStatus(blas_, lt_.layout_create(&plan->b, s.ab_type, s.k, s.n, s.k),
                               "cublasLtMatrixLayoutCreate(B)"));
  RETURN_IF_ERROR(CublasStatus(blas_, lt_.layout_create(&plan->d, s.d_type, s.m, s.n, s.m),
                               "cublasLtMatrixLayoutCreate(D)"));
  return plan;
}

absl::StatusOr<const GemmTuner::Plan*> GemmTuner::Choose(const GemmShape& shape,
                                                         const void* a,
                                                         const void* b) {
  if (auto it = plans_.find(shape); it != plans_.end()) return it->second.get();
  GemmShape bucket = shape;
  bucket.n = TokenBucket(shape.n);
  absl::StatusOr<std::unique_ptr<Plan>> plan;
  if (auto it = buckets_.find(bucket); it != buckets_.end()) {
    // Another count of a tuned bucket: its choice, checked for this count.
    plan = it->second ? Reuse(shape, *it->second) : std::unique_ptr<Plan>();
    // A dead context fails everything after it; anything else leaves the
    // count on cublasGemmEx.
    if (!plan.ok() && absl::IsUnavailable(plan.status())) return plan.status();
    if (!plan.ok()) plan = std::unique_ptr<Plan>();
  } else {
    // The candidates write [m, n] of d_type into the scratch.
    const size_t out_bytes = static_cast<size_t>(shape.m) *
                             static_cast<size_t>(shape.n) *
                             (shape.d_type == CUDA_R_32F ? 4 : 2);
    if (out_bytes > scratch_bytes_) return nullptr;
    GemmChoice choice;
    choice.shape = shape;
    plan = Tune(shape, a, b, &choice);
    if (!plan.ok()) {
      if (absl::IsUnavailable(plan.status())) return plan.status();
      // Any other failure leaves the bucket on cublasGemmEx, for good.
      choice.chosen = -1;
      choice.failure = std::string(plan.status().message());
      plan = std::unique_ptr<Plan>();
    }
    buckets_[bucket] = *plan == nullptr ? std::nullopt
                                        : std::make_optional((*plan)->algo);
    choices_.push_back(std::move(choice));
  }
  const Plan* kept = plan->get();
  plans_.emplace(shape, std::move(*plan));
  return kept;
}

absl::StatusOr<std::unique_ptr<GemmTuner::Plan>> GemmTuner::Tune(
    const GemmShape& shape, const void* a, const void* b, GemmChoice* choice) {
  ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, Describe(shape));

  // The heuristic's first algorithms that fit the workspace and the
  // operands' alignments.
  cublasLtMatmulPreference_t preference = nullptr;
  RETURN_IF_ERROR(CublasStatus(blas_, lt_.preference_create(&preference),
                               "cublasLtMatmulPreferenceCreate"));
  const uint64_t max_workspace = workspace_bytes_;
  cublasStatus_t status = lt_.preference_set_attribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
      sizeof max_workspace);
  // The operands' alignments (uint32 attributes; C is D).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, shape.a_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, shape.b_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, shape.d_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, shape.d_alignment}};
  for (const auto& [attribute, bytes] : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = lt_.preference_set_attribute(preference, attribute, &bytes,
                                            sizeof bytes);
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> heuristic(
      static_cast<size_t>(options_.max_candidates));
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = lt_.heuristic(lt_handle_, plan->desc, plan->a, plan->b, plan->d,
                           plan->d, preference, options_.max_candidates,
                           heuristic.data(), &returned);
  }
  (void)lt_.preference_destroy(preference);
  // No algorithm for this shape (NOT_SUPPORTED) leaves cublasGemmEx, untimed.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) returned = 0;
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    RETURN_IF_ERROR(CublasStatus(blas_, status, "cublasLtMatmulAlgoGetHeuristic"));
  }
  std::vector<int> ranks;  // the candidates' ranks in the heuristic's list
  for (int i = 0; i < returned; ++i) {
    if (heuristic[i].state == CUBLAS_STATUS_SUCCESS &&
        heuristic[i].workspaceSize <= workspace_bytes_) {
      ranks.push_back(i);
    }
  }
  if (ranks.empty()) return std::unique_ptr<Plan>();

  // Runner r: 0 is cublasGemmEx, 1 + c candidate c.
  auto run = [&](size_t r) -> cublasStatus_t {
    if (r == 0) return RunDefault(shape, a, b, scratch_);
    const cublasLtMatmulHeuristicResult_t& h = heuristic[static_cast<size_t>(ranks[r - 1])];
    plan->algo = h.algo;
    plan->workspace_bytes = h.workspaceSize;
    return Run(*plan, a, b, scratch_);
  };
  // One untimed run each (the first use of each kernel stays out of the
  // times): cublasGemmEx's failure stops the tuning; a candidate that fails
  // is left out.
  RETURN_IF_ERROR(CublasStatus(blas_, run(0), "cublasGemmEx"));
  std::vector<size_t> runners = {0};
  for (size_t c = 0; c < ranks.size(); ++c) {
    if (run(1 + c) == CUBLAS_STATUS_SUCCESS) runners.push_back(1 + c);
  }
  // The timed runs, each between its own two events after a flush, all
  // events made first so that nothing but launches comes between them.
  const size_t timed_runs = static_cast<size_t>(options_.rounds) * runners.size();
  Events events;
  std::vector<cudaEvent_t> starts(timed_runs), ends(timed_runs);
  for (size_t j = 0; j < timed_runs; ++j) {
    ASSIGN_OR_RETURN(starts[j], events.Add());
    ASSIGN_OR_RETURN(ends[j], events.Add());
  }
  std::vector<bool> failed(1 + ranks.size(), false);
  std::vector<size_t> run_of(timed_runs);
  for (size_t j = 0; j < timed_runs; ++j) {
    const size_t r = runners[j % runners.size()];
    run_of[j] = r;
    if (flush_bytes_ > 0) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemsetAsync(scratch_, static_cast<int>(j & 0xff), flush_bytes_, stream_),
          "cudaMemsetAsync (gemm tuning's flush)"));
    }
    RETURN_IF_ERROR(CudaStatus(cudaEventRecord(starts[j], stream_), "cudaEventRecord"));
    const cublasStatus_t s = run(r);
    if (s != CUBLAS_STATUS_SUCCESS) {
      if (r == 0) RETURN_IF_ERROR(CublasStatus(blas_, s, "cublasGemmEx"));
      failed[r] = true;
    }
    RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ends[j], stream_), "cudaEventRecord"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ends.back()),
                             "cudaEventSynchronize (gemm tuning)"));
  std::vector<std::vector<double>> ms(1 + ranks.size());
  for (size_t j = 0; j < timed_runs; ++j) {
    float elapsed = 0.0f;
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&elapsed, starts[j], ends[j]),
                               "cudaEventElapsedTime"));
    ms[run_of[j]].push_back(elapsed);
  }

  choice->default_ms = Median(ms[0]);
  std::vector<double> candidate_ms(ranks.size(), 0.0);
  for (size_t c = 0; c < ranks.size(); ++c) {
    if (failed[1 + c] || ms[1 + c].empty()) continue;
    candidate_ms[c] = Median(ms[1 + c]);
    ++choice->candidates;
  }
  // The fastest candidate whatever cublasGemmEx took (a default of 0 does
  // not compete).
  const int best = ChooseFastest(0.0, candidate_ms, 0.0);
  if (best >= 0) choice->best_ms = candidate_ms[static_cast<size_t>(best)];
  const int chosen = ChooseFastest(choice->default_ms, candidate_ms, options_.min_gain);
  if (chosen < 0) return std::unique_ptr<Plan>();
  choice->chosen = ranks[static_cast<size_t>(chosen)];
  const cublasLtMatmulHeuristicResult_t& h =
      heuristic[static_cast<size_t>(choice->chosen)];
  plan->algo = h.algo;
  plan->workspace_bytes = h.workspaceSize;
  return plan;
}

}  // namespace cuda
}  // namespace tributary
