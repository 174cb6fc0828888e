#include "engine/scheduler/block_allocator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tributary {

BlockAllocator::BlockAllocator(int64_t num_blocks) {
  num_blocks =
      std::clamp<int64_t>(num_blocks, 0, std::numeric_limits<int32_t>::max());
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Highest id at the bottom of the stack, so that a fresh pool hands out
  // 0, 1, 2, … in order.
  for (int64_t b = num_blocks - 1; b >= 0; --b) {
    free_.push_back(static_cast<int32_t>(b));
  }
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(
    int64_t num_blocks) {
  if (num_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_blocks = ", num_blocks, " must be >= 0"));
  }
  if (num_blocks > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("num_blocks = ", num_blocks, " requested but only ",
                     num_free(), " of ", capacity(), " KV blocks are free"));
  }
  std::vector<int32_t> blocks;
  blocks.reserve(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) {
    const int32_t block = free_.back();
    free_.pop_back();
    ref_counts_[block] = 1;
    blocks.push_back(block);
  }
  return blocks;
}

absl::Status BlockAllocator::CheckId(int32_t block) const {
  if (block < 0 || block >= capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block = ", block, " is out of range [0, ", capacity(), ")"));
  }
  return absl::OkStatus();
}

absl::Status BlockAllocator::IncRef(int32_t block) {
  if (absl::Status s = CheckId(block); !s.ok()) return s;
  if (ref_counts_[block] == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("block = ", block, " is free; IncRef needs an owner"));
  }
  if (ref_counts_[block] == std::numeric_limits<int32_t>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("block = ", block, " reference count overflow"));
  }
  ++ref_counts_[block];
  return absl::OkStatus();
}

absl::Status BlockAllocator::Free(int32_t block) {
  if (absl::Status s = CheckId(block); !s.ok()) return s;
  if (ref_counts_[block] == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("block = ", block, " is already free (double free)"));
  }
  if (--ref_counts_[block] == 0) free_.push_back(block);
  return absl::OkStatus();
}

int32_t BlockAllocator::ref_count(int32_t block) const {
  if (block < 0 || block >= capacity()) return 0;
  return ref_counts_[block];
}

}  // namespace tributary
