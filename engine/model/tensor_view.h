// A non-owning view of one tensor's bytes inside a memory-mapped checkpoint.
#ifndef TRIBUTARY_ENGINE_MODEL_TENSOR_VIEW_H_
#define TRIBUTARY_ENGINE_MODEL_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/dtype.h"

namespace tributary {

// Valid while the SafetensorsFile (or TensorStore) that produced it is alive;
// copying a view copies the name and shape, never the data. The data is
// read-only (a private read-only mapping) and row-major. `data` carries no
// alignment guarantee beyond what the file provides: safetensors offsets are
// relative to the end of a header of arbitrary length (writers usually pad
// the header to a multiple of 8). Zero-element tensors have size_bytes 0 and
// a data pointer that must not be dereferenced.
struct TensorView {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t size_bytes = 0;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t extent : shape) n *= extent;
    return n;
  }
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_TENSOR_VIEW_H_
