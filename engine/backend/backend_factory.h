// Chooses and creates a Backend by name, so that the engine, the tools and
// the server select CPU or CUDA with one flag and no #ifdef of their own.
#ifndef TRIBUTARY_ENGINE_BACKEND_BACKEND_FACTORY_H_
#define TRIBUTARY_ENGINE_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend/backend.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/backend/cpu/matmul.h"

namespace tributary {

enum class BackendKind { kCpu, kCuda };

// "cpu" or "cuda"; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name);
const char* BackendKindName(BackendKind kind);

struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  int num_threads = 0;  // CPU compute threads; 0 = every online core
  // CpuBackendOptions::matmul_precision: f32 (the reference) or bf16.
  MatMulPrecision cpu_matmul_precision = MatMulPrecision::kF32;
  // CpuBackendOptions::delta_rule_form.
  DeltaRuleForm cpu_delta_rule_form = DeltaRuleForm::kFastest;
  // CpuBackendOptions::step_in_parts.
  bool cpu_step_in_parts = true;
  int cuda_device = 0;  // CUDA device ordinal
  // CUDA activations: bf16 (the design's) or f32 (to separate rounding from
  // bugs when checking the kernels).
  ElementType cuda_activation_type = ElementType::kBF16;
  // CudaBackendOptions::straightforward_kernels, attention_run_keys and
  // delta_rule_workspace_bytes (0: the backend's default).
  bool cuda_straightforward_kernels = false;
  int64_t cuda_attention_run_keys = 0;
  size_t cuda_delta_rule_workspace_bytes = 0;
  // CudaBackendOptions::graphs: decode steps as CUDA graphs.
  bool cuda_graphs = true;
  // CudaBackendOptions::programmatic_launch.
  bool cuda_programmatic_launch = false;
  // CudaBackendOptions::tune_gemms.
  bool cuda_tune_gemms = false;
};

// Whether this build has the CUDA backend (the toolkit was found at build
// time).
bool CudaBackendBuilt();

// The backend `options` names. For CUDA: UNIMPLEMENTED in a build without
// it, FAILED_PRECONDITION when the machine has no device or driver (the
// message says which).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options);

// The number of CUDA devices, 0 (with `why`) in a build without CUDA or on a
// machine without a device or driver. For tests that need a GPU to skip.
int CudaDeviceCount(std::string* why);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_BACKEND_FACTORY_H_
