#include "engine/model/safetensors_header.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/test_files.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::tributary::testing::BuildSafetensors;
using ::tributary::testing::Le64;
using ::tributary::testing::RawSafetensors;
using ::tributary::testing::TestTensor;

// One entry with the given dtype/shape/offsets, as header text.
std::string Entry(absl::string_view name, absl::string_view body) {
  return absl::StrCat("\"", name, "\":", body);
}

TEST(SafetensorsHeaderTest, ParsesValidFile) {
  std::string file = BuildSafetensors(
      {{"b", "F32", {2, 3}, ""}, {"a", "BF16", {4}, ""}, {"c", "I64", {1}, ""}},
      {{"format", "pt"}});
  auto header = ParseSafetensorsHeader(file, "ok.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->tensors.size(), 3u);
  // Sorted by offset: b (24 bytes) then a (8) then c (8).
  EXPECT_EQ(header->tensors[0].name, "b");
  EXPECT_EQ(header->tensors[0].dtype, DType::kF32);
  EXPECT_EQ(header->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header->tensors[0].data_begin, 0u);
  EXPECT_EQ(header->tensors[0].data_end, 24u);
  EXPECT_EQ(header->tensors[1].name, "a");
  EXPECT_EQ(header->tensors[1].data_begin, 24u);
  EXPECT_EQ(header->tensors[2].dtype, DType::kI64);
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->header_size_bytes % 8, 0u);
  EXPECT_EQ(header->data_section_offset_bytes, 8 + header->header_size_bytes);
  EXPECT_EQ(header->data_section_size_bytes, 40u);
}

TEST(SafetensorsHeaderTest, EmptyHeaderObjectIsValid) {
  auto header = ParseSafetensorsHeader(RawSafetensors("{}", ""), "x");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_TRUE(header->tensors.empty());
}

TEST(SafetensorsHeaderTest, ZeroElementTensorsAreValid) {
  // Two empty tensors share offset 8 with each other and with the start of
  // the next tensor; a scalar (shape []) has one element.
  std::string header = absl::StrCat(
      "{", Entry("w", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
      ",", Entry("empty", R"({"dtype":"BF16","shape":[0,5],"data_offsets":[8,8]})"),
      ",", Entry("empty2", R"({"dtype":"F32","shape":[3,0],"data_offsets":[8,8]})"),
      ",", Entry("scalar", R"({"dtype":"F32","shape":[],"data_offsets":[8,12]})"),
      "}");
  auto parsed =
      ParseSafetensorsHeader(RawSafetensors(header, std::string(12, 'x')), "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 4u);
  EXPECT_EQ(parsed->tensors[1].size_bytes(), 0u);
  EXPECT_EQ(parsed->tensors[3].name, "scalar");
}

TEST(SafetensorsHeaderTest, AcceptsEveryKnownDType) {
  for (const char* dtype : {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32",
                            "U64", "I64", "F16", "BF16", "F32", "F64",
                            "F8_E4M3", "F8_E5M2"}) {
    std::string file = BuildSafetensors({{"t", dtype, {3}, ""}});
    auto header = ParseSafetensorsHeader(file, "x");
    ASSERT_TRUE(header.ok()) << dtype << ": " << header.status();
    EXPECT_EQ(DTypeName(header->tensors[0].dtype), dtype);
  }
}

TEST(SafetensorsHeaderTest, TrailingSpacePaddingIsAllowed) {
  auto header = ParseSafetensorsHeader(
      RawSafetensors(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})"
                     "        ",
                     "z"),
      "x");
  EXPECT_TRUE(header.ok()) << header.status();
}

TEST(SafetensorsHeaderTest, UnknownEntryFieldsAreIgnored) {
  auto header = ParseSafetensorsHeader(
      RawSafetensors(
          R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[{}]}})",
          "z"),
      "x");
  EXPECT_TRUE(header.ok()) << header.status();
}

struct MalformedCase {
  std::string name;
  std::string bytes;
  std::string expected_message;
};

std::string OneTensor(absl::string_view body, size_t data_bytes) {
  return RawSafetensors(absl::StrCat("{", Entry("t", body), "}"),
                        std::string(data_bytes, '\x01'));
}

