#include "engine/backend/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#if TRIBUTARY_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace tributary {

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("backend \"", name, "\" is not one of cpu, cuda"));
}

const char* BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

bool CudaBackendBuilt() { return TRIBUTARY_HAVE_CUDA != 0; }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options) {
  if (options.kind == BackendKind::kCpu) {
    absl::StatusOr<std::unique_ptr<CpuBackend>> cpu =
        CpuBackend::Create({options.num_threads, options.cpu_matmul_precision,
                            options.cpu_delta_rule_form,
                            options.cpu_step_in_parts});
    if (!cpu.ok()) return cpu.status();
    return std::unique_ptr<Backend>(std::move(*cpu));
  }
#if TRIBUTARY_HAVE_CUDA
  CudaBackendOptions cuda;
  cuda.device = options.cuda_device;
  cuda.activation_type = options.cuda_activation_type;
  cuda.straightforward_kernels = options.cuda_straightforward_kernels;
  cuda.attention_run_keys = options.cuda_attention_run_keys;
  cuda.graphs = options.cuda_graphs;
  cuda.programmatic_launch = options.cuda_programmatic_launch;
  cuda.tune_gemms = options.cuda_tune_gemms;
  if (options.cuda_delta_rule_workspace_bytes > 0) {
    cuda.delta_rule_workspace_bytes = options.cuda_delta_rule_workspace_bytes;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
      CudaBackend::Create(cuda);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
#else
  return absl::UnimplementedError(
      "this build has no CUDA backend (the CUDA toolkit was not found when it "
      "was built)");
#endif
}

int CudaDeviceCount(std::string* why) {
#if TRIBUTARY_HAVE_CUDA
  return CudaBackend::DeviceCount(why);
#else
  if (why != nullptr) *why = "this build has no CUDA backend";
  return 0;
#endif
}

}  // namespace tributary
