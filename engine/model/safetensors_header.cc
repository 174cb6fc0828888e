#include "engine/model/safetensors_header.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "engine/model/json_field_reader.h"
#include "engine/model/strict_json.h"

namespace tributary {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kMetadataKey = "__metadata__";
// Header objects nest three levels deep (root, entry, shape); allow a little
// slack, refuse anything deeper before building it.
constexpr int kMaxHeaderJsonDepth = 8;

absl::Status Invalid(absl::string_view source, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
}

uint64_t ReadLittleEndian64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A non-negative JSON integer that fits in int64.
bool AsNonNegativeInt64(const Json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

absl::Status ParseMetadata(const Json& value, absl::string_view source,
                           SafetensorsHeader* header) {
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) {
    return Invalid(source, absl::StrCat("__metadata__ is ", JsonTypeName(value),
                                        ", expected an object of strings"));
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return Invalid(source, absl::StrCat("__metadata__ value for key \"", key,
                                          "\" is ", JsonTypeName(item), " (",
                                          JsonExcerpt(item),
                                          "), expected a string"));
    }
    header->metadata.emplace(key, item.get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsTensorInfo> ParseEntry(const std::string& name,
                                                 const Json& entry,
                                                 absl::string_view source) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!entry.is_object()) {
    return Invalid(source, absl::StrCat(where, ": entry is ",
                                        JsonTypeName(entry),
                                        ", expected an object"));
  }
  SafetensorsTensorInfo info;
  info.name = name;

  // dtype
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) {
    return Invalid(source, absl::StrCat(where, ": missing \"dtype\""));
  }
  if (!dtype_it->is_string()) {
    return Invalid(source, absl::StrCat(where, ": dtype is ",
                                        JsonTypeName(*dtype_it), " (",
                                        JsonExcerpt(*dtype_it),
                                        "), expected a string"));
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  std::optional<DType> dtype = ParseDType(dtype_name);
  if (!dtype.has_value()) {
    return Invalid(source, absl::StrCat(where, ": unknown dtype ",
                                        JsonExcerpt(*dtype_it)));
  }
  info.dtype = *dtype;

  // shape
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) {
    return Invalid(source, absl::StrCat(where, ": missing \"shape\""));
  }
  if (!shape_it->is_array()) {
    return Invalid(source, absl::StrCat(where, ": shape is ",
                                        JsonTypeName(*shape_it), " (",
                                        JsonExcerpt(*shape_it),
                                        "), expected a list of integers"));
  }
  uint64_t num_elements = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const Json& dim = (*shape_it)[i];
    int64_t extent = 0;
    if (!AsNonNegativeInt64(dim, &extent)) {
      return Invalid(source,
                     absl::StrCat(where, ": shape[", i, "] = ", JsonExcerpt(dim),
                                  " is not a non-negative integer <= 2^63-1"));
    }
    info.shape.push_back(extent);
    uint64_t product = 0;
    if (__builtin_mul_overflow(num_elements, static_cast<uint64_t>(extent),
                               &product)) {
      overflow = true;
    }
    num_elements = product;
  }

  // data_offsets
  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) {
    return Invalid(source, absl::StrCat(where, ": missing \"data_offsets\""));
  }
  int64_t begin = 0;
  int64_t end = 0;
  if (!offsets_it->is_array() || offsets_it->size() != 2 ||
      !AsNonNegativeInt64((*offsets_it)[0], &begin) ||
      !AsNonNegativeInt64((*offsets_it)[1], &end)) {
    return Invalid(source,
                   absl::StrCat(where, ": data_offsets = ", JsonExcerpt(*offsets_it),
                                ", expected [begin, end] of two non-negative "
                                "integers"));
  }
  if (begin > end) {
    return Invalid(source, absl::StrCat(where, ": data_offsets [", begin, ", ",
                                        end, "] has begin > end"));
  }
  info.data_begin = static_cast<uint64_t>(begin);
  info.data_end = static_cast<uint64_t>(end);

  // Size agreement, overflow-checked (a zero dimension makes any product 0,
  // but the reference library multiplies left to right and so do we: an
  // overflowing prefix is rejected even if a later dimension is 0).
  uint64_t expected_bytes = 0;
  if (overflow || __builtin_mul_overflow(num_elements,
                                         static_cast<uint64_t>(DTypeSizeBytes(
                                             info.dtype)),
                                         &expected_bytes)) {
    return Invalid(source,
                   absl::StrCat(where, ": shape ", ShapeString(info.shape),
                                " of ", DTypeName(info.dtype),
                                " overflows 64-bit byte arithmetic"));
  }
  if (expected_bytes != info.size_bytes()) {
    return Invalid(
        source,
        absl::StrCat(where, ": data_offsets [", begin, ", ", end, "] span ",
                     info.size_bytes(), " bytes but shape ",
                     ShapeString(info.shape), " of ", DTypeName(info.dtype),
                     " (", DTypeSizeBytes(info.dtype), " bytes each) needs ",
                     expected_bytes));
  }
  return info;
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view file_bytes, absl::string_view source) {
  const uint64_t file_size = file_bytes.size();
  if (file_size == 0) return Invalid(source, "file is empty");
  if (file_size < kSafetensorsLengthPrefixBytes) {
    return Invalid(source,
                   absl::StrCat("file is ", file_size,
                                " bytes, shorter than the 8-byte header "
                                "length prefix"));
  }
  SafetensorsHeader header;
  header.header_size_bytes = ReadLittleEndian64(
      reinterpret_cast<const unsigned char*>(file_bytes.data()));
  const uint64_t n = header.header_size_bytes;
  if (n == 0) return Invalid(source, "header length is 0");
  if (n > kMaxSafetensorsHeaderBytes) {
    return Invalid(source, absl::StrCat("header length ", n,
                                        " exceeds the maximum of ",
                                        kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (n > file_size - kSafetensorsLengthPrefixBytes) {
    return Invalid(source,
                   absl::StrCat("header length ", n,
                                " runs past the end of the file (", file_size,
                                " bytes, ", file_size - 8,
                                " after the length prefix)"));
  }
  header.data_section_offset_bytes = kSafetensorsLengthPrefixBytes + n;
  header.data_section_size_bytes = file_size - header.data_section_offset_bytes;

  absl::string_view text = file_bytes.substr(kSafetensorsLengthPrefixBytes, n);
  if (text[0] != '{') {
    return Invalid(source, absl::StrCat("header does not start with '{' (first "
                                        "byte 0x",
                                        absl::Hex(static_cast<unsigned char>(
                                            text[0])),
                                        ")"));
  }
  ASSIGN_OR_RETURN(Json root, ParseStrictJson(text, absl::StrCat(source, ": header"),
                                              kMaxHeaderJsonDepth));
  if (!root.is_object()) {
    return Invalid(source, absl::StrCat("header is ", JsonTypeName(root),
                                        ", expected a JSON object"));
  }

  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      RETURN_IF_ERROR(ParseMetadata(value, source, &header));
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsTensorInfo info, ParseEntry(key, value, source));
    if (info.data_end > header.data_section_size_bytes) {
      return Invalid(
          source, absl::StrCat("tensor \"", key, "\": data_offsets [",
                               info.data_begin, ", ", info.data_end,
                               "] run past the end of the data section (",
                               header.data_section_size_bytes, " bytes)"));
    }
    header.tensors.push_back(std::move(info));
  }

  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              return std::tie(a.data_begin, a.data_end, a.name) <
                     std::tie(b.data_begin, b.data_end, b.name);
            });
  uint64_t expected_begin = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& info : header.tensors) {
    if (info.data_begin < expected_begin) {
      return Invalid(source,
                     absl::StrCat("tensor \"", info.name, "\" bytes [",
                                  info.data_begin, ", ", info.data_end,
                                  ") overlap tensor \"", previous->name,
                                  "\" bytes [", previous->data_begin, ", ",
                                  previous->data_end, ")"));
    }
    if (info.data_begin > expected_begin) {
      return Invalid(source,
                     absl::StrCat("gap of ", info.data_begin - expected_begin,
                                  " unused bytes before tensor \"", info.name,
                                  "\" (data_offsets begin ", info.data_begin,
                                  ", expected ", expected_begin, ")"));
    }
    expected_begin = info.data_end;
    previous = &info;
  }
  if (expected_begin != header.data_section_size_bytes) {
    return Invalid(source,
                   absl::StrCat(header.data_section_size_bytes - expected_begin,
                                " trailing bytes after the last tensor (data "
                                "section is ",
                                header.data_section_size_bytes,
                                " bytes, tensors cover ", expected_begin, ")"));
  }
  return header;
}

}  // namespace tributary
