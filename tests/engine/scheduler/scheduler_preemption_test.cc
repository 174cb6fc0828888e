// Deterministic tests of preemption, cancellation, the Update() contract
// and the batch layout.
#include <cstdint>
#include <set>
#include <vector>

#include "engine/scheduler/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_test_util.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(SchedulerTest, PreemptsNewestFirstAndRecomputesAllTokens) {
  auto s = Make(TinyBlocks(6));
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(s->Add(Request(id, 2, /*max_new_tokens=*/4)).ok());
  }
  StepPlan plan = MustSchedule(*s);  // 1, 2, 3 take all 6 blocks
  ASSERT_THAT(Ids(plan), ElementsAre(1, 2, 3));
  EXPECT_EQ(s->num_free_kv_blocks(), 0);
  MustUpdate(*s, Answer(plan, 11));

  // 1 needs a block: 3 (newest) goes; 1 and 2 take its two blocks.
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1, 2));
  EXPECT_THAT(plan.preempted_ids, ElementsAre(3));
  EXPECT_EQ(*s->GetState(3), SequenceState::kPreempted);
  const Sequence* three = s->FindSequence(3);
  EXPECT_EQ(three->num_computed_tokens, 0);
  EXPECT_TRUE(three->block_table.empty());
  EXPECT_EQ(three->state_slot, -1);
  EXPECT_EQ(three->num_preemptions, 1);
  EXPECT_EQ(s->num_free_state_slots(), 1);
  MustUpdate(*s, Answer(plan, 12));

  // 1 needs a block again: 2 is now the newest running.
  plan = MustSchedule(*s);
  EXPECT_THAT(Ids(plan), ElementsAre(1));
  EXPECT_THAT(plan.preempted_ids, ElementsAre(2));
  // No admission in a step that preempted, even with a free slot and block.
  EXPECT_EQ(s->num_running(), 1);
  MustUpdate(*s, Answer(plan, 13, /*finish=*/{1}));
  EXPECT_EQ(s->num_free_kv_blocks(), 6);
  EXPECT_EQ(s->num_free_state_slots(), 3);

  // Waiting: 2 (preempted last, at the front), 3, then 4 (never admitted).
  plan = MustSchedule(*s);
  ASSERT_THAT(Ids(plan), ElementsAre(2, 3));  // 4 + 3 = 6 blocks: full
  // 2 recomputes its prompt and both generated tokens, 3 its prompt and one.
  EXPECT_EQ(plan.sequences[0].num_tokens, 4);
  EXPECT_TRUE(plan.sequences[0].reset_state_slot);
  EXPECT_TRUE(plan.sequences[0].completes_prefill);
  EXPECT_EQ(plan.sequences[1].num_tokens, 2);  // 3 of 3 do not fit: chunked
  EXPECT_EQ(plan.token_ids, (std::vector<int32_t>{200, 201, 11, 12, 300, 301}));
  EXPECT_EQ(*s->GetState(4), SequenceState::kWaiting);
  // The recomputed prefill samples the next token.
  MustUpdate(*s, Answer(plan, 14, /*finish=*/{2}));
  EXPECT_THAT(s->FindSequence(2)->tokens, ElementsAre(200, 201, 11, 12, 14));
}

