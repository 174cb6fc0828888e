#include "engine/model/tensor_store.h"

#include <cstring>
#include <string>

#include "engine/model/safetensors_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/test_files.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::tributary::testing::BuildSafetensors;
using ::tributary::testing::PatternBytes;
using ::tributary::testing::TempDir;
using ::tributary::testing::TestTensor;
using ::tributary::testing::WriteBytes;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(SafetensorsFileTest, MapsTensorsWithoutCopying) {
  TempDir dir;
  const std::string path = dir.File("model.safetensors");
  std::string a_bytes = PatternBytes(12, 3);
  WriteBytes(path, BuildSafetensors({{"a", "F32", {3}, a_bytes},
                                     {"b", "BF16", {2, 2}, ""},
                                     {"empty", "F16", {0}, ""}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors().size(), 3u);
  const TensorView* a = file->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->size_bytes, 12u);
  EXPECT_EQ(a->num_elements(), 3);
  EXPECT_EQ(std::memcmp(a->data, a_bytes.data(), 12), 0);
  EXPECT_EQ(file->Find("empty")->size_bytes, 0u);
  EXPECT_EQ(file->Find("nope"), nullptr);

  // Views point into the mapping, and survive moving the file object.
  const void* before = a->data;
  SafetensorsFile moved = *std::move(file);
  EXPECT_EQ(moved.Find("a")->data, before);
  EXPECT_EQ(moved.path(), path);
}

TEST(SafetensorsFileTest, ErrorsNameThePath) {
  TempDir dir;
  auto missing = SafetensorsFile::Open(dir.File("nope.safetensors"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing.status()), HasSubstr("nope.safetensors"));

  WriteBytes(dir.File("empty.safetensors"), "");
  auto empty = SafetensorsFile::Open(dir.File("empty.safetensors"));
  EXPECT_THAT(Message(empty.status()),
              HasSubstr("empty.safetensors: file is empty"));
}

TEST(TensorStoreTest, OpensSingleFileDirectory) {
  TempDir dir;
  WriteBytes(dir.File("model.safetensors"),
             BuildSafetensors({{"x", "BF16", {2}, ""}, {"y", "F32", {1}, ""}}));
  auto store = TensorStore::OpenDirectory(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->tensors().size(), 2u);
  EXPECT_NE(store->Find("y"), nullptr);
  EXPECT_EQ(store->FilePathOf("y"), dir.File("model.safetensors"));
  EXPECT_TRUE(store->warnings().empty());
}

TEST(TensorStoreTest, EmptyDirectoryIsNotFound) {
  TempDir dir;
  auto store = TensorStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(store.status()), HasSubstr("model.safetensors"));
}

class ShardedStoreTest : public ::testing::Test {
 protected:
  void WriteShards() {
    WriteBytes(dir_.File("model-00001-of-00002.safetensors"),
               BuildSafetensors({{"a", "BF16", {4}, ""}, {"b", "F32", {2}, ""}}));
    WriteBytes(dir_.File("model-00002-of-00002.safetensors"),
               BuildSafetensors({{"c", "BF16", {3, 2}, ""}}));
  }
  void WriteIndex(absl::string_view weight_map) {
    WriteBytes(dir_.File("model.safetensors.index.json"),
               std::string(R"({"metadata": {"total_size": 28}, "weight_map": )") +
                   std::string(weight_map) + "}");
  }
  TempDir dir_;
};

TEST_F(ShardedStoreTest, OpensEveryShardOnce) {
  WriteShards();
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->files().size(), 2u);
  EXPECT_EQ(store->tensors().size(), 3u);
  EXPECT_EQ(store->Find("c")->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_THAT(std::string(store->FilePathOf("c")),
              HasSubstr("model-00002-of-00002.safetensors"));
  EXPECT_TRUE(store->warnings().empty());
}

TEST_F(ShardedStoreTest, MissingShardIsNamed) {
  WriteShards();
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors",
                 "z": "model-00003-of-00003.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(store.status()),
              HasSubstr("shard \"model-00003-of-00003.safetensors\""));
}

TEST_F(ShardedStoreTest, TensorAbsentFromItsShardIsAnError) {
  WriteShards();
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors",
                 "d": "model-00002-of-00002.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()),
              HasSubstr("puts tensor \"d\" in "
                        "\"model-00002-of-00002.safetensors\", which does not "
                        "hold it"));
}

TEST_F(ShardedStoreTest, TensorInTheWrongShardIsAnError) {
  WriteShards();
  WriteIndex(R"({"a": "model-00002-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()), HasSubstr("but it is in"));
}

TEST_F(ShardedStoreTest, UnlistedTensorIsKeptWithAWarning) {
  WriteShards();
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_NE(store->Find("b"), nullptr);
  ASSERT_EQ(store->warnings().size(), 1u);
  EXPECT_THAT(store->warnings()[0], HasSubstr("tensor \"b\" is not listed"));
}

TEST_F(ShardedStoreTest, DuplicateTensorAcrossShardsIsAnError) {
  WriteBytes(dir_.File("s1.safetensors"),
             BuildSafetensors({{"a", "BF16", {4}, ""}}));
  WriteBytes(dir_.File("s2.safetensors"),
             BuildSafetensors({{"a", "BF16", {4}, ""}, {"b", "U8", {1}, ""}}));
  WriteIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()),
              HasSubstr("tensor \"a\" appears in both"));
}

TEST_F(ShardedStoreTest, IndexMustNotEscapeTheDirectory) {
  WriteIndex(R"({"a": "../elsewhere.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()), HasSubstr("not a plain file name"));
}

TEST_F(ShardedStoreTest, MalformedIndexIsNamed) {
  WriteIndex(R"([1])");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()), HasSubstr("weight_map is an array"));
  WriteBytes(dir_.File("model.safetensors.index.json"), R"({"metadata": {}})");
  store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()),
              HasSubstr("model.safetensors.index.json: missing \"weight_map\""));
}

TEST_F(ShardedStoreTest, CorruptShardIsNamed) {
  WriteShards();
  WriteBytes(dir_.File("model-00002-of-00002.safetensors"), "garbage!!");
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"})");
  auto store = TensorStore::OpenDirectory(dir_.path());
  EXPECT_THAT(Message(store.status()),
              HasSubstr("model-00002-of-00002.safetensors: header length"));
}

TEST_F(ShardedStoreTest, SingleFileWinsOverIndex) {
  WriteShards();
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors"})");
  WriteBytes(dir_.File("model.safetensors"),
             BuildSafetensors({{"only", "U8", {1}, ""}}));
  auto store = TensorStore::OpenDirectory(dir_.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->tensors().size(), 1u);
  ASSERT_EQ(store->warnings().size(), 1u);
  EXPECT_THAT(store->warnings()[0], HasSubstr("ignored"));
}

}  // namespace
}  // namespace tributary
