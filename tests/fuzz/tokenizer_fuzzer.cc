// libFuzzer target: the tokenizer's properties (tokenizer_properties.h) on
// any input. The tokenizer is $TRIBUTARY_FUZZ_TOKENIZER (a tokenizer.json
// or its directory), else the default model's. Seeds:
// tests/fuzz/corpus/tokenizer/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/tokenizer_properties.h"

namespace {
std::unique_ptr<tributary::Tokenizer> tokenizer;
std::unique_ptr<tributary::TokenizerProperties> properties;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("TRIBUTARY_FUZZ_TOKENIZER");
  const std::string path =
      env != nullptr ? env
                     : std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare";
  auto loaded = tributary::Tokenizer::Load(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tokenizer_fuzzer: %s\n", loaded.status().ToString().c_str());
    std::abort();
  }
  tokenizer = std::move(*loaded);
  properties = std::make_unique<tributary::TokenizerProperties>(*tokenizer);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string broken = properties->Check(data, size);
  if (!broken.empty()) {
    std::fprintf(stderr, "tokenizer property broken: %s\n", broken.c_str());
    std::abort();
  }
  return 0;
}
