// The options of every backend, in one place that needs neither backend's
// code: the engine, the tools and the server nest them (BackendOptions)
// and pass them down unchanged to CreateBackend, which hands each backend
// its own. A new knob is one field here and the flag that sets it.
#ifndef TRIBUTARY_ENGINE_BACKEND_BACKEND_OPTIONS_H_
#define TRIBUTARY_ENGINE_BACKEND_BACKEND_OPTIONS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend/element_type.h"

namespace tributary {

// What a matmul multiplies.
enum class MatMulPrecision : uint8_t {
  // x as given: f32 products, the reference numerics (design.md §7; ~1e-4 of
  // transformers in float32). The default.
  kF32,
  // x rounded to bf16 (to nearest even: ~2^-9 relative per element, the
  // rounding the CUDA backend's bf16 activations already carry) times bf16
  // weights, exact products summed in f32. For throughput on CPUs with
  // AVX512_BF16. f32 and f16 weights keep kF32.
  kBF16,
};

const char* MatMulPrecisionName(MatMulPrecision precision);  // "f32", "bf16"
// "f32" or "bf16"; INVALID_ARGUMENT otherwise.
absl::StatusOr<MatMulPrecision> ParseMatMulPrecision(absl::string_view name);

// Which form a sequence's delta rule takes (the two agree to rounding: at
// most ~4e-7 of max |out| in bench/cpu/delta_rule_bench).
enum class DeltaRuleForm : uint8_t {
  // The faster one for the sequence's token count and head shape
  // (DeltaRuleTakesRecurrentForm). The default.
  kFastest,
  // As transformers: the recurrent form for one token after cached ones,
  // the chunked form for every other call (any prompt). For tests that keep
  // the chunked form covered on models whose heads would take the other.
  kAsTransformers,
};

// The CPU backend (cpu/cpu_backend.h).
struct CpuBackendOptions {
  // Compute threads, the calling thread included; 0 = every online core.
  int num_threads = 0;
  // What the matmuls multiply (matmul.h). kF32, the default, is the
  // reference numerics; kBF16 rounds each matmul's input to bf16 for up to
  // twice the throughput of compute-bound steps (batched decode, prefill),
  // and needs AVX512_BF16 (Create fails without it rather than run the slow
  // portable path).
  MatMulPrecision matmul_precision = MatMulPrecision::kF32;
  // Which form each sequence's delta rule takes (delta_rule.h): the faster
  // one by default, or transformers' choice (to test the chunked form on
  // models whose small heads would take the recurrent one).
  DeltaRuleForm delta_rule_form = DeltaRuleForm::kFastest;
  // Whether a step of several sequences runs in parts (Backend::StepParts),
  // one per thread, each part's ops on its thread alone: no hand-over or
  // join between ops, and no op left to one thread while the others wait.
  // Each thread then reads every weight, which costs where the weights come
  // from memory rather than a cache they share
  // (bench/journal/step-in-parts.md). The results are the same bits either
  // way.
  bool step_in_parts = true;
  // The fewest tokens a part must have on average for a step to run in
  // parts (weights in the shared cache; from memory, 64). Below it each
  // part reads every weight for too few tokens, and the step in one piece,
  // whose products split the weights between the threads, is faster: on
  // a 2-core AVX-512 VM, 2 threads, decode at 2 and 4 sequences ran 20 % and
  // 8 % faster in one piece (bench/journal/step-in-parts.md). At least 1.
  int64_t min_part_tokens = 4;
  // A step runs in n parts only while its largest part (BatchLayout::
  // PartBegins) holds at most this many times its share of the tokens,
  // else in fewer: a prompt chunk beside a few decodes would leave one
  // thread running the chunk alone while the others wait. At least 1.
  double max_part_imbalance = 1.5;
};

// The CUDA backend (cuda/cuda_backend.h).
struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
  // cuBLAS workspace (cublasSetWorkspace); 32 MiB is what NVIDIA advises for
  // Hopper.
  size_t cublas_workspace_bytes = size_t{32} << 20;
  // The activation (and matrix weight) type: bf16, the design's, or f32 to
  // tell rounding from bugs (the decoder then matches transformers' f32
  // reference as closely as the CPU does).
  ElementType activation_type = ElementType::kBF16;
  // Attention and the delta rule by their straightforward kernels (one warp
  // per query head and token; one warp per state column, recurrent) and
  // every product by cuBLAS, instead of the fast kernels (split and flash
  // attention, the tiled and chunked delta rule, the few-token product):
  // the baseline for side-by-side measurements.
  bool straightforward_kernels = false;
  // The shortest run of keys of the split attention; 0 chooses per call (as
  // many runs as fill the multiprocessors, at least 64 keys each). Either
  // way each token's keys are cut into runs of equal length (SplitRunKeys).
  // Tests set it small to exercise the merge.
  int64_t attention_run_keys = 0;
  // The most bytes of per-chunk intermediates of the chunked delta rule
  // (U, W, P and the decay sums of each 64-token chunk, about 80 KiB per
  // chunk and value head of the 27B). A long prefill runs in passes over
  // its chunks within it; a pass takes at least one chunk of every prefill
  // sequence of the step, which may exceed it. Tests set it small to
  // exercise the passes.
  size_t delta_rule_workspace_bytes = size_t{64} << 20;
  // Graph regions (backend.h) as CUDA graphs: a region's work is recorded,
  // captured into a graph the first time its exact launches are seen, and
  // replayed after that; at most max_graphs are kept (least recently used
  // dropped). Off: regions run as plain launches.
  bool graphs = true;
  int max_graphs = 64;
  // Kernels launched with programmatic dependent launch
  // (programmatic_launch.h): each may be scheduled while the one before it
  // finishes, and waits for it before reading anything. Off by default
  // until a device run has measured it.
  bool programmatic_launch = false;
  // Products that go to cuBLAS (not the few-token kernel) with at most
  // kTuneMaxTokens tokens, batched decode's, run the algorithm measured
  // fastest for their shape on this device (gemm_tuner.h): cuBLASLt's
  // heuristic's first algorithms and cublasGemmEx's default, each new shape
  // timed once, when first met. Off by default until a device run has
  // measured it: a choice made by measurement can differ from one process
  // to the next, and with it a product's rounding.
  bool tune_gemms = false;

  absl::Status Validate() const;
};

enum class BackendKind { kCpu, kCuda };

// "cpu" or "cuda"; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name);
const char* BackendKindName(BackendKind kind);

// Which backend, and the options of each (only the chosen one's are read).
struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  CpuBackendOptions cpu;
  CudaBackendOptions cuda;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_BACKEND_OPTIONS_H_
