#include "engine/scheduler/scheduler_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

SchedulerConfig ValidConfig() {
  SchedulerConfig config;
  config.num_kv_blocks = 100;
  config.num_state_slots = 8;
  return config;
}

TEST(SchedulerConfigTest, DefaultsWithPoolsAreValid) {
  EXPECT_TRUE(ValidConfig().Validate().ok());
}

TEST(SchedulerConfigTest, EveryFieldIsCheckedByName) {
  struct Case {
    const char* field;
    void (*set)(SchedulerConfig&);
  };
  const Case cases[] = {
      {"max_running_sequences",
       [](SchedulerConfig& c) { c.max_running_sequences = 0; }},
      {"max_tokens_per_step",
       [](SchedulerConfig& c) { c.max_tokens_per_step = 0; }},
      {"max_waiting", [](SchedulerConfig& c) { c.max_waiting = 0; }},
      {"num_kv_blocks", [](SchedulerConfig& c) { c.num_kv_blocks = 0; }},
      {"num_kv_blocks",
       [](SchedulerConfig& c) { c.num_kv_blocks = int64_t{1} << 31; }},
      {"kv_block_size", [](SchedulerConfig& c) { c.kv_block_size = 0; }},
      {"kv_block_size", [](SchedulerConfig& c) { c.kv_block_size = 4097; }},
      {"num_state_slots", [](SchedulerConfig& c) { c.num_state_slots = 0; }},
      {"num_state_slots",
       [](SchedulerConfig& c) { c.num_state_slots = 65537; }},
      {"max_sequence_tokens",
       [](SchedulerConfig& c) { c.max_sequence_tokens = -5; }},
  };
  for (const Case& c : cases) {
    SchedulerConfig config = ValidConfig();
    c.set(config);
    const absl::Status status = config.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

TEST(DeriveCacheCapacityTest, Model27BSplitsSlotsBeforeBlocks) {
  // 27B in bf16: 64 KiB of KV per token, 16-token blocks = 1 MiB a block;
  // 144 MiB of GDN state per sequence.
  CacheMemoryBudget budget;
  budget.memory_budget_bytes = 40 * kGiB;
  budget.kv_block_bytes = 16 * 64 * 1024;
  budget.state_slot_bytes = 144 * kMiB;
  budget.kv_block_size = 16;
  budget.max_running_sequences = 64;
  budget.max_sequence_tokens = 32768;
  auto capacity = DeriveCacheCapacity(budget);
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  EXPECT_EQ(capacity->num_state_slots, 64);
  // 40 GiB − 64 × 144 MiB = 31 744 MiB of 1 MiB blocks.
  EXPECT_EQ(capacity->num_kv_blocks, 40 * 1024 - 64 * 144);
}

TEST(DeriveCacheCapacityTest, SmallBudgetLimitsSlotsButKeepsOneSequence) {
  CacheMemoryBudget budget;
  budget.memory_budget_bytes = 2 * kGiB;
  budget.kv_block_bytes = kMiB;
  budget.state_slot_bytes = 144 * kMiB;
  budget.kv_block_size = 16;
  budget.max_running_sequences = 64;
  budget.max_sequence_tokens = 16 * 1024;  // 1024 blocks
  auto capacity = DeriveCacheCapacity(budget);
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  // 2048 MiB − 1024 MiB reserved = 1024 MiB → 7 slots of 144 MiB.
  EXPECT_EQ(capacity->num_state_slots, 7);
  EXPECT_EQ(capacity->num_kv_blocks, 2048 - 7 * 144);
  EXPECT_GE(capacity->num_kv_blocks, 1024);
}

TEST(DeriveCacheCapacityTest, BudgetTooSmallNamesTheField) {
  CacheMemoryBudget budget;
  budget.memory_budget_bytes = 100 * kMiB;
  budget.kv_block_bytes = kMiB;
  budget.state_slot_bytes = 144 * kMiB;
  budget.max_sequence_tokens = 16 * 10;
  auto capacity = DeriveCacheCapacity(budget);
  EXPECT_EQ(capacity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(capacity.status().message()),
              HasSubstr("memory_budget_bytes"));

  budget.memory_budget_bytes = 10 * kMiB;
  budget.max_sequence_tokens = 16 * 1000;
  capacity = DeriveCacheCapacity(budget);
  EXPECT_THAT(std::string(capacity.status().message()),
              HasSubstr("max_sequence_tokens"));

  budget.state_slot_bytes = 0;
  EXPECT_THAT(std::string(DeriveCacheCapacity(budget).status().message()),
              HasSubstr("state_slot_bytes"));
  budget.state_slot_bytes = 1;
  budget.kv_block_bytes = -1;
  EXPECT_THAT(std::string(DeriveCacheCapacity(budget).status().message()),
              HasSubstr("kv_block_bytes"));
}

TEST(DeriveCacheCapacityTest, ResultIsAValidSchedulerConfig) {
  CacheMemoryBudget budget;
  budget.memory_budget_bytes = int64_t{1} << 62;  // absurd: capped
  budget.kv_block_bytes = 1;
  budget.state_slot_bytes = 1;
  auto capacity = DeriveCacheCapacity(budget);
  ASSERT_TRUE(capacity.ok()) << capacity.status();
  SchedulerConfig config;
  config.num_kv_blocks = capacity->num_kv_blocks;
  config.num_state_slots = capacity->num_state_slots;
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
}

}  // namespace
}  // namespace tributary