TEST(SchedulerTest, SequenceAloneAlwaysProgresses) {
  // The biggest request the pool allows, run to max_new_tokens alone.
  auto s = Make(TinyBlocks(6));
  ASSERT_TRUE(s->Add(Request(1, 3, /*max_new_tokens=*/3)).ok());
  int steps = 0;
  while (s->has_unfinished()) {
    StepPlan plan = MustSchedule(*s);
    ASSERT_EQ(plan.sequences.size(), 1u);
    EXPECT_THAT(plan.preempted_ids, IsEmpty());
    const Sequence* seq = s->FindSequence(1);
    const bool last = seq->num_generated_tokens() + 1 == seq->max_new_tokens;
    MustUpdate(*s, Answer(plan, 5,
                          last ? std::set<uint64_t>{1} : std::set<uint64_t>{}));
    ASSERT_LT(++steps, 10);
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(s->num_free_kv_blocks(), 6);
}

TEST(SchedulerTest, CancelWaitingRunningPreemptedAndInFlight) {
  auto s = Make(TinyBlocks(6));
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(s->Add(Request(id, 2, /*max_new_tokens=*/4)).ok());
  }
  ASSERT_TRUE(s->Add(Request(5, 2, /*max_new_tokens=*/2)).ok());
  MustUpdate(*s, Answer(MustSchedule(*s)));  // 1, 2, 3 running
  StepPlan plan = MustSchedule(*s);          // 3 preempted
  ASSERT_THAT(plan.preempted_ids, ElementsAre(3));

  // In flight: 2 is cancelled between Schedule() and Update(); its output
  // is ignored and its blocks are back at once.
  const int64_t free_before = s->num_free_kv_blocks();
  ASSERT_TRUE(s->Cancel(2).ok());
  EXPECT_EQ(*s->GetState(2), SequenceState::kFinished);
  EXPECT_EQ(s->num_free_kv_blocks(), free_before + 3);
  MustUpdate(*s, Answer(plan));
  EXPECT_EQ(s->FindSequence(2)->tokens.size(), 3u);  // no token appended

  ASSERT_TRUE(s->Cancel(3).ok());  // preempted
  ASSERT_TRUE(s->Cancel(4).ok());  // waiting
  EXPECT_EQ(s->num_waiting(), 1);
  ASSERT_TRUE(s->Cancel(1).ok());  // running
  EXPECT_EQ(s->num_running(), 0);
  EXPECT_EQ(s->num_free_kv_blocks(), 6);
  EXPECT_EQ(s->num_free_state_slots(), 3);
  EXPECT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants();

  EXPECT_EQ(s->Cancel(1).code(), absl::StatusCode::kNotFound);  // finished
  EXPECT_EQ(s->Cancel(99).code(), absl::StatusCode::kNotFound);

  plan = MustSchedule(*s);
  EXPECT_THAT(plan.cancelled_ids, ElementsAre(2, 3, 4, 1));
  EXPECT_THAT(Ids(plan), ElementsAre(5));
  MustUpdate(*s, Answer(plan, 7, /*finish=*/{5}));
  plan = MustSchedule(*s);  // reported once only
  EXPECT_THAT(plan.cancelled_ids, IsEmpty());
  EXPECT_EQ(s->num_sequences(), 0);
  EXPECT_EQ(s->GetState(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->num_free_kv_blocks(), 6);
}

TEST(SchedulerTest, UpdateChecksTheResultBeforeChangingAnything) {
  auto s = Make(SmallConfig());
  ASSERT_TRUE(s->Add(Request(1, 3, /*max_new_tokens=*/2)).ok());
  ASSERT_TRUE(s->Add(Request(2, 3, /*max_new_tokens=*/2)).ok());
  EXPECT_EQ(s->Update(StepResult{{{1, true, 5, false}}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(s->Update(StepResult{}).ok());

  StepPlan plan = MustSchedule(*s);
  EXPECT_EQ(s->Schedule().status().code(),
            absl::StatusCode::kFailedPrecondition);
  struct Case {
    StepResult result;
    const char* message;
  };
  const Case cases[] = {
      {StepResult{{{3, true, 5, false}}}, "outputs[0].id = 3"},
      {StepResult{{{1, true, 5, false}, {1, true, 5, false}}},
       "outputs[1].id = 1 is repeated"},
      {StepResult{{{1, true, -2, false}, {2, true, 5, false}}},
       "outputs[0].token = -2"},
      {StepResult{{{1, true, 5, false}}}, "sequence 2 sampled"},
      {StepResult{{{1, true, 5, false}, {2, false, 0, false}}},
       "sequence 2 sampled"},
  };
  for (const Case& c : cases) {
    const absl::Status status = s->Update(c.result);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(Message(status), HasSubstr(c.message));
    EXPECT_EQ(s->FindSequence(1)->num_computed_tokens, 0);
    EXPECT_EQ(s->FindSequence(1)->tokens.size(), 3u);
  }
  // A finish without a token is fine (e.g. the engine failed the request).
  MustUpdate(*s, StepResult{{{1, true, 5, false}, {2, false, 0, true}}});
  plan = MustSchedule(*s);
  // The token that reaches max_new_tokens must finish the sequence.
  const absl::Status status = s->Update(StepResult{{{1, true, 6, false}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("max_new_tokens = 2"));
  MustUpdate(*s, StepResult{{{1, true, 6, true}}});
  EXPECT_FALSE(s->has_unfinished());
}

}  // namespace
}  // namespace tributary
