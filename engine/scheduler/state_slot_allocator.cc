#include "engine/scheduler/state_slot_allocator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tributary {

StateSlotAllocator::StateSlotAllocator(int64_t num_slots) {
  num_slots =
      std::clamp<int64_t>(num_slots, 0, std::numeric_limits<int32_t>::max());
  in_use_.assign(static_cast<size_t>(num_slots), false);
  free_.reserve(static_cast<size_t>(num_slots));
  for (int64_t s = num_slots - 1; s >= 0; --s) {
    free_.push_back(static_cast<int32_t>(s));
  }
}

absl::StatusOr<int32_t> StateSlotAllocator::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "all ", capacity(), " state slots are in use (num_state_slots)"));
  }
  const int32_t slot = free_.back();
  free_.pop_back();
  in_use_[slot] = true;
  return slot;
}

absl::Status StateSlotAllocator::Free(int32_t slot) {
  if (slot < 0 || slot >= capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state_slot = ", slot, " is out of range [0, ", capacity(), ")"));
  }
  if (!in_use_[slot]) {
    return absl::FailedPreconditionError(
        absl::StrCat("state_slot = ", slot, " is already free (double free)"));
  }
  in_use_[slot] = false;
  free_.push_back(slot);
  return absl::OkStatus();
}

bool StateSlotAllocator::in_use(int32_t slot) const {
  return slot >= 0 && slot < capacity() && in_use_[slot];
}

}  // namespace tributary
