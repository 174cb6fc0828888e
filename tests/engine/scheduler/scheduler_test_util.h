// Helpers shared by the scheduler tests: small configs, requests with
// recognisable token ids, and a fake engine answer for a plan.
#ifndef TRIBUTARY_TESTS_ENGINE_SCHEDULER_SCHEDULER_TEST_UTIL_H_
#define TRIBUTARY_TESTS_ENGINE_SCHEDULER_SCHEDULER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler/scheduler.h"

namespace tributary {

// 16 blocks of 4 tokens, 4 slots, 4 running, a budget of 16 tokens, a context
// of 64 tokens.
SchedulerConfig SmallConfig();
// Blocks of 1 token (the arithmetic is plain), 3 slots, 3 running.
SchedulerConfig TinyBlocks(int64_t num_blocks);
std::unique_ptr<Scheduler> Make(const SchedulerConfig& config);
// Token ids first, first + 1, …: recognisable in plans.
std::vector<int32_t> Prompt(int64_t length, int32_t first = 100);
// The prompt of request `id` starts at token 100 · id.
SequenceRequest Request(uint64_t id, int64_t prompt_length,
                        int64_t max_new_tokens = 8, int priority = 0);
// Schedule() that must succeed, with the invariants checked.
StepPlan MustSchedule(Scheduler& scheduler);
// Every sequence that samples gets `token`; those in `finish` finish.
StepResult Answer(const StepPlan& plan, int32_t token = 7,
                  const std::set<uint64_t>& finish = {});
// Update() that must succeed, with the invariants checked.
void MustUpdate(Scheduler& scheduler, const StepResult& result);
std::vector<uint64_t> Ids(const StepPlan& plan);
std::string Message(const absl::Status& status);

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_SCHEDULER_SCHEDULER_TEST_UTIL_H_
