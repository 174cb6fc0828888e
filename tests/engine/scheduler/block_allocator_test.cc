#include "engine/scheduler/block_allocator.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BlockAllocatorTest, FreshPoolHandsOutLowIdsFirst) {
  BlockAllocator pool(4);
  EXPECT_EQ(pool.capacity(), 4);
  EXPECT_EQ(pool.num_free(), 4);
  auto blocks = pool.Allocate(3);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_THAT(*blocks, ElementsAre(0, 1, 2));
  EXPECT_EQ(pool.num_free(), 1);
  for (int32_t b : *blocks) EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.ref_count(3), 0);
}

TEST(BlockAllocatorTest, AllocateIsAllOrNothing) {
  BlockAllocator pool(3);
  ASSERT_TRUE(pool.Allocate(2).ok());
  auto more = pool.Allocate(2);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(more.status().message(), HasSubstr("num_blocks = 2"));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.Allocate(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto none = pool.Allocate(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(BlockAllocatorTest, FreeReturnsBlocksAndIsReused) {
  BlockAllocator pool(2);
  auto blocks = pool.Allocate(2);
  ASSERT_TRUE(blocks.ok());
  ASSERT_TRUE(pool.Free(1).ok());
  EXPECT_EQ(pool.num_free(), 1);
  auto again = pool.Allocate(1);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(*again, ElementsAre(1));
}

TEST(BlockAllocatorTest, ReferenceCountsKeepSharedBlocksAllocated) {
  BlockAllocator pool(2);
  auto blocks = pool.Allocate(1);
  ASSERT_TRUE(blocks.ok());
  const int32_t b = (*blocks)[0];
  ASSERT_TRUE(pool.IncRef(b).ok());
  EXPECT_EQ(pool.ref_count(b), 2);
  ASSERT_TRUE(pool.Free(b).ok());
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.num_free(), 1);
  ASSERT_TRUE(pool.Free(b).ok());
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockAllocatorTest, MisuseIsAnErrorNotUndefinedBehaviour) {
  BlockAllocator pool(2);
  EXPECT_EQ(pool.Free(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pool.Free(0).message(), HasSubstr("double free"));
  EXPECT_EQ(pool.Free(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Free(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.IncRef(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.IncRef(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.ref_count(-3), 0);
  ASSERT_TRUE(pool.Allocate(1).ok());
  ASSERT_TRUE(pool.Free(0).ok());
  EXPECT_EQ(pool.Free(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockAllocatorTest, EmptyPool) {
  BlockAllocator pool(0);
  EXPECT_EQ(pool.capacity(), 0);
  EXPECT_EQ(pool.Allocate(1).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.Free(0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
