// The hand-written Qwen scanner against its naive twin, PCRE2, and the
// semantic corners of the Qwen regex spelled out.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "engine/tokenizer/pcre2_pre_tokenizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/qwen_pre_tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<std::string> SplitWith(const PreTokenizer& pre,
                                   absl::string_view text) {
  std::vector<absl::string_view> pieces;
  absl::Status status = pre.Split(text, &pieces);
  EXPECT_TRUE(status.ok()) << status;
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

// Code points drawn from the classes that matter to the regex.
const std::vector<std::vector<char32_t>>& Pools() {
  static const auto* pools = new std::vector<std::vector<char32_t>>{
      // whitespace of every kind, and look-alikes that are not \s
      {' ', ' ', ' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680, 0x2000,
       0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x200B, 0x180E,
       0xFEFF},
      {'\r', '\n', '\n', ' '},
      // letters, including the contraction letters in both cases and ſ
      {'a', 'b', 'x', 'Z', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V',
       'm', 'M', 'l', 'L', 'd', 'D', 0x17F, 0xE9, 0xDF, 0x3A9, 0x416, 0x5D0,
       0x639, 0x915, 0xE01, 0xD55C, 0x65E5, 0x1100, 0x2B0, 0x1C5, 0x3042},
      // combining marks (Mn, Mc, Me) and format characters
      {0x301, 0x308, 0x327, 0x93E, 0x94D, 0xE31, 0x64B, 0x20DD, 0xFE0F,
       0x200D, 0x302A},
      // numbers (Nd, Nl, No)
      {'0', '5', '9', 0x663, 0x967, 0xFF11, 0xB2, 0xBD, 0x216B, 0x2466},
      // punctuation and symbols
      {'\'', '\'', '"', '.', ',', '!', '?', '(', ')', '-', '_', '/', '\\', '<',
       '>', '|', 0x2026, 0x2014, 0x201C, 0x3002, 0x20AC, 0x2122, 0x0, 0x7F,
       0xFFFD},
      {'\''},
      // emoji, skin tones, regional indicators, CJK
      {0x1F600, 0x1F44D, 0x1F3FD, 0x1F1EF, 0x1F1F5, 0x2764, 0x4E2D, 0x6587},
  };
  return *pools;
}

std::string RandomText(std::mt19937& rng) {
  const auto& pools = Pools();
  std::uniform_int_distribution<int> length(0, 24);
  std::string text;
  const int n = length(rng);
  for (int i = 0; i < n; ++i) {
    const auto& pool = pools[rng() % pools.size()];
    AppendUtf8(pool[rng() % pool.size()], &text);
  }
  return text;
}

void ExpectScannerMatchesPcre2(const char* pattern, const char* name) {
  auto fast = PreTokenizer::ForPattern(pattern);
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_STREQ((*fast)->name(), name);
  auto naive = Pcre2PreTokenizer::Create(pattern);
  ASSERT_TRUE(naive.ok()) << naive.status();
  std::mt19937 rng(20240601);
  int mismatches = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = RandomText(rng);
    auto a = SplitWith(**fast, text);
    auto b = SplitWith(**naive, text);
    if (a != b && ++mismatches <= 5) {
      ADD_FAILURE() << "text '" << text << "'\n scanner: ["
                    << absl::StrJoin(a, "|") << "]\n pcre2:   ["
                    << absl::StrJoin(b, "|") << "]";
    }
    EXPECT_EQ(absl::StrJoin(a, ""), text);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(PreTokenizerTest, Qwen2ScannerMatchesPcre2OnRandomText) {
  ExpectScannerMatchesPcre2(kQwen2Pattern, "qwen2-scanner");
}

TEST(PreTokenizerTest, Qwen35ScannerMatchesPcre2OnRandomText) {
  ExpectScannerMatchesPcre2(kQwen35Pattern, "qwen35-scanner");
}

struct Case {
  const char* text;
  std::vector<std::string> pieces;
};

TEST(PreTokenizerTest, QwenRegexCorners) {
  const std::vector<Case> cases = {
      {"a  b", {"a", " ", " b"}},          // \s+(?!\S) leaves one space
      {"x   ", {"x", "   "}},             // a run at the end is whole
      {"x\t\ty", {"x", "\t", "\ty"}},      // a tab may lead a word
      {"a \n\n b", {"a", " \n\n", " b"}},  // \s*[\r\n]+ ends at the last LF
      {"a \n \n  b", {"a", " \n \n", " ", " b"}},
      {"a.\r\n\r\nb", {"a", ".\r\n\r\n", "b"}},  // punctuation takes CR/LF
      {"DON'T", {"DON", "'T"}},
      {" 'Sx", {" '", "Sx"}},              // the space-led punctuation wins
      {"'\xC5\xBFx", {"'\xC5\xBF", "x"}},  // 'ſ is 's under (?i)
      {"'sa", {"'s", "a"}},
      {"\xC2\x85\xC2\x85x", {"\xC2\x85", "\xC2\x85x"}},  // NEL is \s
      {"\xE2\x80\x8Bx", {"\xE2\x80\x8Bx"}},  // U+200B is not \s
      {"123", {"1", "2", "3"}},
      {"(word", {"(word"}},
      {"", {}},
  };
  QwenPreTokenizer scanner(QwenPreTokenizer::Variant::kQwen2);
  for (const Case& c : cases) {
    EXPECT_THAT(SplitWith(scanner, c.text), ElementsAreArray(c.pieces))
        << "text '" << c.text << "'";
  }
}

TEST(PreTokenizerTest, Qwen35MarksJoinLetters) {
  const std::string text = "e\xCC\x81x \xCC\x81!";  // e U+0301 x space U+0301 !
  QwenPreTokenizer q2(QwenPreTokenizer::Variant::kQwen2);
  QwenPreTokenizer q35(QwenPreTokenizer::Variant::kQwen35);
  EXPECT_THAT(SplitWith(q2, text),
              ElementsAreArray({"e", "\xCC\x81x", " \xCC\x81!"}));
  EXPECT_THAT(SplitWith(q35, text),
              ElementsAreArray({"e\xCC\x81x", " \xCC\x81", "!"}));
}

TEST(PreTokenizerTest, OtherPatternsUsePcre2) {
  auto gpt2 = PreTokenizer::ForPattern(kGpt2Pattern);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_STREQ((*gpt2)->name(), "pcre2");
  EXPECT_THAT(SplitWith(**gpt2, "Hello world's 123!!"),
              ElementsAreArray({"Hello", " world", "'s", " 123", "!!"}));
}

TEST(PreTokenizerTest, Pcre2KeepsUnmatchedGaps) {
  auto digits = Pcre2PreTokenizer::Create("\\d+");
  ASSERT_TRUE(digits.ok());
  EXPECT_THAT(SplitWith(**digits, "ab12cd3"),
              ElementsAreArray({"ab", "12", "cd", "3"}));
}

TEST(PreTokenizerTest, Pcre2RewritesWhiteSpaceToOniguruma) {
  auto rewritten = Pcre2PreTokenizer::RewritePattern("[^\\s\\p{L}]\\s+\\S");
  ASSERT_TRUE(rewritten.ok());
  const std::string ws =
      "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-"
      "\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";
  EXPECT_EQ(*rewritten, "[^" + ws + "\\p{L}][" + ws + "]+[^" + ws + "]");
  // U+180E is not \s (Oniguruma, Unicode >= 6.3), though PCRE2's \s says so.
  auto spaces = Pcre2PreTokenizer::Create("\\s+");
  ASSERT_TRUE(spaces.ok());
  EXPECT_THAT(SplitWith(**spaces, " \xE1\xA0\x8E "),
              ElementsAreArray({" ", "\xE1\xA0\x8E", " "}));
  auto in_class = Pcre2PreTokenizer::Create("[\\S]");
  EXPECT_EQ(in_class.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(PreTokenizerTest, Pcre2ErrorsAreStatuses) {
  auto bad = Pcre2PreTokenizer::Create("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("(unclosed"));
  // Catastrophic backtracking hits the match limit instead of hanging.
  auto evil = Pcre2PreTokenizer::Create("(a+)+$");
  ASSERT_TRUE(evil.ok());
  std::vector<absl::string_view> pieces;
  absl::Status status = (*evil)->Split(std::string(40, 'a') + "!", &pieces);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
}

}  // namespace
}  // namespace tributary
