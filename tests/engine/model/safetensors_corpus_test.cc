// Runs the parsers over every file of the committed fuzz seed corpora
// (tests/fuzz/corpus/), so that inputs that once crashed or mis-parsed stay
// covered in every build, without libFuzzer. Files named valid_* must parse,
// invalid_* must be rejected; any other name (e.g. crash-*, found by the
// fuzzer) only has to be handled without a crash.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors_header.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

std::vector<std::filesystem::path> CorpusFiles(const std::string& name) {
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

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename Parse>
void RunCorpus(const std::string& name, Parse parse) {
  std::vector<std::filesystem::path> files = CorpusFiles(name);
  EXPECT_GE(files.size(), 5u) << "corpus " << name << " looks empty";
  for (const auto& path : files) {
    const std::string file_name = path.filename().string();
    absl::Status status = parse(ReadAll(path), file_name);
    if (absl::StartsWith(file_name, "valid_")) {
      EXPECT_TRUE(status.ok()) << file_name << ": " << status;
    } else if (absl::StartsWith(file_name, "invalid_")) {
      EXPECT_FALSE(status.ok()) << file_name << " was accepted";
    }
  }
}

TEST(SafetensorsCorpusTest, EveryFileIsHandled) {
  RunCorpus("safetensors_header", [](const std::string& bytes,
                                     const std::string& name) {
    return ParseSafetensorsHeader(bytes, name).status();
  });
}

TEST(ModelConfigCorpusTest, EveryFileIsHandled) {
  RunCorpus("model_config", [](const std::string& bytes,
                               const std::string& name) {
    return ParseModelConfig(bytes, name).status();
  });
}

}  // namespace
}  // namespace tributary
