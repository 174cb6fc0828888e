#include "engine/backend/cuda/cublas_lt_api.h"

#if !defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/shared_library.h"
#endif

namespace tributary {
namespace cuda {

#if defined(TRIBUTARY_CUDA_EMULATION)

// The emulation's own cuBLASLt (emulation/cuda_emulation.h).
absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  static const CublasLtApi api = {&cublasLtCreate,
                                  &cublasLtDestroy,
                                  &cublasLtMatmulDescCreate,
                                  &cublasLtMatmulDescDestroy,
                                  &cublasLtMatmulDescSetAttribute,
                                  &cublasLtMatrixLayoutCreate,
                                  &cublasLtMatrixLayoutDestroy,
                                  &cublasLtMatmulPreferenceCreate,
                                  &cublasLtMatmulPreferenceDestroy,
                                  &cublasLtMatmulPreferenceSetAttribute,
                                  &cublasLtMatmulAlgoGetHeuristic,
                                  &cublasLtMatmulAlgoCheck,
                                  &cublasLtMatmul};
  return &api;
}

#else

absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  // cuBLASLt ships with cuBLAS and carries its major version.
  return LoadOnce<CublasLtApi>(
      TRIBUTARY_SONAME("libcublasLt", CUBLAS_VER_MAJOR),
      "cuBLASLt, from the CUDA toolkit",
      [](SharedLibrary& library, CublasLtApi& table) {
        library.Bind("cublasLtCreate", &table.create);
        library.Bind("cublasLtDestroy", &table.destroy);
        library.Bind("cublasLtMatmulDescCreate", &table.desc_create);
        library.Bind("cublasLtMatmulDescDestroy", &table.desc_destroy);
        library.Bind("cublasLtMatmulDescSetAttribute", &table.desc_set_attribute);
        library.Bind("cublasLtMatrixLayoutCreate", &table.layout_create);
        library.Bind("cublasLtMatrixLayoutDestroy", &table.layout_destroy);
        library.Bind("cublasLtMatmulPreferenceCreate", &table.preference_create);
        library.Bind("cublasLtMatmulPreferenceDestroy", &table.preference_destroy);
        library.Bind("cublasLtMatmulPreferenceSetAttribute",
                     &table.preference_set_attribute);
        library.Bind("cublasLtMatmulAlgoGetHeuristic", &table.heuristic);
        library.Bind("cublasLtMatmulAlgoCheck", &table.algo_check);
        library.Bind("cublasLtMatmul", &table.matmul);
      });
}

#endif

}  // namespace cuda
}  // namespace tributary
