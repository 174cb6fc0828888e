#include "engine/scheduler/state_slot_allocator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

TEST(StateSlotAllocatorTest, AllocatesDistinctSlotsUntilExhausted) {
  StateSlotAllocator pool(2);
  EXPECT_EQ(pool.capacity(), 2);
  auto a = pool.Allocate();
  auto b = pool.Allocate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, 0);
  EXPECT_EQ(*b, 1);
  EXPECT_TRUE(pool.in_use(0));
  EXPECT_EQ(pool.num_free(), 0);
  auto c = pool.Allocate();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("num_state_slots"));
  ASSERT_TRUE(pool.Free(0).ok());
  EXPECT_FALSE(pool.in_use(0));
  auto d = pool.Allocate();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, 0);
}

TEST(StateSlotAllocatorTest, MisuseIsAnErrorNotUndefinedBehaviour) {
  StateSlotAllocator pool(1);
  EXPECT_EQ(pool.Free(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.Free(1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Free(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.Free(5).message(), HasSubstr("state_slot = 5"));
  ASSERT_TRUE(pool.Allocate().ok());
  ASSERT_TRUE(pool.Free(0).ok());
  EXPECT_THAT(pool.Free(0).message(), HasSubstr("double free"));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_FALSE(pool.in_use(-1));
  EXPECT_FALSE(pool.in_use(9));
}

}  // namespace
}  // namespace tributary
