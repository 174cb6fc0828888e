#include "engine/model/strict_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(StrictJsonTest, ParsesNestedDocument) {
  auto json = ParseStrictJson(R"( {"a": [1, -2, 3.5, "x", null, true],
                                   "b": {"c": {}}} )",
                              "t.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["a"].size(), 6u);
  EXPECT_EQ((*json)["a"][1].get<int>(), -2);
  EXPECT_TRUE((*json)["b"]["c"].is_object());
}

TEST(StrictJsonTest, ParsesScalarsAndArrays) {
  EXPECT_EQ(ParseStrictJson("42", "t")->get<int>(), 42);
  EXPECT_TRUE(ParseStrictJson("[[], [[]]]", "t")->is_array());
}

TEST(StrictJsonTest, RejectsDuplicateKeysAtAnyDepth) {
  auto top = ParseStrictJson(R"({"a": 1, "a": 2})", "t.json");
  EXPECT_THAT(Message(top.status()),
              HasSubstr("t.json: invalid JSON: duplicate key \"a\""));
  auto nested = ParseStrictJson(R"({"x": [{"k": 1}, {"k": 1, "k": 2}]})", "t");
  EXPECT_THAT(Message(nested.status()),
              HasSubstr("duplicate key \"k\" in the object at /x/1"));
}

TEST(StrictJsonTest, SameKeyInSiblingObjectsIsFine) {
  EXPECT_TRUE(ParseStrictJson(R"({"a": {"k": 1}, "b": {"k": 2}})", "t").ok());
}

TEST(StrictJsonTest, ReportsSyntaxErrorWithPosition) {
  auto json = ParseStrictJson("{\"a\": }", "t.json");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(Message(json.status()), HasSubstr("column 7"));
}

TEST(StrictJsonTest, RejectsNulByteAndTrailingGarbage) {
  EXPECT_THAT(Message(ParseStrictJson(std::string("{}\0", 3), "t").status()),
              HasSubstr("NUL byte at offset 2"));
  EXPECT_FALSE(ParseStrictJson("{} x", "t").ok());
  EXPECT_FALSE(ParseStrictJson("", "t").ok());
}

TEST(StrictJsonTest, RejectsIllFormedUtf8) {
  EXPECT_THAT(Message(ParseStrictJson("\"\xc3\x28\"", "t").status()),
              HasSubstr("UTF-8"));
  EXPECT_TRUE(ParseStrictJson("\"\xc3\xa9\"", "t").ok());
}

TEST(StrictJsonTest, CapsDepth) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_THAT(Message(ParseStrictJson(deep, "t", 64).status()),
              HasSubstr("nesting deeper than 64 levels"));
  EXPECT_TRUE(ParseStrictJson(deep, "t", 100).ok());
}

}  // namespace
}  // namespace tributary
