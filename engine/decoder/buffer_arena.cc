#include "engine/decoder/buffer_arena.h"

#include "base/status_macros.h"

namespace tributary {

BufferArena::~BufferArena() {
  for (Tensor& t : buffers_) backend_->Free(t);
}

absl::StatusOr<Tensor> BufferArena::Take(ElementType type, const Shape& shape) {
  Tensor wanted;
  wanted.type = type;
  wanted.shape = shape;
  if (next_ == buffers_.size()) buffers_.emplace_back();
  Tensor& buffer = buffers_[next_++];
  if (buffer.data == nullptr || buffer.size_bytes() < wanted.size_bytes()) {
    // Free() of a never-allocated (null) tensor is a no-op on every backend.
    backend_->Free(buffer);
    buffer = Tensor{};  // empty, not dangling, if the allocation fails
    ASSIGN_OR_RETURN(buffer, backend_->Allocate(type, shape));
  }
  wanted.data = buffer.data;
  return wanted;
}

}  // namespace tributary
