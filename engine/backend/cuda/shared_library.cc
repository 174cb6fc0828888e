#include "engine/backend/cuda/shared_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace cuda {

absl::StatusOr<SharedLibrary> SharedLibrary::Open(const char* name,
                                                  const char* what) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load ", name, " (", what,
        "; is its folder on the loader's path?): ", why == nullptr ? "" : why));
  }
  return SharedLibrary(name, handle);
}

void* SharedLibrary::Find(const char* symbol) {
  void* found = dlsym(handle_, symbol);
  if (found == nullptr) {
    absl::StrAppend(&missing_, missing_.empty() ? "" : ", ", symbol);
  }
  return found;
}

absl::Status SharedLibrary::Finish() {
  if (missing_.empty()) return absl::OkStatus();
  dlclose(handle_);
  return absl::FailedPreconditionError(absl::StrCat(name_, " lacks ", missing_));
}

}  // namespace cuda
}  // namespace tributary
