// Deterministic tests of admission: the Add() checks, the queue bound, the
// budgets (running sequences, tokens, blocks, slots), chunked prefill,
// decodes first, priority.
#include "engine/scheduler/scheduler.h"

#include <cstdint>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_test_util.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(SchedulerTest, CreateValidatesTheConfig) {
  SchedulerConfig config = SmallConfig();
  config.num_state_slots = 0;
  auto scheduler = Scheduler::Create(config);
  EXPECT_EQ(scheduler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(scheduler.status()), HasSubstr("num_state_slots"));
}

TEST(SchedulerTest, AddErrorsNameTheFieldAndChangeNothing) {
  auto s = Make(SmallConfig());  // 16 blocks of 4 = 64 tokens
  ASSERT_TRUE(s->Add(Request(1, 4)).ok());

  absl::Status status = s->Add(Request(1, 4));
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Message(status), HasSubstr("id = 1"));

  SequenceRequest empty = Request(2, 0);
  status = s->Add(empty);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("prompt"));

  SequenceRequest negative = Request(2, 3);
  negative.prompt[1] = -4;
  status = s->Add(negative);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("prompt[1] = -4"));

  status = s->Add(Request(2, 3, /*max_new_tokens=*/0));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("max_new_tokens = 0"));

  status = s->Add(Request(2, 60, /*max_new_tokens=*/5));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("max_sequence_tokens = 64"));
  EXPECT_THAT(Message(status), HasSubstr("max_new_tokens = 5"));

  status = s->Add(Request(2, 3, /*max_new_tokens=*/INT64_MAX));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("max_sequence_tokens"));

  // Within the context limit but over the whole KV pool.
  SchedulerConfig small_pool = SmallConfig();
  small_pool.num_kv_blocks = 4;  // 16 tokens
  auto t = Make(small_pool);
  status = t->Add(Request(2, 10, /*max_new_tokens=*/7));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("num_kv_blocks = 4"));
  EXPECT_TRUE(t->Add(Request(2, 10, /*max_new_tokens=*/6)).ok());

  EXPECT_EQ(s->num_waiting(), 1);
  EXPECT_EQ(s->num_sequences(), 1);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST(SchedulerTest, WaitingQueueIsBounded) {
  SchedulerConfig config = SmallConfig();
  config.max_waiting = 3;
  auto s = Make(config);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s->Add(Request(id, 2)).ok());
  const absl::Status status = s->Add(Request(4, 2));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(status), HasSubstr("max_waiting = 3"));
  EXPECT_EQ(s->num_waiting(), 3);
  EXPECT_EQ(s->GetState(4).status().code(), absl::StatusCode::kNotFound);
  // Admission makes room.
  MustSchedule(*s);
  EXPECT_EQ(s->num_waiting(), 0);
  EXPECT_TRUE(s->Add(Request(4, 2)).ok());
}

