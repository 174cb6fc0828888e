// The pool of GDN state slots (design.md §3): one slot per sequence that
// holds recurrent state (conv window and delta-rule state of every linear
// attention layer). A slot is never shared, so there is no reference count.
//
// Misuse (freeing a free slot, an id out of range) is an error value, never
// undefined behaviour.
//
// Thread safety: none (the engine thread owns it). Every operation is O(1).
#ifndef TRIBUTARY_ENGINE_SCHEDULER_STATE_SLOT_ALLOCATOR_H_
#define TRIBUTARY_ENGINE_SCHEDULER_STATE_SLOT_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tributary {

class StateSlotAllocator {
 public:
  // Slots 0 … num_slots − 1, all free (clamped to [0, 2^31)).
  explicit StateSlotAllocator(int64_t num_slots);

  // A free slot (the lowest on a fresh pool); RESOURCE_EXHAUSTED when none.
  absl::StatusOr<int32_t> Allocate();

  // INVALID_ARGUMENT for an id out of range, FAILED_PRECONDITION for a slot
  // that is already free (a double free).
  absl::Status Free(int32_t slot);

  bool in_use(int32_t slot) const;
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity() const { return static_cast<int64_t>(in_use_.size()); }

 private:
  std::vector<bool> in_use_;   // [capacity]
  std::vector<int32_t> free_;  // a stack; the back is taken first
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_STATE_SLOT_ALLOCATOR_H_
