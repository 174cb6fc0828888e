// libFuzzer target: a request of either API as the service handles it, an
// OpenAI body (HTTP) or a serialized GenerateRequest (gRPC); the properties
// and the input's layout are in request_properties.h.
// Seeds: tests/fuzz/corpus/request/ (the gRPC ones made by protoc --encode
// from text protos, with the selector byte '2' in front).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/request_properties.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tributary::RequestProperties* properties = [] {
    // A gRPC request with a string that is not UTF-8 does not parse, and
    // protobuf logs each such refusal: millions of lines.
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    auto p = tributary::RequestProperties::Create(
        std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare");
    if (!p.ok()) {
      std::cerr << "request_fuzzer: " << p.status() << "\n";
      std::abort();
    }
    return p->release();
  }();
  const std::string broken = properties->Check(data, size);
  if (!broken.empty()) {
    std::cerr << "request_fuzzer: " << broken << "\n";
    std::abort();
  }
  return 0;
}