TEST(SchedulerTest, PrefillThenDecodesGrowTheBlockTable) {
  auto s = Make(SmallConfig());  // blocks of 4 tokens
  ASSERT_TRUE(s->Add(Request(1, 5)).ok());
  EXPECT_EQ(*s->GetState(1), SequenceState::kWaiting);

  StepPlan plan = MustSchedule(*s);
  ASSERT_EQ(plan.sequences.size(), 1u);
  ScheduledSequence p = plan.sequences[0];
  EXPECT_EQ(p.num_tokens, 5);
  EXPECT_EQ(p.first_position, 0);
  EXPECT_TRUE(p.reset_state_slot);
  EXPECT_TRUE(p.completes_prefill);
  EXPECT_FALSE(p.is_decode);
  EXPECT_THAT(p.block_table, ElementsAre(0, 1));
  EXPECT_EQ(plan.token_ids, Prompt(5, 100));
  EXPECT_EQ(*s->GetState(1), SequenceState::kRunning);
  EXPECT_EQ(s->num_free_kv_blocks(), 14);
  EXPECT_EQ(s->num_free_state_slots(), 3);
  MustUpdate(*s, Answer(plan, 42));
  EXPECT_THAT(s->FindSequence(1)->tokens,
              ElementsAre(100, 101, 102, 103, 104, 42));

  // Decodes at positions 5, 6, 7 stay in block 1; position 8 needs block 2.
  for (int64_t position = 5; position <= 8; ++position) {
    plan = MustSchedule(*s);
    ASSERT_EQ(plan.sequences.size(), 1u);
    p = plan.sequences[0];
    EXPECT_TRUE(p.is_decode);
    EXPECT_FALSE(p.completes_prefill);
    EXPECT_FALSE(p.reset_state_slot);
    EXPECT_EQ(p.num_tokens, 1);
    EXPECT_EQ(p.first_position, position);
    EXPECT_EQ(static_cast<int64_t>(p.block_table.size()), position / 4 + 1);
    EXPECT_THAT(plan.token_ids,
                ElementsAre(position == 5 ? 42 : 50 + position - 1));
    MustUpdate(*s, Answer(plan, static_cast<int32_t>(50 + position)));
  }
  EXPECT_EQ(s->num_free_kv_blocks(), 13);

  plan = MustSchedule(*s);
  MustUpdate(*s, Answer(plan, 1, /*finish=*/{1}));
  EXPECT_EQ(*s->GetState(1), SequenceState::kFinished);
  EXPECT_EQ(s->num_free_kv_blocks(), 16);
  EXPECT_EQ(s->num_free_state_slots(), 4);
  EXPECT_FALSE(s->has_unfinished());
  // Forgotten at the next Schedule(); the id may then be reused.
  plan = MustSchedule(*s);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(s->GetState(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(s->Add(Request(1, 3)).ok());
}

TEST(SchedulerTest, ChunkedPrefillAcrossSteps) {
  SchedulerConfig config = SmallConfig();
  config.max_tokens_per_step = 6;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 15)).ok());

  const int64_t chunks[] = {6, 6, 3};
  int64_t position = 0;
  for (int i = 0; i < 3; ++i) {
    StepPlan plan = MustSchedule(*s);
    ASSERT_EQ(plan.sequences.size(), 1u);
    const ScheduledSequence& p = plan.sequences[0];
    EXPECT_EQ(p.num_tokens, chunks[i]);
    EXPECT_EQ(p.first_position, position);
    EXPECT_EQ(p.reset_state_slot, i == 0);
    EXPECT_EQ(p.completes_prefill, i == 2);
    EXPECT_EQ(p.samples_token(), i == 2);
    EXPECT_EQ(static_cast<int64_t>(p.block_table.size()),
              (position + chunks[i] + 3) / 4);
    EXPECT_EQ(plan.token_ids,
              Prompt(chunks[i], static_cast<int32_t>(100 + position)));
    if (i < 2) {
      // A chunk that does not complete samples nothing.
      StepResult wrong;
      wrong.outputs.push_back(SequenceOutput::Continues(1, 9));
      EXPECT_EQ(s->Update(wrong).code(), absl::StatusCode::kInvalidArgument);
    }
    MustUpdate(*s, Answer(plan));
    position += chunks[i];
    EXPECT_EQ(s->FindSequence(1)->num_computed_tokens, position);
  }
  // The slot and table persist across chunks.
  EXPECT_EQ(s->FindSequence(1)->block_table.size(), 4u);
  EXPECT_EQ(s->FindSequence(1)->num_generated_tokens(), 1);
}

TEST(SchedulerTest, DecodesComeFirstAndShareTheTokenBudget) {
  SchedulerConfig config = SmallConfig();
  config.max_tokens_per_step = 5;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 2)).ok());
  ASSERT_TRUE(s->Add(Request(2, 2)).ok());
  MustUpdate(*s, Answer(MustSchedule(*s)));  // both prefilled
  ASSERT_TRUE(s->Add(Request(3, 10)).ok());

  StepPlan plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2, 3));
  EXPECT_TRUE(plan.sequences[0].is_decode);
  EXPECT_TRUE(plan.sequences[1].is_decode);
  EXPECT_EQ(plan.sequences[2].num_tokens, 3);  // 5 − 2 decodes
  EXPECT_EQ(plan.num_tokens(), 5);
  MustUpdate(*s, Answer(plan));

  // The continuing prefill comes after the decodes.
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2, 3));
  EXPECT_EQ(plan.sequences[2].first_position, 3);
  EXPECT_EQ(plan.sequences[2].num_tokens, 3);
  MustUpdate(*s, Answer(plan));
}

TEST(SchedulerTest, ContinuingPrefillComesBeforeAdmission) {
  SchedulerConfig config = SmallConfig();
  config.max_tokens_per_step = 4;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 6)).ok());
  StepPlan plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1));
  MustUpdate(*s, Answer(plan));
  ASSERT_TRUE(s->Add(Request(2, 3)).ok());
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2));
  EXPECT_EQ(plan.sequences[0].num_tokens, 2);
  EXPECT_TRUE(plan.sequences[0].completes_prefill);
  EXPECT_EQ(plan.sequences[1].num_tokens, 2);
  EXPECT_FALSE(plan.sequences[1].completes_prefill);
  EXPECT_EQ(plan.token_ids, (std::vector<int32_t>{104, 105, 200, 201}));
}

TEST(SchedulerTest, MaxRunningSequencesLimitsAdmission) {
  SchedulerConfig config = SmallConfig();
  config.max_running_sequences = 2;
  auto s = Make(config);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s->Add(Request(id, 2)).ok());
  StepPlan plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2));
  EXPECT_EQ(s->num_running(), 2);
  EXPECT_EQ(s->num_waiting(), 1);
  EXPECT_EQ(*s->GetState(3), SequenceState::kWaiting);
  MustUpdate(*s, Answer(plan, 7, /*finish=*/{1}));
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(2, 3));
  EXPECT_TRUE(plan.sequences[1].reset_state_slot);
}

