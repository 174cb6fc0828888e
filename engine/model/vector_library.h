// Named directions in the residual stream, loaded once from a safetensors
// file (tributary-server --steering-vectors FILE; tributary-direction writes
// such files): every tensor must be one-dimensional with hidden_size
// finite values (f32, bf16 or f16; kept as f32). Requests name them for
// steering and ablation. Immutable after Load; thread-safe.
#ifndef TRIBUTARY_ENGINE_MODEL_VECTOR_LIBRARY_H_
#define TRIBUTARY_ENGINE_MODEL_VECTOR_LIBRARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tributary {

class VectorLibrary {
 public:
  VectorLibrary() = default;
  // Errors name the file and the tensor (a wrong shape, a dtype that is not
  // floating point, a non-finite value).
  static absl::StatusOr<VectorLibrary> Load(const std::string& path,
                                            int64_t hidden_size);

  // Null when there is no vector of that name.
  const std::vector<float>* Find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::vector<float>> vectors_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_VECTOR_LIBRARY_H_
