// Malformed and unsupported tokenizer.json files give errors that name the
// file and the field.
#include "engine/tokenizer/tokenizer_json.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_replace.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

// A minimal valid byte-level BPE tokenizer.json; tests replace one part.
constexpr char kValid[] = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 5, "content": "<|end|>", "special": true}],
  "normalizer": NORMALIZER,
  "pre_tokenizer": PRE,
  "post_processor": null,
  "decoder": {"type": "ByteLevel"},
  "model": MODEL
})";
constexpr char kNormalizer[] = R"({"type": "NFC"})";
constexpr char kPre[] = R"({"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": " ?\\S+|\\s+"}, "behavior": "Isolated",
     "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
constexpr char kModel[] = R"({"type": "BPE", "dropout": null,
    "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
    "merges": ["a b", ["Ġ", "ab"]]})";

std::string Json(const char* normalizer = kNormalizer, const char* pre = kPre,
                 const char* model = kModel) {
  return absl::StrReplaceAll(
      kValid, {{"NORMALIZER", normalizer}, {"PRE", pre}, {"MODEL", model}});
}

absl::Status Parse(const std::string& text) {
  auto spec = ParseTokenizerJson(text, "t.json");
  if (!spec.ok()) return spec.status();
  return Tokenizer::Create(*std::move(spec)).status();
}

TEST(TokenizerJsonTest, MinimalFileWorks) {
  auto spec = ParseTokenizerJson(Json(), "t.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tokenizer = Tokenizer::Create(*std::move(spec));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = (*tokenizer)->Encode("ab ab<|end|>");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 4, 5}));
  EXPECT_STREQ((*tokenizer)->pre_tokenizer().name(), "pcre2");
}

TEST(TokenizerJsonTest, Errors) {
  struct Bad {
    std::string json;
    const char* expected;
  };
  const std::vector<Bad> cases = {
      {"this is not json", "t.json: not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {absl::StrReplaceAll(Json(), {{"\"model\"", "\"modelx\""}}), "model"},
      {Json(kNormalizer, R"({"type": "Whitespace"})"),
       "unsupported pre_tokenizer: type 'Whitespace'"},
      {Json(R"({"type": "NFKC"})"), "unsupported normalizer: type 'NFKC'"},
      {Json(kNormalizer, R"({"type": "ByteLevel", "add_prefix_space": true})"),
       "add_prefix_space=true"},
      {Json(kNormalizer, kPre,
            R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]})"),
       "model.merges[0] ('a' 'z'): 'z' is not in model.vocab"},
      {Json(kNormalizer, kPre,
            R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]})"),
       "model.merges[0]"},
      {Json(kNormalizer, kPre, R"({"type": "Unigram", "vocab": []})"),
       "unsupported model.type: 'Unigram'"},
      {Json(kNormalizer, kPre,
            R"({"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1})"),
       "model.dropout"},
      {Json(kNormalizer,
            R"({"type": "Sequence", "pretokenizers": [{"type": "Split",
               "pattern": {"Regex": "(bad"}, "behavior": "Isolated"},
               {"type": "ByteLevel", "use_regex": false}]})"),
       "does not compile"},
      {Json(kNormalizer,
            R"({"type": "Sequence", "pretokenizers": [{"type": "Split",
               "pattern": {"Regex": "x"}, "behavior": "Removed"},
               {"type": "ByteLevel", "use_regex": false}]})"),
       "behavior"},
      {absl::StrReplaceAll(Json(), {{R"("decoder": {"type": "ByteLevel"})",
                                     R"("decoder": {"type": "WordPiece"})"}}),
       "unsupported decoder"},
      {absl::StrReplaceAll(Json(), {{R"("truncation": null)",
                                     R"("truncation": {"max_length": 5})"}}),
       "unsupported truncation"},
  };
  for (const Bad& bad : cases) {
    absl::Status status = Parse(bad.json);
    EXPECT_FALSE(status.ok()) << bad.expected;
    EXPECT_THAT(std::string(status.message()), HasSubstr(bad.expected));
    EXPECT_THAT(std::string(status.message()), HasSubstr("t.json"));
  }
}

TEST(TokenizerJsonTest, LoadErrorsNameThePath) {
  auto missing = Tokenizer::Load("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/dir/tokenizer.json"));
  auto empty_dir = Tokenizer::Load("/");
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_THAT(std::string(empty_dir.status().message()),
              HasSubstr("no tokenizer.json"));
  const std::string path = ::testing::TempDir() + "/garbage-tokenizer.json";
  { std::ofstream(path) << "\x01\x02garbage{"; }
  auto garbage = Tokenizer::Load(path);
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(std::string(garbage.status().message()), HasSubstr(path));
  std::remove(path.c_str());
}

TEST(TokenizerJsonTest, ConfigFields) {
  auto spec = ParseTokenizerJson(Json(), "t.json");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ParseTokenizerConfig(
                  R"({"eos_token": {"content": "<|end|>"}, "pad_token": "a",
                      "chat_template": [{"name": "default", "template": "T"}]})",
                  "c.json", &*spec)
                  .ok());
  EXPECT_EQ(spec->chat_template, "T");
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->eos_token_id(), 5);
  EXPECT_EQ((*tokenizer)->pad_token_id(), 0);
  spec->eos_token = "<|nope|>";
  auto bad = Tokenizer::Create(*spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("<|nope|>"));
  EXPECT_FALSE(ParseTokenizerConfig("{", "c.json", &*spec).ok());
}

}  // namespace
}  // namespace tributary
