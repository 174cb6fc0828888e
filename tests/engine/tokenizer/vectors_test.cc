// Exact agreement with the Hugging Face tokenizer on stored vectors.
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/test_data.h"

namespace tributary {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void ExpectVectors(const Tokenizer& tokenizer, const std::vector<Vector>& vectors,
                   const std::string& name) {
  int failures = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const Vector& v = vectors[i];
    auto ids = tokenizer.Encode(v.text);
    ASSERT_TRUE(ids.ok()) << name << "[" << i << "]: " << ids.status();
    if (*ids != v.ids && ++failures <= 10) {
      ADD_FAILURE() << name << "[" << i << "] text '" << v.text << "'\n got  "
                    << absl::StrJoin(*ids, " ") << "\n want "
                    << absl::StrJoin(v.ids, " ");
    }
    if (v.has_decoded) {
      auto text = tokenizer.Decode(v.ids);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(*text, v.decoded) << name << "[" << i << "]";
    }
  }
  EXPECT_EQ(failures, 0) << name;
}

TEST(VectorsTest, LlamaCppQwen2VectorsMatchExactly) {
  const std::string inp = Qwen3Dir() + "/vectors-llamacpp-qwen2.inp";
  const std::string out = Qwen3Dir() + "/vectors-llamacpp-qwen2.out";
  ASSERT_TRUE(FileExists(inp) && FileExists(out))
      << "missing " << inp << " or " << out
      << ": the shared data folder ../shared must sit next to the project";
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::vector<std::string> texts =
      absl::StrSplit(ReadAll(inp), "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(texts.empty());
  texts.pop_back();  // the file ends with the marker
  std::vector<std::string> lines = absl::StrSplit(ReadAll(out), '\n');
  ASSERT_GE(lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> want;
    for (absl::string_view field : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      int32_t id;
      ASSERT_TRUE(absl::SimpleAtoi(field, &id)) << lines[i];
      want.push_back(id);
    }
    auto ids = tokenizer->Encode(texts[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, want) << "vector " << i << ": '" << texts[i] << "'";
  }
  EXPECT_GE(texts.size(), 30u);
}

TEST(VectorsTest, Qwen3VectorsFromHfTokenizersMatchExactly) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  auto vectors = ReadVectors(TestDataDir() + "/qwen3_vectors.jsonl");
  EXPECT_GE(vectors.size(), 300u);
  ExpectVectors(*tokenizer, vectors, "qwen3_vectors");
}

TEST(VectorsTest, TinyQwen35RegexTokenizerMatchesHf) {
  const Tokenizer* tokenizer = TinyQwen35Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_STREQ(tokenizer->pre_tokenizer().name(), "qwen35-scanner");
  auto vectors = ReadVectors(TestDataDir() + "/qwen35_tiny_vectors.jsonl");
  EXPECT_GE(vectors.size(), 300u);
  ExpectVectors(*tokenizer, vectors, "qwen35_tiny_vectors");
}

// The embedded default model's tokenizer and its vectors (made by the
// model's training tools).
TEST(VectorsTest, TinyShakespeareModelVectorsMatch) {
  const std::string root = TRIBUTARY_SOURCE_DIR;
  const std::string model = root + "/models/tiny-shakespeare/tokenizer.json";
  const std::string vectors_path =
      root + "/tests/fixtures/tokenizer/tiny-shakespeare-vectors.jsonl";
  ASSERT_TRUE(FileExists(model))
      << "missing " << model << " (the embedded default model's tokenizer)";
  ASSERT_TRUE(FileExists(vectors_path)) << "missing " << vectors_path;
  auto tokenizer = Tokenizer::Load(model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto vectors = ReadVectors(vectors_path);
  EXPECT_FALSE(vectors.empty());
  ExpectVectors(**tokenizer, vectors, "tiny-shakespeare-vectors");
}

}  // namespace
}  // namespace tributary
