// libFuzzer target: ParseSafetensorsHeader on raw bytes (a whole "file").
// Seeds: tests/fuzz/corpus/safetensors_header/. Run, e.g.:
//   build-fuzz/tests/fuzz/safetensors_header_fuzzer -max_total_time=180 \
//       -dict=tests/fuzz/safetensors.dict \
//       new_corpus/ tests/fuzz/corpus/safetensors_header/
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "engine/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = tributary::ParseSafetensorsHeader(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (header.ok()) {
    // Invariants a valid header must satisfy.
    uint64_t covered = 0;
    for (const auto& tensor : header->tensors) {
      if (tensor.data_begin != covered) __builtin_trap();
      covered = tensor.data_end;
    }
    if (covered != header->data_section_size_bytes) __builtin_trap();
    if (header->data_section_offset_bytes + header->data_section_size_bytes !=
        size) {
      __builtin_trap();
    }
  }
  return 0;
}
