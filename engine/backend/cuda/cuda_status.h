// CUDA runtime and cuBLAS results as absl::Status. Every call the CUDA
// backend makes goes through one of these, so that no error is dropped.
//
// The code says what the engine can do about it:
//   UNAVAILABLE         a sticky device error (an illegal address, a kernel
//                       fault, ECC): the context is unusable until the
//                       process restarts; the engine fails every request and
//                       exits non-zero so that Kubernetes restarts the pod.
//   RESOURCE_EXHAUSTED  out of device memory.
//   FAILED_PRECONDITION no device or no usable driver.
//   INTERNAL            anything else (a bad launch configuration: a bug).
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_STATUS_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_STATUS_H_

#include "engine/backend/cuda/cublas_api.h"
#include "engine/backend/cuda/cuda_api.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tributary {
namespace cuda {

// True for the errors after which the CUDA context cannot be used again.
bool IsStickyError(cudaError_t error);

// OK for cudaSuccess; else "<what>: <cudaGetErrorName>: <description>" with
// the code above.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// OK for CUBLAS_STATUS_SUCCESS; else "<what>: cuBLAS <name>" (RESOURCE_EXHAUSTED
// for CUBLAS_STATUS_ALLOC_FAILED, UNAVAILABLE for an execution failure that
// left a sticky error, INTERNAL otherwise). `api` names the status.
absl::Status CublasStatus(const CublasApi& api, cublasStatus_t status,
                          absl::string_view what);

// The number of CUDA devices; 0 with `why` set when there is no device or no
// driver (what a machine without a GPU reports), an error otherwise.
int CudaDeviceCount(std::string* why);

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_STATUS_H_
