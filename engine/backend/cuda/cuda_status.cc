#include "engine/backend/cuda/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace cuda {

bool IsStickyError(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(error),
                                           ": ", cudaGetErrorString(error));
  if (IsStickyError(error)) return absl::UnavailableError(message);
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:  // exclusive mode: another process has it
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasStatus(const CublasApi& api, cublasStatus_t status,
                          absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": cuBLAS ", api.status_name(status), ": ",
                   api.status_string(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_EXECUTION_FAILED:
      // Fatal only when the kernel left a sticky error behind; a launch that
      // merely failed to start leaves the context usable.
      if (IsStickyError(cudaPeekAtLastError())) {
        return absl::UnavailableError(message);
      }
      return absl::InternalError(message);
    default:
      return absl::InternalError(message);
  }
}

int CudaDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why != nullptr) {
      *why = absl::StrCat(cudaGetErrorName(error), ": ",
                          cudaGetErrorString(error));
    }
    (void)cudaGetLastError();  // not sticky: clear it for later calls
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "no CUDA device";
  return count;
}

}  // namespace cuda
}  // namespace tributary
