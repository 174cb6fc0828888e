// PenaltyHistory, kept token by token, against a recount of prompt and
// output at every step (what the engine uploaded before it kept one).
#include "engine/runtime/penalty_history.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

namespace tributary {
namespace {

// id → output count, from scratch: the output's ids, and the prompt's (count
// 0 unless in the output) when with_prompt.
std::map<int32_t, int32_t> Recount(const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& output,
                                   bool with_prompt) {
  std::map<int32_t, int32_t> counts;
  if (with_prompt) {
    for (int32_t id : prompt) counts.try_emplace(id, 0);
  }
  for (int32_t id : output) ++counts[id];
  return counts;
}

std::map<int32_t, int32_t> AsMap(const PenaltyHistory& h) {
  std::map<int32_t, int32_t> counts;
  for (const TokenHistoryEntry& e : h.entries()) {
    EXPECT_TRUE(counts.emplace(e.token_id, e.output_count).second)
        << "id " << e.token_id << " twice";
  }
  return counts;
}

TEST(PenaltyHistoryTest, EqualsARecountAfterEveryToken) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, 40);  // small: many repeats
  for (const bool with_prompt : {true, false}) {
    std::vector<int32_t> prompt(60), output(7);
    for (int32_t& t : prompt) t = id(rng);
    for (int32_t& t : output) t = id(rng);  // made after a preemption
    PenaltyHistory history(prompt, output, with_prompt);
    ASSERT_EQ(AsMap(history), Recount(prompt, output, with_prompt));
    for (int step = 0; step < 200; ++step) {
      output.push_back(id(rng));
      history.AddOutput(output.back());
      ASSERT_EQ(AsMap(history), Recount(prompt, output, with_prompt))
          << "with_prompt " << with_prompt << " step " << step;
    }
  }
}

TEST(PenaltyHistoryTest, KeepsFirstAppearanceOrder) {
  PenaltyHistory history({7, 3, 7, 9}, {}, /*with_prompt=*/true);
  history.AddOutput(3);
  history.AddOutput(11);
  std::vector<int32_t> ids;
  for (const TokenHistoryEntry& e : history.entries()) ids.push_back(e.token_id);
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 3, 9, 11}));
  EXPECT_EQ(history.entries()[1].output_count, 1);
  EXPECT_EQ(history.entries()[0].output_count, 0);
}

TEST(PenaltyHistoryTest, EmptyWithoutPromptOrOutput) {
  EXPECT_TRUE(PenaltyHistory({1, 2, 3}, {}, false).entries().empty());
}

}  // namespace
}  // namespace tributary
