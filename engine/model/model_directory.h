// A Hugging Face model directory, loaded: config, generation defaults, stop
// tokens, the mapped checkpoint and the resolved decoder weights.
#ifndef TRIBUTARY_ENGINE_MODEL_MODEL_DIRECTORY_H_
#define TRIBUTARY_ENGINE_MODEL_MODEL_DIRECTORY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/stop_tokens.h"
#include "engine/model/tensor_store.h"

namespace tributary {

// Move-only. The weights' views point into the store's mappings, which move
// with the object. Loading reads the JSON files and the safetensors headers
// only: weight pages are faulted in by whoever first reads them. Const
// methods are safe to call concurrently.
class ModelDirectory {
 public:
  // Loads `dir`:
  //   config.json                    required (LoadModelConfig)
  //   generation_config.json         optional
  //   tokenizer_config.json          optional, only "eos_token" is read, and
  //                                  only when no eos id is found before it
  //   model.safetensors, or model.safetensors.index.json and its shards
  // then ResolveModelWeights. Errors name the file; a stop token id outside
  // [0, vocab_size) is an error.
  static absl::StatusOr<ModelDirectory> Load(const std::string& dir);

  // A synthetic model (synthetic_model.h): the preset's config and weights
  // without data (SyntheticModelWeights; bf16, f32 for "tiny"), no files, no stop tokens (it stops
  // on length), dir() "synthetic:<preset>". The decoder fills the weights
  // with random values (WeightLoadOptions::random_seed).
  static absl::StatusOr<ModelDirectory> Synthetic(const std::string& preset);

  ModelDirectory(ModelDirectory&&) = default;
  ModelDirectory& operator=(ModelDirectory&&) = default;

  const std::string& dir() const { return dir_; }
  // True for ModelDirectory::Synthetic: the weights have no data.
  bool synthetic() const { return synthetic_; }
  const ModelConfig& config() const { return config_; }
  // nullopt when the directory has no generation_config.json.
  const std::optional<GenerationConfig>& generation_config() const {
    return generation_config_;
  }
  const StopTokens& stop_tokens() const { return stop_tokens_; }
  const TensorStore& tensors() const { return store_; }
  const ModelWeights& weights() const { return weights_; }
  // The store's and the weights' warnings, for the caller to log.
  std::vector<std::string> warnings() const;

 private:
  ModelDirectory(std::string dir, ModelConfig config,
                 std::optional<GenerationConfig> generation_config,
                 StopTokens stop_tokens, TensorStore store,
                 ModelWeights weights);

  std::string dir_;
  ModelConfig config_;
  std::optional<GenerationConfig> generation_config_;
  StopTokens stop_tokens_;
  TensorStore store_;
  ModelWeights weights_;
  bool synthetic_ = false;
};

// The same as ModelDirectory::Load.
inline absl::StatusOr<ModelDirectory> LoadModel(const std::string& dir) {
  return ModelDirectory::Load(dir);
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_MODEL_DIRECTORY_H_
