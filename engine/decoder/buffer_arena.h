// A grow-only arena of backend buffers reused from step to step.
//
// A step asks for its buffers in the same order every time (the forward's
// code path fixes it), so the n-th buffer of a step reuses the n-th buffer
// of the steps before it when that one is large enough, and is reallocated
// (larger) otherwise. A steady stream of steps of one shape allocates
// nothing, and a buffer keeps its address from step to step, which a
// backend that records graphs relies on (Backend::BeginGraphRegion).
//
// Ownership: the arena owns every buffer it hands out and frees them with
// the backend when it is destroyed; `backend` must outlive it. A Tensor
// from Take() is valid until the next Take() of the same place after a
// Reset() (it may be reallocated then) or the arena's destruction.
//
// Thread safety: one thread at a time.
#ifndef TRIBUTARY_ENGINE_DECODER_BUFFER_ARENA_H_
#define TRIBUTARY_ENGINE_DECODER_BUFFER_ARENA_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/tensor.h"

namespace tributary {

class BufferArena {
 public:
  explicit BufferArena(Backend* backend) : backend_(backend) {}
  ~BufferArena();

  BufferArena(const BufferArena&) = delete;
  BufferArena& operator=(const BufferArena&) = delete;

  // Starts a step: the next Take() gets the first buffer again.
  void Reset() { next_ = 0; }

  // The step's next buffer, viewed as `type` and `shape` (contents
  // undefined: whatever the last step left there).
  absl::StatusOr<Tensor> Take(ElementType type, const Shape& shape);

 private:
  Backend* backend_;
  std::vector<Tensor> buffers_;  // each as allocated: its full size
  size_t next_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_BUFFER_ARENA_H_
