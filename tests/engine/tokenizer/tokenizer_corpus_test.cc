// Replays the tokenizer fuzzer's committed seed corpus
// (tests/fuzz/corpus/tokenizer/) through the same property checks
// (tests/fuzz/tokenizer_properties.h) on the Qwen3 tokenizer and the default
// model's, so that inputs the fuzzer once found stay covered in every build,
// without libFuzzer.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test_data.h"
#include "tests/fuzz/tokenizer_properties.h"

namespace tributary {
namespace {

std::vector<std::filesystem::path> CorpusFiles() {
  const std::filesystem::path dir =
      std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/fuzz/corpus/tokenizer";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  EXPECT_FALSE(ec) << dir << ": " << ec.message();
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void ReplayCorpus(const Tokenizer& tokenizer) {
  const TokenizerProperties properties(tokenizer);
  const std::vector<std::filesystem::path> files = CorpusFiles();
  EXPECT_GE(files.size(), 8u) << "the tokenizer corpus looks empty";
  for (const auto& path : files) {
    const std::string bytes = ReadAll(path);
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
