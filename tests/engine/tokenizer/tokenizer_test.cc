#include "engine/tokenizer/tokenizer.h"

#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/test_data.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string>& TrickyStrings() {
  static const auto* strings = new std::vector<std::string>{
      "Hello, world!",
      "  leading and trailing  \n",
      "e\xCC\x81" "cole \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8",  // NFD, jamo
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "\xF0\x9F\xAB\xA0\xF0\x9F\xAB\xA0 x\xF0\x9F\xAB\xA0",
      "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5 \xE6\x9D\xB1\xE4\xBA\xAC",
      "<|im_start|>user\nDON'T<|im_end|>\n<think>x</think>",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "\t\r\n\xC2\x85\xE3\x80\x80 mixed",
      "",
  };
  return *strings;
}

TEST(TokenizerTest, DecodeOfEncodeIsNfc) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string& text : TrickyStrings()) {
    auto ids = tokenizer->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto decoded = tokenizer->Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, *NormalizeNfc(text));
  }
}

TEST(TokenizerTest, SkipSpecialTokensKeepsPlainAddedTokens) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode("<|im_start|>a<think>b</think><|im_end|>");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*tokenizer->Decode(*ids, /*skip_special_tokens=*/true),
            "a<think>b</think>");
  EXPECT_TRUE(tokenizer->IsSpecial(151645));
  EXPECT_FALSE(tokenizer->IsSpecial(151667));  // <think> is not special
  EXPECT_TRUE(tokenizer->IsAddedToken(151667));
}

TEST(TokenizerTest, LookupsAndConfig) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->eos_token_id(), 151645);  // <|im_end|>
  EXPECT_EQ(tokenizer->pad_token_id(), 151643);  // <|endoftext|>
  EXPECT_EQ(tokenizer->TokenToId("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer->TokenToId("\xC4\xA0the"), 279);  // "Ġthe"
  EXPECT_EQ(tokenizer->IdToToken(279), "\xC4\xA0the");
  EXPECT_EQ(tokenizer->IdToToken(151668), "</think>");
  EXPECT_EQ(tokenizer->IdToToken(9999999), std::nullopt);
  EXPECT_EQ(tokenizer->TokenToId("no such token"), std::nullopt);
  EXPECT_EQ(tokenizer->id_end(), 151669);
  EXPECT_STREQ(tokenizer->pre_tokenizer().name(), "qwen2-scanner");
}

TEST(TokenizerTest, InvalidUtf8IsRejected) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  for (const char* bad : {"abc\xFF", "\xC3", "\xED\xA0\x80", "\xC0\xAF",
                          "ok \xF4\x90\x80\x80"}) {
    auto ids = tokenizer->Encode(bad);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(ids.status().message()), HasSubstr("UTF-8"));
  }
}

TEST(TokenizerTest, UnknownIdIsAnErrorNamingIt) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  for (int32_t id : {-1, 151669, 2000000}) {
    auto text = tokenizer->Decode(std::vector<int32_t>{9707, id});
    ASSERT_FALSE(text.ok());
    EXPECT_THAT(std::string(text.status().message()),
                HasSubstr("token id " + std::to_string(id)));
  }
}

TEST(TokenizerTest, StreamingEmitsOnlyWholeCharacters) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string& text : TrickyStrings()) {
    auto ids = tokenizer->Encode(text);
    ASSERT_TRUE(ids.ok());
    StreamDecoder stream(*tokenizer, /*skip_special_tokens=*/false);
    std::string joined;
    for (int32_t id : *ids) {
      auto chunk = stream.Add(id);
      ASSERT_TRUE(chunk.ok());
      EXPECT_TRUE(ValidateUtf8(*chunk).ok()) << "chunk of '" << text << "'";
      joined += *chunk;
    }
    joined += stream.Finish();
    EXPECT_EQ(joined, *tokenizer->Decode(*ids));
  }
  // U+1FAE0 is three byte-level tokens; the first two emit nothing.
  auto ids = tokenizer->Encode("\xF0\x9F\xAB\xA0");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 3u);
  StreamDecoder stream(*tokenizer, false);
  EXPECT_EQ(*stream.Add((*ids)[0]), "");
  EXPECT_EQ(stream.num_pending_bytes(), 2u);
  EXPECT_FALSE(stream.Add(-5).ok());
  EXPECT_EQ(*stream.Add((*ids)[1]), "");
  EXPECT_EQ(*stream.Add((*ids)[2]), "\xF0\x9F\xAB\xA0");
}

TEST(TokenizerTest, StreamingFlushesInvalidBytesAsReplacement) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  // The first token of U+1FAE0 is the truncated sequence F0 9F.
  auto ids = tokenizer->Encode("\xF0\x9F\xAB\xA0");
  ASSERT_TRUE(ids.ok());
  const int32_t head = (*ids)[0];
  StreamDecoder stream(*tokenizer, false);
  EXPECT_EQ(*stream.Add(head), "");
  EXPECT_EQ(*stream.Add(*tokenizer->TokenToId("a")), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(*stream.Add(head), "");
  EXPECT_EQ(stream.Finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(*tokenizer->Decode(std::vector<int32_t>{head, 64, head}),
            "\xEF\xBF\xBD" "a\xEF\xBF\xBD");
}

TEST(Utf8Test, NfcKeepsHangulTBase) {
  // 어 (an LV syllable) + U+11A7 stays as is (utf8proc 2.8 drops U+11A7).
  EXPECT_EQ(*NormalizeNfc("\xEC\x96\xB4\xE1\x86\xA7" "x\xE1\x86\xA7"),
            "\xEC\x96\xB4\xE1\x86\xA7" "x\xE1\x86\xA7");
  EXPECT_EQ(*NormalizeNfc("e\xCC\x81\xE1\x86\xA7" "e\xCC\x81"),
            "\xC3\xA9\xE1\x86\xA7\xC3\xA9");
}

TEST(Utf8Test, LossyUsesMaximalSubparts) {
  std::string out;
  // E2 82 is a truncated 3-byte sequence: one U+FFFD; FF: one; C0: one.
  AppendUtf8Lossy("a\xE2\x82z\xFF\xC0\xAF", true, &out);
  EXPECT_EQ(out, "a\xEF\xBF\xBDz\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  out.clear();
  EXPECT_EQ(AppendUtf8Lossy("ab\xF0\x9F", false, &out), 2u);
  EXPECT_EQ(out, "ab");
}

// Quoting a client's text in a message: the cut never splits a character,
// and whatever bytes came in, what goes out is well-formed UTF-8.
TEST(Utf8Test, AnExcerptIsWholeCharacters) {
  const std::string text = "ab\xE0\xA0\x8D" "cd";  // a, b, U+080D (3 bytes), c, d
  EXPECT_EQ(Utf8Excerpt(text, 2), "ab");
  EXPECT_EQ(Utf8Excerpt(text, 3), "ab");  // not "ab\xE0"
  EXPECT_EQ(Utf8Excerpt(text, 4), "ab");
  EXPECT_EQ(Utf8Excerpt(text, 5), "ab\xE0\xA0\x8D");
  EXPECT_EQ(Utf8Excerpt(text, 100), text);
  EXPECT_EQ(Utf8Excerpt("x\xFFy", 100), "x\xEF\xBF\xBDy");
  EXPECT_EQ(Utf8Excerpt("x\xE0\xA0", 100), "x\xEF\xBF\xBD");  // cut by the client
  for (size_t n = 0; n <= text.size(); ++n) {
    EXPECT_TRUE(ValidateUtf8(Utf8Excerpt(text, n)).ok()) << n;
  }
}

}  // namespace
}  // namespace tributary
