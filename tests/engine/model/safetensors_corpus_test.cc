// Runs the parsers over every file of the committed fuzz seed corpora
// (tests/fuzz/corpus/), so that inputs that once crashed or mis-parsed stay
// covered in every build, without libFuzzer. Files named valid_* must parse,
// invalid_* must be rejected; any other name (e.g. crash-*, found by the
// fuzzer) only has to be handled without a crash.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors_header.h"
#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_corpus.h"

namespace tributary {
namespace {

template <typename Parse>
void RunCorpus(const std::string& name, Parse parse) {
  std::vector<std::filesystem::path> files = FuzzCorpusFiles(name);
  EXPECT_GE(files.size(), 5u) << "corpus " << name << " looks empty";
  for (const auto& path : files) {
    const std::string file_name = path.filename().string();
    absl::Status status = parse(ReadCorpusFile(path), file_name);
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
