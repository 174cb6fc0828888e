#include "engine/model/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/model/safetensors_file.h"
#include "test_files.h"

namespace tributary {
namespace {

TEST(SafetensorsWriterTest, RoundTripsThroughTheReader) {
  testing::TempDir dir;
  const std::string path = dir.File("out.safetensors");
  std::vector<TensorToWrite> tensors = {
      {"b.bf16", DType::kBF16, {3, 5},
       [](uint8_t* dst, size_t n) {
         for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i * 3);
       }},
      {"a.f32", DType::kF32, {7},
       [](uint8_t* dst, size_t n) { std::memset(dst, 0x41, n); }},
      {"empty", DType::kF16, {0, 4}, nullptr},
  };
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorView* b = file->Find("b.bf16");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3, 5}));
  ASSERT_EQ(b->size_bytes, 30u);
  for (size_t i = 0; i < 30; ++i) {
    EXPECT_EQ(static_cast<const uint8_t*>(b->data)[i], static_cast<uint8_t>(i * 3));
  }
  const TensorView* a = file->Find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(a->data)[27], 0x41);
  const TensorView* empty = file->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->size_bytes, 0u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  // The data section starts 8-byte aligned.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 8, 0u);
}

TEST(SafetensorsWriterTest, RejectsRepeatedNamesAndBadShapes) {
  testing::TempDir dir;
  const std::string path = dir.File("bad.safetensors");
  auto repeated = WriteSafetensors(
      path, {{"x", DType::kF32, {1}, nullptr}, {"x", DType::kF32, {1}, nullptr}});
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(repeated.message().find("\"x\""), std::string::npos);
  EXPECT_FALSE(WriteSafetensors(path, {{"y", DType::kF32, {-1}, nullptr}}).ok());
  EXPECT_FALSE(WriteSafetensors(path, {{"z", DType::kF32,
                                        {int64_t{1} << 40, int64_t{1} << 40},
                                        nullptr}}).ok());
  EXPECT_FALSE(WriteSafetensors("/nonexistent/dir/file", {}).ok());
}

}  // namespace
}  // namespace tributary
