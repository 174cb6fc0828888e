#include "tests/engine/scheduler/scheduler_test_util.h"

#include <numeric>
#include <utility>

#include "gtest/gtest.h"

namespace tributary {

SchedulerConfig SmallConfig() {
  SchedulerConfig config;
  config.max_running_sequences = 4;
  config.max_tokens_per_step = 16;
  config.max_waiting = 8;
  config.num_kv_blocks = 16;
  config.kv_block_size = 4;
  config.num_state_slots = 4;
  config.max_sequence_tokens = 64;
  return config;
}

std::unique_ptr<Scheduler> Make(const SchedulerConfig& config) {
  auto scheduler = Scheduler::Create(config);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  return scheduler.ok() ? std::move(*scheduler) : nullptr;
}

std::vector<int32_t> Prompt(int64_t length, int32_t first) {
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  std::iota(prompt.begin(), prompt.end(), first);
  return prompt;
}

SequenceRequest Request(uint64_t id, int64_t prompt_length,
                        int64_t max_new_tokens, int priority) {
  SequenceRequest request;
  request.id = id;
  request.prompt = Prompt(prompt_length, static_cast<int32_t>(100 * id));
  request.max_new_tokens = max_new_tokens;
  request.priority = priority;
  return request;
}

StepPlan MustSchedule(Scheduler& scheduler) {
  auto plan = scheduler.Schedule();
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(scheduler.CheckInvariants().ok()) << scheduler.CheckInvariants();
  return plan.ok() ? std::move(*plan) : StepPlan();
}

StepResult Answer(const StepPlan& plan, int32_t token,
                  const std::set<uint64_t>& finish) {
  StepResult result;
  for (const ScheduledSequence& s : plan.sequences) {
    SequenceOutput out;
    out.id = s.id;
    out.has_token = s.samples_token();
    out.token = token;
    out.finished = finish.count(s.id) > 0;
    if (out.has_token || out.finished) result.outputs.push_back(out);
  }
  return result;
}

void MustUpdate(Scheduler& scheduler, const StepResult& result) {
  const absl::Status status = scheduler.Update(result);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(scheduler.CheckInvariants().ok()) << scheduler.CheckInvariants();
}

std::vector<uint64_t> Ids(const StepPlan& plan) {
  std::vector<uint64_t> ids;
  for (const ScheduledSequence& s : plan.sequences) ids.push_back(s.id);
  return ids;
}

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

SchedulerConfig TinyBlocks(int64_t num_blocks) {
  SchedulerConfig config = SmallConfig();
  config.kv_block_size = 1;
  config.num_kv_blocks = num_blocks;
  config.max_running_sequences = 3;
  config.num_state_slots = 3;
  return config;
}

}  // namespace tributary
