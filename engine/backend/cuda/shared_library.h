// A table of a shared library's functions, loaded with dlopen once for the
// life of the process (cuBLAS and cuBLASLt: cublas_api.h says why they are
// not linked). Not in the emulation build, whose tables are its own
// functions.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_SHARED_LIBRARY_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_SHARED_LIBRARY_H_

#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// "<base>.so.<major>", `major` a version macro expanded first:
// TRIBUTARY_SONAME("libcublas", CUBLAS_VER_MAJOR) is "libcublas.so.13" with
// CUDA 13's headers (the ABI the tables assume).
#define TRIBUTARY_SONAME_STRING(x) #x
#define TRIBUTARY_SONAME(base, major) base ".so." TRIBUTARY_SONAME_STRING(major)

namespace tributary {
namespace cuda {

// An opened library whose symbols are being bound.
class SharedLibrary {
 public:
  // FAILED_PRECONDITION "cannot load <name> (<what>; is its folder on the
  // loader's path?): <the loader's reason>".
  static absl::StatusOr<SharedLibrary> Open(const char* name, const char* what);

  // *out = the symbol, or null (remembered as missing).
  template <typename F>
  void Bind(const char* symbol, F* out) {
    *out = reinterpret_cast<F>(Find(symbol));
  }

  // OK when every symbol was found (the library then stays loaded for the
  // life of the process); else FAILED_PRECONDITION "<name> lacks a, b" and
  // the library is closed.
  absl::Status Finish();

 private:
  SharedLibrary(const char* name, void* handle) : name_(name), handle_(handle) {}
  void* Find(const char* symbol);

  const char* name_;
  void* handle_;
  std::string missing_;
};

// The process-wide Table of `name`, filled by bind(library, table) on the
// first call (thread-safe); a failed load is retried by the next call.
template <typename Table, typename BindFn>
absl::StatusOr<const Table*> LoadOnce(const char* name, const char* what,
                                      BindFn bind) {
  static std::mutex mu;
  static Table table;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return &table;
  absl::StatusOr<SharedLibrary> library = SharedLibrary::Open(name, what);
  if (!library.ok()) return library.status();
  Table filled{};
  bind(*library, filled);
  if (absl::Status status = library->Finish(); !status.ok()) return status;
  table = filled;
  loaded = true;
  return &table;
}

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_SHARED_LIBRARY_H_