TEST(SchedulerTest, StateSlotsLimitAdmission) {
  SchedulerConfig config = SmallConfig();
  config.num_state_slots = 1;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 2)).ok());
  ASSERT_TRUE(s->Add(Request(2, 2)).ok());
  StepPlan plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1));
  EXPECT_EQ(s->num_free_state_slots(), 0);
  EXPECT_DOUBLE_EQ(s->state_slot_usage(), 1.0);
  MustUpdate(*s, Answer(plan, 7, /*finish=*/{1}));
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(2));
  EXPECT_EQ(plan.sequences[0].state_slot, 0);  // the freed slot, reset
  EXPECT_TRUE(plan.sequences[0].reset_state_slot);
}

TEST(SchedulerTest, BlocksAreAllocatedAsTokensAreScheduled) {
  SchedulerConfig config = SmallConfig();
  config.num_kv_blocks = 5;  // 20 tokens
  config.max_tokens_per_step = 64;
  auto s = Make(config);
  // Prompt 6 + max_new 14 = 20 tokens: allowed, but only 2 blocks up front.
  ASSERT_TRUE(s->Add(Request(1, 6, /*max_new_tokens=*/14)).ok());
  ASSERT_TRUE(s->Add(Request(2, 9, /*max_new_tokens=*/3)).ok());
  ASSERT_TRUE(s->Add(Request(3, 4, /*max_new_tokens=*/3)).ok());
  StepPlan plan = MustSchedule(*s);
  // 1 takes 2 blocks, 2 the 3 left; 3 then finds no block and waits.
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2));
  EXPECT_EQ(s->num_free_kv_blocks(), 0);
  EXPECT_DOUBLE_EQ(s->kv_block_usage(), 1.0);
  EXPECT_EQ(*s->GetState(3), SequenceState::kWaiting);
  EXPECT_EQ(s->num_free_state_slots(), 2);
}

TEST(SchedulerTest, AdmissionShrinksTheFirstChunkToTheFreeBlocks) {
  SchedulerConfig config = SmallConfig();
  config.num_kv_blocks = 5;
  config.max_tokens_per_step = 64;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 8, /*max_new_tokens=*/4)).ok());   // 2 blocks
  ASSERT_TRUE(s->Add(Request(2, 14, /*max_new_tokens=*/2)).ok());  // 4 blocks
  StepPlan plan = MustSchedule(*s);
  ASSERT_THAT(Ids(plan), ElementsAre(1, 2));
  EXPECT_EQ(plan.sequences[1].num_tokens, 12);  // 3 free blocks of 4
  EXPECT_FALSE(plan.sequences[1].completes_prefill);
  MustUpdate(*s, Answer(plan, 7, /*finish=*/{1}));
  plan = MustSchedule(*s);
  ASSERT_THAT(Ids(plan), ElementsAre(2));
  EXPECT_EQ(plan.sequences[0].first_position, 12);
  EXPECT_EQ(plan.sequences[0].num_tokens, 2);
  EXPECT_TRUE(plan.sequences[0].completes_prefill);
}

TEST(SchedulerTest, PriorityFirstThenFifo) {
  SchedulerConfig config = SmallConfig();
  config.max_running_sequences = 1;
  auto s = Make(config);
  const int priorities[] = {0, 5, 0, 5, 1};
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(s->Add(Request(id, 2, 8, priorities[id - 1])).ok());
  }
  std::vector<uint64_t> admitted;
  while (s->has_unfinished()) {
    StepPlan plan = MustSchedule(*s);
    ASSERT_EQ(plan.sequences.size(), 1u);
    admitted.push_back(plan.sequences[0].id);
    MustUpdate(*s, Answer(plan, 7, /*finish=*/{plan.sequences[0].id}));
  }
  EXPECT_THAT(admitted, ElementsAre(2, 4, 5, 1, 3));
}

TEST(SchedulerTest, PriorityNeverPreempts) {
  SchedulerConfig config = SmallConfig();
  config.max_running_sequences = 2;
  config.num_kv_blocks = 6;
  auto s = Make(config);
  ASSERT_TRUE(s->Add(Request(1, 4, /*max_new_tokens=*/8)).ok());
  ASSERT_TRUE(s->Add(Request(2, 4, /*max_new_tokens=*/8)).ok());
  MustUpdate(*s, Answer(MustSchedule(*s)));
  ASSERT_TRUE(s->Add(Request(3, 2, 2, /*priority=*/100)).ok());
  for (int step = 0; step < 2; ++step) {
    StepPlan plan = MustSchedule(*s);
    EXPECT_THAT(Ids(plan), ElementsAre(1, 2));
    EXPECT_THAT(plan.preempted_ids, IsEmpty());
    EXPECT_EQ(*s->GetState(3), SequenceState::kWaiting);
    MustUpdate(*s, Answer(plan));
  }
  StepPlan plan = MustSchedule(*s);
  MustUpdate(*s, Answer(plan, 7, /*finish=*/{2}));
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 3));
}

}  // namespace
}  // namespace tributary
