#include "engine/model/model_locator.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tributary {

std::vector<std::string> DefaultModelDirectories() {
  return {TRIBUTARY_INSTALLED_MODEL_DIR, TRIBUTARY_SOURCE_MODEL_DIR};
}

ModelSearch MakeModelSearch(std::optional<std::string> flag,
                            const char* environment) {
  ModelSearch search;
  search.flag = std::move(flag);
  if (environment != nullptr) search.environment = environment;
  search.defaults = DefaultModelDirectories();
  return search;
}

absl::StatusOr<std::string> LocateModelDirectory(const ModelSearch& search) {
  if (search.flag && !search.flag->empty()) return *search.flag;
  if (search.environment && !search.environment->empty()) {
    return *search.environment;
  }
  for (const std::string& dir : search.defaults) {
    struct stat st;
    if (::stat((dir + "/config.json").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      return dir;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no model: pass --model DIR or set TRIBUTARY_MODEL (looked in ",
      absl::StrJoin(search.defaults, ", "), ")"));
}

absl::StatusOr<ModelDirectory> OpenModel(
    const std::optional<std::string>& synthetic, const ModelSearch& search) {
  if (synthetic) {
    if (search.flag) {
      return absl::InvalidArgumentError(
          "give --model DIR or --synthetic PRESET, not both");
    }
    return ModelDirectory::Synthetic(*synthetic);
  }
  absl::StatusOr<std::string> dir = LocateModelDirectory(search);
  if (!dir.ok()) return dir.status();
  return ModelDirectory::Load(*dir);
}

}  // namespace tributary
