// All tensors of a checkpoint, single-file or sharded, by name.
#ifndef TRIBUTARY_ENGINE_MODEL_TENSOR_STORE_H_
#define TRIBUTARY_ENGINE_MODEL_TENSOR_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/safetensors_file.h"
#include "engine/model/tensor_view.h"

namespace tributary {

inline constexpr absl::string_view kSafetensorsFileName = "model.safetensors";
inline constexpr absl::string_view kSafetensorsIndexFileName =
    "model.safetensors.index.json";

// Owns the mapped files; views stay valid for its lifetime (and across
// moves). Move-only; const methods are safe to call concurrently.
//
// Sharded checkpoints follow transformers: each shard named in the index's
// weight_map is mapped once. Rules (errors name the file and tensor):
//   - a shard named by the index that cannot be opened: error;
//   - a tensor the index assigns to a shard that does not hold it: error;
//   - a tensor held by two files: error;
//   - a tensor a shard holds but the index does not list: kept (transformers
//     loads every tensor of every shard it opens) and reported in warnings().
// Shard files in the directory that the index does not name are not opened.
class TensorStore {
 public:
  // Opens `dir`/model.safetensors if present (transformers' order: the
  // single file wins; an index next to it is then ignored, with a warning),
  // else `dir`/model.safetensors.index.json and its shards. NOT_FOUND when
  // neither exists.
  static absl::StatusOr<TensorStore> OpenDirectory(const std::string& dir);
  // One file.
  static absl::StatusOr<TensorStore> OpenFile(const std::string& path);
  // An index file; shards are resolved relative to its directory.
  static absl::StatusOr<TensorStore> OpenIndex(const std::string& index_path);

  // A store with no files and no tensors (a synthetic model's).
  static TensorStore Empty() { return TensorStore(); }

  TensorStore(TensorStore&&) = default;
  TensorStore& operator=(TensorStore&&) = default;

  // The tensor named `name`, or nullptr.
  const TensorView* Find(absl::string_view name) const;
  // Every tensor, sorted by name.
  const std::map<std::string, const TensorView*, std::less<>>& tensors() const {
    return by_name_;
  }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The path of the file holding `name`, or "" when there is none.
  absl::string_view FilePathOf(absl::string_view name) const;
  // Sum of the mapped files' sizes.
  uint64_t total_file_bytes() const;
  // Non-fatal findings (see the class comment).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  TensorStore() = default;
  // Adds every tensor of `file` to the map; a name already present is an
  // error naming both files.
  absl::Status AddFile(SafetensorsFile file);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, const TensorView*, std::less<>> by_name_;
  std::map<std::string, size_t, std::less<>> file_of_;  // name -> files_ index
  std::vector<std::string> warnings_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_TENSOR_STORE_H_
