#include "engine/backend/cuda/cublas_api.h"

#if !defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/shared_library.h"
#endif

namespace tributary {
namespace cuda {

#if defined(TRIBUTARY_CUDA_EMULATION)

// The emulation's own cuBLAS (emulation/cuda_emulation.h), nothing to load.
absl::StatusOr<const CublasApi*> LoadCublas() {
  static const CublasApi api = {&cublasCreate,        &cublasDestroy,
                                &cublasSetStream,     &cublasSetWorkspace,
                                &cublasGemmEx,        &cublasGetStatusName,
                                &cublasGetStatusString};
  return &api;
}

#else

absl::StatusOr<const CublasApi*> LoadCublas() {
  return LoadOnce<CublasApi>(
      TRIBUTARY_SONAME("libcublas", CUBLAS_VER_MAJOR),
      "cuBLAS, from the CUDA toolkit",
      [](SharedLibrary& library, CublasApi& table) {
        // The exported names: cublas_v2.h maps the API's names onto these.
        library.Bind("cublasCreate_v2", &table.create);
        library.Bind("cublasDestroy_v2", &table.destroy);
        library.Bind("cublasSetStream_v2", &table.set_stream);
        library.Bind("cublasSetWorkspace_v2", &table.set_workspace);
        library.Bind("cublasGemmEx", &table.gemm_ex);
        library.Bind("cublasGetStatusName", &table.status_name);
        library.Bind("cublasGetStatusString", &table.status_string);
      });
}

#endif

}  // namespace cuda
}  // namespace tributary
