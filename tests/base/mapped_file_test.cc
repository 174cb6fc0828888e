#include "base/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace tributary {
namespace {

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "/" + name;
}

TEST(MappedFileTest, MapsContentsWithoutCopy) {
  std::string path = TempPath("mapped_file_test.bin");
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello mapped world";
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->view(), "hello mapped world");
  MappedFile moved = std::move(*file);
  EXPECT_EQ(moved.size_bytes(), 18u);
  EXPECT_EQ(file->data(), nullptr);
  std::remove(path.c_str());
}

TEST(MappedFileTest, EmptyFileMapsToEmptyView) {
  std::string path = TempPath("mapped_file_empty.bin");
  { std::ofstream out(path, std::ios::binary); }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size_bytes(), 0u);
  std::remove(path.c_str());
}

TEST(MappedFileTest, MissingFileIsNotFoundNamingPath) {
  auto file = MappedFile::Open("/nonexistent/dir/file.bin");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/file.bin"),
            std::string::npos);
}

TEST(MappedFileTest, DirectoryIsRejected) {
  auto file = MappedFile::Open(testing::TempDir());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
