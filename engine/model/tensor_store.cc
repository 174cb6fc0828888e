#include "engine/model/tensor_store.h"

#include <sys/stat.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/model/safetensors_index.h"

namespace tributary {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::StatusOr<TensorStore> TensorStore::OpenDirectory(const std::string& dir) {
  const std::string single = JoinPath(dir, kSafetensorsFileName);
  const std::string index = JoinPath(dir, kSafetensorsIndexFileName);
  if (IsRegularFile(single)) {
    ASSIGN_OR_RETURN(TensorStore store, OpenFile(single));
    if (IsRegularFile(index)) {
      store.warnings_.push_back(absl::StrCat(
          index, " ignored: ", kSafetensorsFileName,
          " is present and takes precedence (as in transformers)"));
    }
    return store;
  }
  if (IsRegularFile(index)) return OpenIndex(index);
  return absl::NotFoundError(absl::StrCat(dir, ": neither ",
                                          kSafetensorsFileName, " nor ",
                                          kSafetensorsIndexFileName,
                                          " found"));
}

absl::StatusOr<TensorStore> TensorStore::OpenFile(const std::string& path) {
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  TensorStore store;
  RETURN_IF_ERROR(store.AddFile(std::move(file)));
  return store;
}

absl::StatusOr<TensorStore> TensorStore::OpenIndex(
    const std::string& index_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  ASSIGN_OR_RETURN(SafetensorsIndex index,
                   ParseSafetensorsIndex(text, index_path));
  const std::string dir = DirName(index_path);
  const std::vector<std::string> shard_names = index.ShardFileNames();

  TensorStore store;
  store.files_.reserve(shard_names.size());
  for (const std::string& shard_name : shard_names) {
    const std::string shard_path = JoinPath(dir, shard_name);
    absl::StatusOr<SafetensorsFile> shard = SafetensorsFile::Open(shard_path);
    if (!shard.ok()) {
      return absl::Status(
          shard.status().code(),
          absl::StrCat(index_path, ": shard \"", shard_name,
                       "\" named in weight_map: ", shard.status().message()));
    }
    RETURN_IF_ERROR(store.AddFile(*std::move(shard)));
  }

  // Every tensor of the weight map must be where the index says.
  for (const auto& [tensor, shard_name] : index.weight_map) {
    auto it = store.file_of_.find(tensor);
    const std::string expected_path = JoinPath(dir, shard_name);
    if (it == store.file_of_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map puts tensor \"", tensor,
                       "\" in \"", shard_name, "\", which does not hold it"));
    }
    const std::string& actual_path = store.files_[it->second].path();
    if (actual_path != expected_path) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_path, ": weight_map puts tensor \"", tensor, "\" in \"",
          shard_name, "\", but it is in ", actual_path));
    }
  }
  // And the other way round: tolerated, as transformers does.
  size_t num_unlisted = 0;
  for (const auto& [tensor, file_index] : store.file_of_) {
    if (index.weight_map.count(tensor) == 0) {
      ++num_unlisted;
      if (num_unlisted <= 10) {
        store.warnings_.push_back(
            absl::StrCat(store.files_[file_index].path(), ": tensor \"",
                         tensor, "\" is not listed in ", index_path,
                         " (loaded anyway)"));
      }
    }
  }
  if (num_unlisted > 10) {
    store.warnings_.push_back(absl::StrCat(num_unlisted - 10,
                                           " more tensors not listed in ",
                                           index_path));
  }
  return store;
}

absl::Status TensorStore::AddFile(SafetensorsFile file) {
  for (const TensorView& view : file.tensors()) {
    auto it = file_of_.find(view.name);
    if (it != file_of_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", view.name, "\" appears in both ",
                       files_[it->second].path(), " and ", file.path()));
    }
  }
  const size_t file_index = files_.size();
  files_.push_back(std::move(file));
  for (const TensorView& view : files_.back().tensors()) {
    by_name_.emplace(view.name, &view);
    file_of_.emplace(view.name, file_index);
  }
  return absl::OkStatus();
}

const TensorView* TensorStore::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::string_view TensorStore::FilePathOf(absl::string_view name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) return "";
  return files_[it->second].path();
}

uint64_t TensorStore::total_file_bytes() const {
  uint64_t total = 0;
  for (const SafetensorsFile& file : files_) total += file.file_size_bytes();
  return total;
}

}  // namespace tributary
