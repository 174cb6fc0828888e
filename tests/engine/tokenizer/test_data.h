// Test data shared by the tokenizer tests: paths (failing, never skipping,
// when ../shared is missing), the Qwen3 tokenizer loaded once per binary,
// and JSON Lines readers.
#ifndef TRIBUTARY_TESTS_ENGINE_TOKENIZER_TEST_DATA_H_
#define TRIBUTARY_TESTS_ENGINE_TOKENIZER_TEST_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace tributary {

// ../shared/data/tokenizers/qwen3 (TRIBUTARY_SHARED_DIR).
std::string Qwen3Dir();
// tests/engine/tokenizer/testdata.
std::string TestDataDir();
bool FileExists(const std::string& path);

// The Qwen3 / tiny Qwen3.5 tokenizers; ADD_FAILURE and nullptr when they
// cannot be loaded. Loaded once, shared by the tests of the binary.
const Tokenizer* Qwen3Tokenizer();
const Tokenizer* TinyQwen35Tokenizer();

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
  bool has_decoded = false;
  std::string decoded;
};
// Reads {"text":..., "ids":[...], ["decoded":...]} lines; ADD_FAILURE on a
// missing file or a malformed line.
std::vector<Vector> ReadVectors(const std::string& path);

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_TOKENIZER_TEST_DATA_H_
