// Element types of safetensors tensors.
//
// The safetensors format names its dtypes with short strings ("BF16",
// "F32", ...). The loader recognises every byte-sized dtype of the format so
// that a checkpoint carrying, e.g., an I64 buffer in an ignored vision tensor
// still opens; the decoder itself only consumes BF16, F16 and F32
// (IsFloatWeightDType), and F8_E4M3 projection matrices of FP8 block
// checkpoints, dequantized at load (model_weights.h, fp8.h). Sub-byte dtypes (F4, F6_*) are not supported and
// parse as unknown.
#ifndef TRIBUTARY_ENGINE_MODEL_DTYPE_H_
#define TRIBUTARY_ENGINE_MODEL_DTYPE_H_

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace tributary {

enum class DType {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,
  kF8E5M2,
};

// The safetensors name, e.g. "BF16".
absl::string_view DTypeName(DType dtype);

// Bytes per element (1 for BOOL and the F8 types).
size_t DTypeSizeBytes(DType dtype);

// Parses a safetensors dtype name (case-sensitive, as the format requires).
// Returns nullopt for names the loader does not know.
std::optional<DType> ParseDType(absl::string_view name);

// True for the dtypes the decoder consumes as weights: BF16, F16, F32.
bool IsFloatWeightDType(DType dtype);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_DTYPE_H_
