#include "engine/backend/backend_options.h"

#include "absl/strings/str_cat.h"

namespace tributary {

const char* MatMulPrecisionName(MatMulPrecision precision) {
  return precision == MatMulPrecision::kBF16 ? "bf16" : "f32";
}

absl::StatusOr<MatMulPrecision> ParseMatMulPrecision(absl::string_view name) {
  if (name == "f32") return MatMulPrecision::kF32;
  if (name == "bf16") return MatMulPrecision::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("matmul precision \"", name, "\" is not one of f32, bf16"));
}

absl::Status CudaBackendOptions::Validate() const {
  if (device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device = ", device, " must be ≥ 0"));
  }
  if (max_graphs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_graphs = ", max_graphs, " must be ≥ 1"));
  }
  if (delta_rule_workspace_bytes == 0) {
    return absl::InvalidArgumentError("delta_rule_workspace_bytes must be > 0");
  }
  if (attention_run_keys < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention_run_keys = ", attention_run_keys, " must be ≥ 0"));
  }
  if (activation_type != ElementType::kBF16 &&
      activation_type != ElementType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("activation_type = ", ElementTypeName(activation_type),
                     " must be bf16 or f32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("backend \"", name, "\" is not one of cpu, cuda"));
}

const char* BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

}  // namespace tributary
