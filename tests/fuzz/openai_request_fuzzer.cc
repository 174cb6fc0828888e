// libFuzzer target: an OpenAI API request body as the HTTP API handles it
// (the properties are in openai_request_properties.h).
// Seeds: tests/fuzz/corpus/openai_request/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "tests/fuzz/openai_request_properties.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tributary::OpenAiRequestProperties* properties = [] {
    auto p = tributary::OpenAiRequestProperties::Create(
        std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare");
    if (!p.ok()) {
      std::cerr << "openai_request_fuzzer: " << p.status() << "\n";
      std::abort();
    }
    return p->release();
  }();
  const std::string broken = properties->Check(data, size);
  if (!broken.empty()) {
    std::cerr << "openai_request_fuzzer: " << broken << "\n";
    std::abort();
  }
  return 0;
}
