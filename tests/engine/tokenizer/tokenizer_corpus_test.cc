// Replays the tokenizer fuzzer's committed seed corpus
// (tests/fuzz/corpus/tokenizer/) through the same property checks
// (tests/fuzz/tokenizer_properties.h) on the Qwen3 tokenizer and the default
// model's, so that inputs the fuzzer once found stay covered in every build,
// without libFuzzer.
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test_data.h"
#include "tests/fuzz/fuzz_corpus.h"
#include "tests/fuzz/tokenizer_properties.h"

namespace tributary {
namespace {

void ReplayCorpus(const Tokenizer& tokenizer) {
  const TokenizerProperties properties(tokenizer);
  const std::vector<std::filesystem::path> files = FuzzCorpusFiles("tokenizer");
  EXPECT_GE(files.size(), 8u) << "the tokenizer corpus looks empty";
  for (const auto& path : files) {
    const std::string bytes = ReadCorpusFile(path);
    EXPECT_EQ(properties.Check(reinterpret_cast<const uint8_t*>(bytes.data()),
                               bytes.size()),
              "")
        << path.filename();
  }
}

TEST(TokenizerCorpusTest, Qwen3KeepsEveryProperty) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  ReplayCorpus(*tokenizer);
}

TEST(TokenizerCorpusTest, DefaultModelKeepsEveryProperty) {
  auto tokenizer =
      Tokenizer::Load(std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ReplayCorpus(**tokenizer);
}

}  // namespace
}  // namespace tributary
