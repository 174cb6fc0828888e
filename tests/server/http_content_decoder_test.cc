// DecodeContent against bodies encoded here by zlib and brotli's own
// encoders: every coding and a list of them round-trip, corrupt, truncated
// and trailing-garbage data is INVALID_ARGUMENT naming the coding, an
// unknown coding is UNIMPLEMENTED naming it, and a bomb stops at the limit.
#include "server/http_content_decoder.h"

#include <brotli/encode.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/server/deflate_for_test.h"

namespace tributary {
namespace {

using testing_util::Deflate;

std::string Brotli(const std::string& text) {
  size_t size = BrotliEncoderMaxCompressedSize(text.size()) + 64;
  std::string out(size, '\0');
  EXPECT_TRUE(BrotliEncoderCompress(
      BROTLI_DEFAULT_QUALITY, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, text.size(),
      reinterpret_cast<const uint8_t*>(text.data()), &size,
      reinterpret_cast<uint8_t*>(out.data())));
  out.resize(size);
  return out;
}

const std::string kText = R"({"model": "m", "prompt": "ROMEO: but soft, what light"})";

TEST(HttpContentDecoderTest, EveryCodingRoundTrips) {
  EXPECT_EQ(*DecodeContent("", kText, 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("identity", kText, 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("gzip", Deflate(kText, 31), 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("GZIP", Deflate(kText, 31), 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("deflate", Deflate(kText, 15), 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("deflate", Deflate(kText, -15), 1 << 20), kText);
  EXPECT_EQ(*DecodeContent("br", Brotli(kText), 1 << 20), kText);
  // Applied in order: gzip first, then br; undone from the last.
  EXPECT_EQ(*DecodeContent("gzip, br", Brotli(Deflate(kText, 31)), 1 << 20), kText);
}

TEST(HttpContentDecoderTest, BadDataNamesTheCoding) {
  for (const char* coding : {"gzip", "deflate", "br"}) {
    SCOPED_TRACE(coding);
    const std::string good = std::string(coding) == "br"        ? Brotli(kText)
                             : std::string(coding) == "gzip"    ? Deflate(kText, 31)
                                                                : Deflate(kText, 15);
    for (const std::string& bad :
         {std::string("not compressed at all"), good.substr(0, good.size() / 2),
          good + "trailing"}) {
      absl::StatusOr<std::string> r = DecodeContent(coding, bad, 1 << 20);
      ASSERT_FALSE(r.ok());
      EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
      EXPECT_TRUE(absl::StrContains(r.status().message(), coding)) << r.status();
    }
  }
}

TEST(HttpContentDecoderTest, UnknownCodingIsNamed) {
  absl::Status s = CheckContentEncoding("gzip, zstd");
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "zstd")) << s;
  EXPECT_TRUE(CheckContentEncoding("gzip, deflate, br, identity").ok());
  EXPECT_TRUE(absl::IsUnimplemented(DecodeContent("compress", kText, 100).status()));
}

TEST(HttpContentDecoderTest, DecodingStopsAtTheLimit) {
  const std::string big(8 << 20, 'a');
  for (const std::string coding : {"gzip", "br"}) {
    SCOPED_TRACE(coding);
    const std::string packed = coding == "br" ? Brotli(big) : Deflate(big, 31);
    ASSERT_LT(packed.size(), 64u << 10);
    absl::StatusOr<std::string> r = DecodeContent(coding, packed, 1 << 20);
    EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
    // Exactly at the limit is allowed.
    r = DecodeContent(coding, coding == "br" ? Brotli(big.substr(0, 1 << 20))
                                             : Deflate(big.substr(0, 1 << 20), 31),
                      1 << 20);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->size(), 1u << 20);
  }
  // Identity bodies are bounded too.
  EXPECT_TRUE(absl::IsResourceExhausted(DecodeContent("", big, 1 << 20).status()));
}

}  // namespace
}  // namespace tributary
