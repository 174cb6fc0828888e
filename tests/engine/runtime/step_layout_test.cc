// The plan-to-layout join of the engine (step_layout.h).
#include "engine/runtime/step_layout.h"

#include <vector>

#include "gtest/gtest.h"

namespace tributary {
namespace {

ScheduledSequence Scheduled(uint64_t id, int64_t num_tokens,
                            int64_t first_position, int32_t slot,
                            std::vector<int32_t> blocks) {
  ScheduledSequence s;
  s.id = id;
  s.num_tokens = num_tokens;
  s.first_position = first_position;
  s.state_slot = slot;
  s.block_table = std::move(blocks);
  return s;
}

TEST(StepLayoutTest, RowsAreTheSequencesBackToBackAndTheBlockTablesMove) {
  StepPlan plan;
  // Two decodes and a new prompt of 5, as Schedule() orders them.
  plan.sequences.push_back(Scheduled(1, 1, 3, 2, {4}));
  plan.sequences.push_back(Scheduled(2, 1, 6, 0, {0, 7}));
  plan.sequences.push_back(Scheduled(3, 5, 0, 1, {5, 6}));
  plan.token_ids = {7, 7, 300, 301, 302, 303, 304};
  const std::vector<std::vector<int32_t>> tables = {{4}, {0, 7}, {5, 6}};

  const BatchLayout layout = TakeBatchLayout(&plan);
  ASSERT_EQ(layout.sequences.size(), 3u);
  EXPECT_EQ(layout.num_tokens(), plan.num_tokens());
  const int64_t offsets[] = {0, 1, 2};
  for (size_t i = 0; i < 3; ++i) {
    const SequenceSlice& slice = layout.sequences[i];
    const ScheduledSequence& entry = plan.sequences[i];
    EXPECT_EQ(slice.token_offset, offsets[i]);
    EXPECT_EQ(slice.num_tokens, entry.num_tokens);
    EXPECT_EQ(slice.first_position, entry.first_position);
    EXPECT_EQ(slice.state_slot, entry.state_slot);
    EXPECT_EQ(slice.block_table, tables[i]);
    EXPECT_TRUE(entry.block_table.empty());  // moved, not copied
  }
  // The token ids stay with the plan (Forward reads them from there).
  EXPECT_EQ(plan.token_ids.size(), 7u);
}

}  // namespace
}  // namespace tributary
