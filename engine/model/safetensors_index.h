// model.safetensors.index.json: which shard file holds each tensor.
#ifndef TRIBUTARY_ENGINE_MODEL_SAFETENSORS_INDEX_H_
#define TRIBUTARY_ENGINE_MODEL_SAFETENSORS_INDEX_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

struct SafetensorsIndex {
  // Tensor name -> shard file name (relative to the index's directory).
  std::map<std::string, std::string> weight_map;
  // metadata.total_size when present (informational; transformers writes the
  // sum of tensor bytes, and it is not checked).
  std::optional<uint64_t> total_size_bytes;

  // The distinct shard file names, sorted.
  std::vector<std::string> ShardFileNames() const;
};

// Parses an index file's text. Requires a "weight_map" object whose values
// are plain file names: non-empty, no '/' or '\\', not "." or ".." (an index
// must not point outside its directory). Duplicate keys are rejected.
// Errors are INVALID_ARGUMENT and start with `source`.
absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(
    absl::string_view text, absl::string_view source);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_SAFETENSORS_INDEX_H_
