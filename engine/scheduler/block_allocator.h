// The pool of paged-KV blocks (design.md §3): a free list of block ids with a
// reference count per block, so that a block can later be shared by several
// sequences (prefix sharing) and returns to the free list only when its last
// owner frees it.
//
// Misuse (freeing a free block, an id out of range) is an error value, never
// undefined behaviour: a scheduler bug must not corrupt the pool silently.
//
// Thread safety: none (the engine thread owns it). Every operation is O(1)
// except Allocate(n), O(n).
#ifndef TRIBUTARY_ENGINE_SCHEDULER_BLOCK_ALLOCATOR_H_
#define TRIBUTARY_ENGINE_SCHEDULER_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tributary {

class BlockAllocator {
 public:
  // Blocks 0 … num_blocks − 1, all free. num_blocks must be in [0, 2^31)
  // (checked by SchedulerConfig::Validate; clamped to 0 if negative).
  explicit BlockAllocator(int64_t num_blocks);

  // Takes `num_blocks` free blocks, each with reference count 1. All or
  // nothing: RESOURCE_EXHAUSTED (and no change) when fewer are free;
  // INVALID_ARGUMENT for a negative count. Lower ids come first on a fresh
  // pool, which keeps plans easy to read in tests.
  absl::StatusOr<std::vector<int32_t>> Allocate(int64_t num_blocks);

  // Adds an owner to an allocated block (prefix sharing).
  absl::Status IncRef(int32_t block);

  // Drops one owner; the block returns to the free list when none is left.
  // INVALID_ARGUMENT for an id out of range, FAILED_PRECONDITION for a block
  // that is already free (a double free).
  absl::Status Free(int32_t block);

  // 0 for a free block or an id out of range.
  int32_t ref_count(int32_t block) const;

  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity() const { return static_cast<int64_t>(ref_counts_.size()); }

 private:
  absl::Status CheckId(int32_t block) const;

  std::vector<int32_t> ref_counts_;  // [capacity]
  std::vector<int32_t> free_;        // a stack; the back is taken first
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_BLOCK_ALLOCATOR_H_
