// Where the model directory comes from (design.md §5): `--model DIR`, else
// $TRIBUTARY_MODEL, else the installed default model, else
// models/tiny-shakespeare in the source tree. Flags and the environment are
// read by `main`; this only applies the precedence.
#ifndef TRIBUTARY_ENGINE_MODEL_MODEL_LOCATOR_H_
#define TRIBUTARY_ENGINE_MODEL_MODEL_LOCATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_directory.h"

namespace tributary {

struct ModelSearch {
  std::optional<std::string> flag;         // --model, used as given
  std::optional<std::string> environment;  // $TRIBUTARY_MODEL, used as given
  // Tried in order when neither is set; the first holding a config.json wins.
  std::vector<std::string> defaults;
};

// The installed default model, then the source tree's (paths fixed at build
// time).
std::vector<std::string> DefaultModelDirectories();

// The search of every tool and the server: `flag` (--model, if given),
// `environment` ($TRIBUTARY_MODEL as read by main; null if unset), then
// DefaultModelDirectories().
ModelSearch MakeModelSearch(std::optional<std::string> flag,
                            const char* environment);

// The chosen directory, or NOT_FOUND listing where it looked. An explicit
// flag or environment value is returned even if it is not a model directory
// (loading it then names the problem).
absl::StatusOr<std::string> LocateModelDirectory(const ModelSearch& search);

// The model of a tool or the server: the synthetic model `synthetic`
// (--synthetic PRESET, ModelDirectory::Synthetic) when set, else the
// directory `search` finds, loaded. INVALID_ARGUMENT when both --synthetic
// and --model are given.
absl::StatusOr<ModelDirectory> OpenModel(
    const std::optional<std::string>& synthetic, const ModelSearch& search);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_MODEL_LOCATOR_H_
