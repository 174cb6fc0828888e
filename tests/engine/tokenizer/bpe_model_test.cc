#include "engine/tokenizer/bpe_model.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/test_data.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<BpeModel> SmallModel(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  return BpeModel::Create({{"a", 0}, {"b", 1}, {"aa", 2}, {"ab", 3}, {"aab", 4}},
                          merges, BpeModel::Options(), "test");
}

TEST(BpeModelTest, MergesByRankLeftmostFirst) {
  auto model = SmallModel({{"a", "a"}, {"a", "b"}, {"aa", "b"}});
  ASSERT_TRUE(model.ok()) << model.status();
  for (auto algorithm : {BpeModel::MergeAlgorithm::kQuadratic,
                         BpeModel::MergeAlgorithm::kHeap}) {
    std::vector<int32_t> ids;
    model->EncodeWord("aaa", &ids, algorithm);
    EXPECT_THAT(ids, ElementsAre(2, 0));  // leftmost pair first
    ids.clear();
    model->EncodeWord("aab", &ids, algorithm);
    EXPECT_THAT(ids, ElementsAre(4));  // aa+b after a+a (rank 0)
    ids.clear();
    model->EncodeWord("xab", &ids, algorithm);  // 'x' not in vocab: dropped
    EXPECT_THAT(ids, ElementsAre(3));
  }
}

TEST(BpeModelTest, MergeWithUnknownTokenIsAnError) {
  auto model = SmallModel({{"a", "a"}, {"a", "c"}});
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("model.merges[1] ('a' 'c'): 'c' is not in model.vocab"));
  auto no_result = SmallModel({{"b", "b"}});
  EXPECT_THAT(std::string(no_result.status().message()),
              HasSubstr("'bb' is not in model.vocab"));
}

TEST(BpeModelTest, DuplicateIdIsAnError) {
  auto model = BpeModel::Create({{"a", 0}, {"b", 0}}, {}, BpeModel::Options(),
                                "test");
  EXPECT_FALSE(model.ok());
}

// The heap merge loop (long words) against the quadratic one (its naive
// twin) on the real Qwen3 merges.
TEST(BpeModelTest, HeapAndQuadraticAgreeOnQwen3) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const BpeModel& model = tokenizer->model();
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {
      "a", "e", "t", "h", "in", "er", " ", "\xE4\xB8\xAD", "\xE6\x96\x87",
      "\xF0\x9F\x98\x80", "0", "\n", "\xC3\xA9", "ing", "the", "!"};
  for (int i = 0; i < 500; ++i) {
    std::string word;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int k = 0; k < n; ++k) word += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> quadratic, heap;
    model.EncodeWord(word, &quadratic, BpeModel::MergeAlgorithm::kQuadratic);
    model.EncodeWord(word, &heap, BpeModel::MergeAlgorithm::kHeap);
    ASSERT_EQ(quadratic, heap) << "word '" << word << "'";
  }
}

}  // namespace
}  // namespace tributary
