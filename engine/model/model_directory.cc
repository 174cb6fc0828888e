#include "engine/model/model_directory.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/model/synthetic_model.h"

namespace tributary {
namespace {

std::string JoinPath(const std::string& dir, absl::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

ModelDirectory::ModelDirectory(std::string dir, ModelConfig config,
                               std::optional<GenerationConfig> generation_config,
                               StopTokens stop_tokens, TensorStore store,
                               ModelWeights weights)
    : dir_(std::move(dir)),
      config_(std::move(config)),
      generation_config_(std::move(generation_config)),
      stop_tokens_(std::move(stop_tokens)),
      store_(std::move(store)),
      weights_(std::move(weights)) {}

absl::StatusOr<ModelDirectory> ModelDirectory::Synthetic(
    const std::string& preset) {
  ASSIGN_OR_RETURN(ModelConfig config, SyntheticModelConfig(preset));
  // The test preset keeps f32 weights, so that backends computing in f32
  // run the very same model; the published shapes are bf16, as released.
  ModelWeights weights = SyntheticModelWeights(
      config, preset == "tiny" ? DType::kF32 : DType::kBF16);
  ModelDirectory model(absl::StrCat("synthetic:", preset), std::move(config),
                       std::nullopt, StopTokens{}, TensorStore::Empty(),
                       std::move(weights));
  model.synthetic_ = true;
  return model;
}

absl::StatusOr<ModelDirectory> ModelDirectory::Load(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (does not exist or is not "
                          "a directory)"));
  }
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));

  std::optional<GenerationConfig> generation_config;
  const std::string generation_path = JoinPath(dir, "generation_config.json");
  if (IsRegularFile(generation_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(generation_path));
    ASSIGN_OR_RETURN(generation_config,
                     ParseGenerationConfig(text, generation_path));
  }

  std::optional<std::string> tokenizer_eos;
  const bool have_ids =
      (generation_config.has_value() &&
       !generation_config->eos_token_ids.empty()) ||
      !config.eos_token_ids.empty();
  const std::string tokenizer_path = JoinPath(dir, "tokenizer_config.json");
  if (!have_ids && IsRegularFile(tokenizer_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(tokenizer_path));
    ASSIGN_OR_RETURN(tokenizer_eos,
                     ParseTokenizerConfigEosToken(text, tokenizer_path));
  }
  StopTokens stop = ResolveStopTokens(
      generation_config.has_value() ? &*generation_config : nullptr, config,
      tokenizer_eos);
  for (int64_t id : stop.token_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          JoinPath(dir, StopTokenSourceName(stop.source)),
          ": eos_token_id ", id, " is outside [0, vocab_size = ",
          config.vocab_size, ")"));
    }
  }

  ASSIGN_OR_RETURN(TensorStore store, TensorStore::OpenDirectory(dir));
  absl::StatusOr<ModelWeights> weights = ResolveModelWeights(config, store);
  if (!weights.ok()) {
    return absl::Status(weights.status().code(),
                        absl::StrCat(dir, ": ", weights.status().message()));
  }
  return ModelDirectory(dir, std::move(config), std::move(generation_config),
                        std::move(stop), std::move(store), *std::move(weights));
}

std::vector<std::string> ModelDirectory::warnings() const {
  std::vector<std::string> all = store_.warnings();
  all.insert(all.end(), weights_.warnings.begin(), weights_.warnings.end());
  return all;
}

}  // namespace tributary
