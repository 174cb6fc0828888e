#include "engine/backend/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#if TRIBUTARY_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace tributary {

bool CudaBackendBuilt() { return TRIBUTARY_HAVE_CUDA != 0; }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options) {
  if (options.kind == BackendKind::kCpu) {
    absl::StatusOr<std::unique_ptr<CpuBackend>> cpu =
        CpuBackend::Create(options.cpu);
    if (!cpu.ok()) return cpu.status();
    return std::unique_ptr<Backend>(std::move(*cpu));
  }
#if TRIBUTARY_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
      CudaBackend::Create(options.cuda);
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
