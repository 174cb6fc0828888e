// A view of a tensor in memory that a Backend owns (device memory for CUDA,
// host memory for the CPU) or aliases (an mmap'd checkpoint on the CPU).
// Row-major, rank 1 to 4. Copying a Tensor copies the view, never the data;
// who frees the memory is stated where the tensor is made (Backend).
#ifndef TRIBUTARY_ENGINE_BACKEND_TENSOR_H_
#define TRIBUTARY_ENGINE_BACKEND_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backend/element_type.h"

namespace tributary {

struct Shape {
  std::array<int64_t, 4> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> extents) {
    for (int64_t e : extents) {
      if (rank < 4) dims[rank++] = e;
    }
  }
  int64_t num_elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t operator[](int i) const { return dims[i]; }
  bool operator==(const Shape& other) const {
    if (rank != other.rank) return false;
    for (int i = 0; i < rank; ++i) {
      if (dims[i] != other.dims[i]) return false;
    }
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string ToString() const {
    return absl::StrCat("[", absl::StrJoin(dims.begin(), dims.begin() + rank, ", "),
                        "]");
  }
};

struct Tensor {
  void* data = nullptr;
  ElementType type = ElementType::kF32;
  Shape shape;

  int64_t num_elements() const { return shape.num_elements(); }
  size_t size_bytes() const {
    return static_cast<size_t>(num_elements()) * ElementTypeSizeBytes(type);
  }
  // The number of rows when seen as a matrix [rows, last dimension].
  int64_t rows() const {
    return shape.rank == 0 ? 0 : num_elements() / shape[shape.rank - 1];
  }
  int64_t cols() const { return shape.rank == 0 ? 0 : shape[shape.rank - 1]; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// A view of the same memory with another shape (the same element count).
inline Tensor AsShape(const Tensor& t, const Shape& shape) {
  Tensor v = t;
  v.shape = shape;
  return v;
}

// Rows [begin, begin + count) of the outermost dimension, as a view.
inline Tensor RowsOf(const Tensor& t, int64_t begin, int64_t count) {
  Tensor v = t;
  const size_t row_bytes =
      t.shape[0] == 0 ? 0 : t.size_bytes() / static_cast<size_t>(t.shape[0]);
  v.data = static_cast<char*>(t.data) + static_cast<size_t>(begin) * row_bytes;
  v.shape.dims[0] = count;
  return v;
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_TENSOR_H_
