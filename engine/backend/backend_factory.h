// Chooses and creates a Backend by name, so that the engine, the tools and
// the server select CPU or CUDA with one flag and no #ifdef of their own.
#ifndef TRIBUTARY_ENGINE_BACKEND_BACKEND_FACTORY_H_
#define TRIBUTARY_ENGINE_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend/backend.h"
#include "engine/backend/backend_options.h"

namespace tributary {

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
