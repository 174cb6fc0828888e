// cuBLASLt, loaded at run time (dlopen) like cuBLAS (cublas_api.h says
// why), for the products whose algorithm the backend chooses itself
// (gemm_tuner.h). cuBLAS itself calls into the same library, so a machine
// with cuBLAS has it.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_LT_API_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_LT_API_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/cuda_api.h"

namespace tributary {
namespace cuda {

// The cuBLASLt functions the backend calls.
struct CublasLtApi {
  cublasStatus_t (*create)(cublasLtHandle_t* handle);
  cublasStatus_t (*destroy)(cublasLtHandle_t handle);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t* desc,
                                cublasComputeType_t compute,
                                cudaDataType_t scale_type);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t desc);
  cublasStatus_t (*desc_set_attribute)(cublasLtMatmulDesc_t desc,
                                       cublasLtMatmulDescAttributes_t attr,
                                       const void* buf, size_t bytes);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t* layout,
                                  cudaDataType_t type, uint64_t rows,
                                  uint64_t cols, int64_t ld);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t layout);
  cublasStatus_t (*preference_create)(cublasLtMatmulPreference_t* pref);
  cublasStatus_t (*preference_destroy)(cublasLtMatmulPreference_t pref);
  cublasStatus_t (*preference_set_attribute)(
      cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
      const void* buf, size_t bytes);
  cublasStatus_t (*heuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                              cublasLtMatmulPreference_t pref, int requested,
                              cublasLtMatmulHeuristicResult_t results[],
                              int* returned);
  cublasStatus_t (*algo_check)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                               cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                               cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                               const cublasLtMatmulAlgo_t* algo,
                               cublasLtMatmulHeuristicResult_t* result);
  cublasStatus_t (*matmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                           const void* alpha, const void* a,
                           cublasLtMatrixLayout_t a_layout, const void* b,
                           cublasLtMatrixLayout_t b_layout, const void* beta,
                           const void* c, cublasLtMatrixLayout_t c_layout,
                           void* d, cublasLtMatrixLayout_t d_layout,
                           const cublasLtMatmulAlgo_t* algo, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream);
};

// The process-wide table, loaded on the first call (thread-safe) and kept
// for the life of the process. FAILED_PRECONDITION naming the library and
// the loader's reason when it cannot be loaded (then later calls retry).
absl::StatusOr<const CublasLtApi*> LoadCublasLt();

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_LT_API_H_
