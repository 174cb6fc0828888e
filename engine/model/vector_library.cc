#include "engine/model/vector_library.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/backend/element_type.h"
#include "base/status_macros.h"
#include "engine/model/safetensors_file.h"

namespace tributary {

absl::StatusOr<VectorLibrary> VectorLibrary::Load(const std::string& path,
                                                  int64_t hidden_size) {
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  VectorLibrary library;
  for (const TensorView& t : file.tensors()) {
    ElementType type;
    switch (t.dtype) {
      case DType::kF32:
        type = ElementType::kF32;
        break;
      case DType::kBF16:
        type = ElementType::kBF16;
        break;
      case DType::kF16:
        type = ElementType::kF16;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor ", t.name, " is not f32, bf16 or f16"));
    }
    if (t.shape.size() != 1 || t.shape[0] != hidden_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor ", t.name, " must have shape [",
                       hidden_size, "] (the model's hidden size)"));
    }
    std::vector<float> v(static_cast<size_t>(hidden_size));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = LoadAsF32(t.data, type, i);
      if (!std::isfinite(v[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor ", t.name, " has a non-finite value at ", i));
      }
    }
    library.vectors_[t.name] = std::move(v);
  }
  if (library.vectors_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no tensors"));
  }
  return library;
}

const std::vector<float>* VectorLibrary::Find(const std::string& name) const {
  auto it = vectors_.find(name);
  return it == vectors_.end() ? nullptr : &it->second;
}

std::vector<std::string> VectorLibrary::names() const {
  std::vector<std::string> out;
  for (const auto& [name, v] : vectors_) out.push_back(name);
  return out;
}

}  // namespace tributary
