#include "engine/backend/cuda/cublas_api.h"

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

#if !defined(TRIBUTARY_CUDA_EMULATION)
#include <dlfcn.h>
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

namespace {

#define TRIBUTARY_STRINGIFY_INNER(x) #x
#define TRIBUTARY_STRINGIFY(x) TRIBUTARY_STRINGIFY_INNER(x)
// The major version the headers are from: the ABI the table assumes.
constexpr const char* kLibrary = "libcublas.so." TRIBUTARY_STRINGIFY(CUBLAS_VER_MAJOR);

template <typename F>
bool Bind(void* library, const char* symbol, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  if (*out == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", symbol);
  return *out != nullptr;
}

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  static std::mutex mu;
  static CublasApi api;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return &api;
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load ", kLibrary, " (cuBLAS, from the CUDA toolkit; is its "
        "folder on the loader's path?): ", why == nullptr ? "" : why));
  }
  std::string missing;
  CublasApi table;
  // The exported names: cublas_v2.h maps the API's names onto these.
  Bind(library, "cublasCreate_v2", &table.create, &missing);
  Bind(library, "cublasDestroy_v2", &table.destroy, &missing);
  Bind(library, "cublasSetStream_v2", &table.set_stream, &missing);
  Bind(library, "cublasSetWorkspace_v2", &table.set_workspace, &missing);
  Bind(library, "cublasGemmEx", &table.gemm_ex, &missing);
  Bind(library, "cublasGetStatusName", &table.status_name, &missing);
  Bind(library, "cublasGetStatusString", &table.status_string, &missing);
  if (!missing.empty()) {
    dlclose(library);
    return absl::FailedPreconditionError(
        absl::StrCat(kLibrary, " lacks ", missing));
  }
  api = table;
  loaded = true;  // the library stays loaded for the life of the process
  return &api;
}

#endif

}  // namespace cuda
}  // namespace tributary
