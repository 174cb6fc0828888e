#include "tests/engine/tokenizer/test_data.h"

#include <sys/stat.h>

#include <fstream>
#include <memory>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tributary {

std::string Qwen3Dir() {
  return std::string(TRIBUTARY_SHARED_DIR) + "/data/tokenizers/qwen3";
}
std::string TestDataDir() {
  return std::string(TRIBUTARY_SOURCE_DIR) + "/tests/engine/tokenizer/testdata";
}
bool FileExists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

namespace {
const Tokenizer* LoadOnce(const std::string& path,
                          std::unique_ptr<Tokenizer>* slot, bool* tried) {
  if (!*tried) {
    *tried = true;
    auto loaded = Tokenizer::Load(path);
    if (loaded.ok()) *slot = std::move(loaded).value();
    else ADD_FAILURE() << "cannot load " << path << ": " << loaded.status()
                       << " (is ../shared next to the project root?)";
  }
  if (*slot == nullptr) ADD_FAILURE() << "tokenizer " << path << " unavailable";
  return slot->get();
}
}  // namespace

const Tokenizer* Qwen3Tokenizer() {
  static auto* slot = new std::unique_ptr<Tokenizer>();
  static bool tried = false;
  return LoadOnce(Qwen3Dir(), slot, &tried);
}

const Tokenizer* TinyQwen35Tokenizer() {
  static auto* slot = new std::unique_ptr<Tokenizer>();
  static bool tried = false;
  return LoadOnce(TestDataDir() + "/qwen35_tiny", slot, &tried);
}

std::vector<Vector> ReadVectors(const std::string& path) {
  std::vector<Vector> vectors;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing test vectors " << path;
    return vectors;
  }
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    auto json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_discarded() || !json.is_object() || !json.contains("text") ||
        !json["text"].is_string() || !json.contains("ids") ||
        !json["ids"].is_array()) {
      ADD_FAILURE() << path << ":" << line_number << ": malformed vector";
      continue;
    }
    Vector v;
    v.text = json["text"].get<std::string>();
    for (const auto& id : json["ids"]) v.ids.push_back(id.get<int32_t>());
    if (json.contains("decoded") && json["decoded"].is_string()) {
      v.has_decoded = true;
      v.decoded = json["decoded"].get<std::string>();
    }
    vectors.push_back(std::move(v));
  }
  return vectors;
}

}  // namespace tributary
