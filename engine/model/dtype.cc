#include "engine/model/dtype.h"

namespace tributary {
namespace {

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  size_t size_bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 1},    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},        {DType::kU16, "U16", 2},
    {DType::kI16, "I16", 2},      {DType::kU32, "U32", 4},
    {DType::kI32, "I32", 4},      {DType::kU64, "U64", 8},
    {DType::kI64, "I64", 8},      {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},    {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},      {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E5M2, "F8_E5M2", 1},
};

const DTypeInfo& Info(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[0];  // Unreachable: every enumerator is in the table.
}

}  // namespace

absl::string_view DTypeName(DType dtype) { return Info(dtype).name; }

size_t DTypeSizeBytes(DType dtype) { return Info(dtype).size_bytes; }

std::optional<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloatWeightDType(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

}  // namespace tributary
