#include "engine/model/safetensors_index.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model/strict_json.h"

namespace tributary {

std::vector<std::string> SafetensorsIndex::ShardFileNames() const {
  std::set<std::string> names;
  for (const auto& [tensor, file] : weight_map) names.insert(file);
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(
    absl::string_view text, absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root, ParseStrictJsonObject(text, source));
  SafetensorsIndex index;
  auto metadata = root.find("metadata");
  if (metadata != root.end() && metadata->is_object()) {
    auto total = metadata->find("total_size");
    if (total != metadata->end() && total->is_number_unsigned()) {
      index.total_size_bytes = total->get<uint64_t>();
    }
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": missing \"weight_map\""));
  }
  if (!weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": weight_map is ", JsonTypeName(*weight_map),
                     ", expected an object"));
  }
  for (const auto& [tensor, file] : weight_map->items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": weight_map[\"", tensor, "\"] is ",
                       JsonTypeName(file), ", expected a file name string"));
    }
    const std::string& name = file.get_ref<const std::string&>();
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of("/\\") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": weight_map[\"", tensor, "\"] = \"", name,
          "\" is not a plain file name in the model directory"));
    }
    index.weight_map.emplace(tensor, name);
  }
  return index;
}

}  // namespace tributary
