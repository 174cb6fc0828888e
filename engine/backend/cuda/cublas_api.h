// cuBLAS, loaded at run time (dlopen) when a CUDA backend is created rather
// than linked. Linked, libcublasLt's ~94 KB of thread-local storage would be
// reserved on the stack of every thread the process creates, and civetweb's
// worker threads (prometheus-cpp's exposer) get 100 KB stacks: they could
// not start, and /metrics would be gone from every binary that merely could
// use a GPU. Loaded with dlopen, the TLS is allocated per thread on first
// use instead, and a machine without cuBLAS still runs the CPU backend.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_API_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_API_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/cuda_api.h"

namespace tributary {
namespace cuda {

// The cuBLAS functions the backend calls.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t* handle);
  cublasStatus_t (*destroy)(cublasHandle_t handle);
  cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
  cublasStatus_t (*set_workspace)(cublasHandle_t handle, void* workspace,
                                  size_t bytes);
  cublasStatus_t (*gemm_ex)(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* a,
                            cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta,
                            void* c, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
  const char* (*status_name)(cublasStatus_t status);
  const char* (*status_string)(cublasStatus_t status);
};

// The process-wide table, loaded on the first call (thread-safe) and kept
// for the life of the process. FAILED_PRECONDITION naming the library and
// the loader's reason when it cannot be loaded (then later calls retry).
absl::StatusOr<const CublasApi*> LoadCublas();

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUBLAS_API_H_
