#include "tests/fuzz/fuzz_corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include "gtest/gtest.h"

namespace tributary {

std::vector<std::filesystem::path> FuzzCorpusFiles(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/fuzz/corpus" / name;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  EXPECT_FALSE(ec) << dir << ": " << ec.message();
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadCorpusFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace tributary
