// Parsing and validation of a safetensors file's header, on raw bytes.
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte
// little-endian unsigned header length N, N bytes of UTF-8 JSON (starting
// with '{', possibly padded with trailing spaces), then the data section.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin,
// end]} with offsets relative to the data section, plus an optional
// "__metadata__" object of string -> string.
//
// Nothing in the header is trusted. ParseSafetensorsHeader enforces what the
// reference library enforces, and a little more:
//   - N > 0, N <= kMaxSafetensorsHeaderBytes (100 MB, the reference
//     library's MAX_HEADER_SIZE), and 8 + N <= file size;
//   - the header starts with '{' and is one valid JSON object, no duplicate
//     keys anywhere (the reference library would silently keep one of them),
//     strings well-formed UTF-8;
//   - "__metadata__", when present and not null, is an object of strings;
//   - every other entry is an object with a known dtype, a shape of
//     non-negative integers (each <= INT64_MAX; the reference uses usize) and
//     data_offsets of exactly two non-negative integers begin <= end;
//     unknown extra fields in an entry are ignored, as the reference does;
//   - product(shape) * dtype size == end - begin, with every multiplication
//     checked for 64-bit overflow;
//   - sorted by offset, the tensors tile the data section exactly: the first
//     starts at 0, each starts where the previous ends (no overlap, no gap),
//     and the last ends at the end of the file (no trailing bytes).
// Zero-element tensors (some dimension 0, begin == end) are valid.
//
// The parser only reads `file_bytes`; it is safe on arbitrary input (it is
// the target of tests/fuzz/safetensors_header_fuzzer.cc).
#ifndef TRIBUTARY_ENGINE_MODEL_SAFETENSORS_HEADER_H_
#define TRIBUTARY_ENGINE_MODEL_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/dtype.h"

namespace tributary {

// The reference library's cap on the JSON header (100 MB). A 27B checkpoint
// shard's header is well under 100 KB; the cap only bounds the memory a
// hostile file can make the parser allocate.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Bytes before the JSON header: its little-endian uint64 length.
inline constexpr uint64_t kSafetensorsLengthPrefixBytes = 8;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  // Byte range [data_begin, data_end) relative to the start of the data
  // section (that is, to file offset data_section_offset_bytes).
  uint64_t data_begin = 0;
  uint64_t data_end = 0;

  uint64_t size_bytes() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
  // Length N of the JSON text, as stored in the first 8 bytes.
  uint64_t header_size_bytes = 0;
  // File offset of the data section: 8 + N.
  uint64_t data_section_offset_bytes = 0;
  // Size of the data section: file size - 8 - N.
  uint64_t data_section_size_bytes = 0;
  // Sorted by data_begin (ties, which only zero-byte tensors can produce,
  // by name).
  std::vector<SafetensorsTensorInfo> tensors;
  // "__metadata__" (e.g. {"format": "pt"}); empty when absent.
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of the safetensors file whose complete
// contents are `file_bytes`. `source` (the file name) prefixes errors, which
// are INVALID_ARGUMENT and name the offending tensor, field and value.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view file_bytes, absl::string_view source);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_SAFETENSORS_HEADER_H_