std::vector<MalformedCase> MalformedCatalog() {
  const std::string valid = BuildSafetensors({{"t", "F32", {2}, ""}});
  std::vector<MalformedCase> cases = {
      {"empty_file", "", "file is empty"},
      {"shorter_than_prefix", std::string("\x02\x00\x00", 3),
       "shorter than the 8-byte header length prefix"},
      {"zero_header_length", Le64(0), "header length is 0"},
      {"header_length_past_eof", absl::StrCat(Le64(100), "{}"),
       "runs past the end of the file"},
      {"header_length_over_cap",
       absl::StrCat(Le64(kMaxSafetensorsHeaderBytes + 1), "{}"),
       "exceeds the maximum of 100000000 bytes"},
      {"header_length_2_pow_64_minus_1",
       absl::StrCat(Le64(~uint64_t{0}), "{}"), "exceeds the maximum"},
      {"truncated_header",
       RawSafetensors(R"({"t":{"dtype":"F32","shape":[2],"data_off)", ""),
       "invalid JSON"},
      {"garbage_json", RawSafetensors("{not json at all}", ""),
       "invalid JSON"},
      {"header_not_starting_with_brace", RawSafetensors("[1, 2]", ""),
       "does not start with '{'"},
      {"header_with_nul_byte", RawSafetensors(std::string("{}\0", 3), ""),
       "invalid JSON"},
      {"two_json_values", RawSafetensors("{} {}", ""), "invalid JSON"},
      {"header_not_utf8",
       RawSafetensors("{\"t\xff\":{\"dtype\":\"U8\",\"shape\":[1],"
                      "\"data_offsets\":[0,1]}}",
                      "a"),
       "UTF-8"},
      {"entry_not_object", RawSafetensors(R"({"t":[1,2,3]})", ""),
       "tensor \"t\": entry is an array, expected an object"},
      {"missing_dtype", OneTensor(R"({"shape":[1],"data_offsets":[0,1]})", 1),
       "missing \"dtype\""},
      {"dtype_not_string",
       OneTensor(R"({"dtype":7,"shape":[1],"data_offsets":[0,1]})", 1),
       "dtype is an integer"},
      {"unknown_dtype",
       OneTensor(R"({"dtype":"F12","shape":[1],"data_offsets":[0,1]})", 1),
       "unknown dtype \"F12\""},
      {"lowercase_dtype",
       OneTensor(R"({"dtype":"bf16","shape":[1],"data_offsets":[0,2]})", 2),
       "unknown dtype \"bf16\""},
      {"missing_shape", OneTensor(R"({"dtype":"U8","data_offsets":[0,1]})", 1),
       "missing \"shape\""},
      {"shape_not_list",
       OneTensor(R"({"dtype":"U8","shape":"1","data_offsets":[0,1]})", 1),
       "shape is a string"},
      {"shape_negative",
       OneTensor(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})", 1),
       "shape[0] = -1 is not a non-negative integer"},
      {"shape_not_integer",
       OneTensor(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", 1),
       "shape[0] = 1.5"},
      {"shape_integral_float",
       OneTensor(R"({"dtype":"U8","shape":[1.0],"data_offsets":[0,1]})", 1),
       "shape[0] = 1.0"},
      {"shape_element_null",
       OneTensor(R"({"dtype":"U8","shape":[null],"data_offsets":[0,1]})", 1),
       "shape[0] = null"},
      {"shape_dim_over_int64",
       OneTensor(
           R"({"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,1]})",
           1),
       "shape[0] = 9223372036854775808"},
      {"shape_product_overflows",
       OneTensor(R"({"dtype":"U8","shape":[4294967296,4294967296],)"
                 R"("data_offsets":[0,1]})",
                 1),
       "overflows 64-bit byte arithmetic"},
      {"shape_bytes_overflow_after_dtype",
       OneTensor(R"({"dtype":"F64","shape":[4611686018427387904],)"
                 R"("data_offsets":[0,1]})",
                 1),
       "overflows 64-bit byte arithmetic"},
      {"dtype_shape_size_mismatch",
       OneTensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 8),
       "span 8 bytes but shape [3] of F32 (4 bytes each) needs 12"},
      {"missing_data_offsets", OneTensor(R"({"dtype":"U8","shape":[1]})", 1),
       "missing \"data_offsets\""},
      {"data_offsets_one_element",
       OneTensor(R"({"dtype":"U8","shape":[1],"data_offsets":[1]})", 1),
       "expected [begin, end]"},
      {"data_offsets_negative",
       OneTensor(R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", 1),
       "expected [begin, end]"},
      {"data_offsets_begin_after_end",
       OneTensor(R"({"dtype":"U8","shape":[0],"data_offsets":[2,1]})", 2),
       "data_offsets [2, 1] has begin > end"},
      {"data_offsets_past_eof",
       OneTensor(R"({"dtype":"U8","shape":[16],"data_offsets":[0,16]})", 4),
       "run past the end of the data section (4 bytes)"},
      {"overlapping_tensors",
       RawSafetensors(
           absl::StrCat(
               "{",
               Entry("a", R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})"),
               ",",
               Entry("b", R"({"dtype":"U8","shape":[4],"data_offsets":[2,6]})"),
               "}"),
           std::string(6, 'x')),
       "tensor \"b\" bytes [2, 6) overlap tensor \"a\" bytes [0, 4)"},
      {"same_offsets_twice",
       RawSafetensors(
           absl::StrCat(
               "{",
               Entry("a", R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})"),
               ",",
               Entry("b", R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})"),
               "}"),
           std::string(4, 'x')),
       "overlap"},
      {"gap_between_tensors",
       RawSafetensors(
           absl::StrCat(
               "{",
               Entry("a", R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})"),
               ",",
               Entry("b", R"({"dtype":"U8","shape":[2],"data_offsets":[6,8]})"),
               "}"),
           std::string(8, 'x')),
       "gap of 2 unused bytes before tensor \"b\""},
      {"first_tensor_not_at_zero",
       OneTensor(R"({"dtype":"U8","shape":[2],"data_offsets":[2,4]})", 4),
       "gap of 2 unused bytes before tensor \"t\""},
      {"trailing_bytes", absl::StrCat(valid, "xyz"),
       "3 trailing bytes after the last tensor"},
      {"data_without_tensors", RawSafetensors("{}", "abc"),
       "3 trailing bytes"},
      {"duplicate_tensor_names",
       RawSafetensors(
           absl::StrCat(
               "{",
               Entry("a", R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})"),
               ",",
               Entry("a", R"({"dtype":"U8","shape":[1],"data_offsets":[1,2]})"),
               "}"),
           "xy"),
       "duplicate key \"a\""},
      {"duplicate_field_in_entry",
       OneTensor(R"({"dtype":"U8","dtype":"F32","shape":[1],)"
                 R"("data_offsets":[0,1]})",
                 1),
       "duplicate key \"dtype\" in the object at /t"},
      {"metadata_not_object", RawSafetensors(R"({"__metadata__":[1]})", ""),
       "__metadata__ is an array"},
      {"metadata_non_string_value",
       RawSafetensors(R"({"__metadata__":{"format":"pt","n":3}})", ""),
       "__metadata__ value for key \"n\" is an integer"},
      {"metadata_nested_object",
       RawSafetensors(R"({"__metadata__":{"a":{"b":"c"}}})", ""),
       "__metadata__ value for key \"a\" is an object"},
      {"nesting_too_deep",
       RawSafetensors(R"({"t":{"x":[[[[[[[[[[1]]]]]]]]]]}})", ""),
       "nesting deeper than"},
  };
  return cases;
}

void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

class MalformedSafetensorsTest
    : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedSafetensorsTest, IsRejectedWithAClearReason) {
  const MalformedCase& c = GetParam();
  auto header = ParseSafetensorsHeader(c.bytes, "bad.safetensors");
  ASSERT_FALSE(header.ok()) << c.name << " was accepted";
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(header.status().message()),
              HasSubstr(c.expected_message));
  EXPECT_THAT(std::string(header.status().message()),
              ::testing::StartsWith("bad.safetensors: "));
}

INSTANTIATE_TEST_SUITE_P(
    Catalog, MalformedSafetensorsTest, ::testing::ValuesIn(MalformedCatalog()),
    [](const ::testing::TestParamInfo<MalformedCase>& info) {
      return info.param.name;
    });

TEST(SafetensorsHeaderTest, CatalogIsLarge) {
  EXPECT_GE(MalformedCatalog().size(), 25u);
}

}  // namespace
}  // namespace tributary
