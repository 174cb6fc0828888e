#include "engine/backend/cuda/cublas_lt_api.h"

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

#if !defined(TRIBUTARY_CUDA_EMULATION)
#include <dlfcn.h>
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

namespace {

#define TRIBUTARY_LT_STRINGIFY_INNER(x) #x
#define TRIBUTARY_LT_STRINGIFY(x) TRIBUTARY_LT_STRINGIFY_INNER(x)
// cuBLASLt ships with cuBLAS and carries its major version.
constexpr const char* kLibrary =
    "libcublasLt.so." TRIBUTARY_LT_STRINGIFY(CUBLAS_VER_MAJOR);

template <typename F>
void Bind(void* library, const char* symbol, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  if (*out == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", symbol);
}

}  // namespace

absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  static std::mutex mu;
  static CublasLtApi api;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return &api;
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load ", kLibrary, " (cuBLASLt, from the CUDA toolkit; is its "
        "folder on the loader's path?): ", why == nullptr ? "" : why));
  }
  std::string missing;
  CublasLtApi table;
  Bind(library, "cublasLtCreate", &table.create, &missing);
  Bind(library, "cublasLtDestroy", &table.destroy, &missing);
  Bind(library, "cublasLtMatmulDescCreate", &table.desc_create, &missing);
  Bind(library, "cublasLtMatmulDescDestroy", &table.desc_destroy, &missing);
  Bind(library, "cublasLtMatmulDescSetAttribute", &table.desc_set_attribute,
       &missing);
  Bind(library, "cublasLtMatrixLayoutCreate", &table.layout_create, &missing);
  Bind(library, "cublasLtMatrixLayoutDestroy", &table.layout_destroy, &missing);
  Bind(library, "cublasLtMatmulPreferenceCreate", &table.preference_create,
       &missing);
  Bind(library, "cublasLtMatmulPreferenceDestroy", &table.preference_destroy,
       &missing);
  Bind(library, "cublasLtMatmulPreferenceSetAttribute",
       &table.preference_set_attribute, &missing);
  Bind(library, "cublasLtMatmulAlgoGetHeuristic", &table.heuristic, &missing);
  Bind(library, "cublasLtMatmulAlgoCheck", &table.algo_check, &missing);
  Bind(library, "cublasLtMatmul", &table.matmul, &missing);
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
