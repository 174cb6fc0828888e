// Model configurations of the published Qwen3.5 text decoders (model-spec
// §0 and §1.3), for synthetic models: random weights of the real shapes,
// made directly on the backend (HybridDecoder's WeightLoadOptions), so that
// the engine and its benchmarks run without a checkpoint. "tiny" is a small
// model of the same structure for tests on the CPU.
#ifndef TRIBUTARY_ENGINE_MODEL_SYNTHETIC_MODEL_H_
#define TRIBUTARY_ENGINE_MODEL_SYNTHETIC_MODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"

namespace tributary {

// "qwen3.5-27b", "qwen3.5-9b", "qwen3.5-4b", "qwen3.5-2b", "qwen3.5-0.8b"
// or "tiny"; INVALID_ARGUMENT listing them otherwise. The config is
// validated (ValidateModelConfig).
absl::StatusOr<ModelConfig> SyntheticModelConfig(absl::string_view preset);

// The preset names, in the order above.
std::vector<std::string> SyntheticModelPresets();

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_SYNTHETIC_MODEL_H_
