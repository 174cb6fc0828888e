#include "engine/model/safetensors_file.h"

#include <utility>

#include "base/status_macros.h"

namespace tributary {

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(SafetensorsHeader header,
                   ParseSafetensorsHeader(file.view(), path));
  return SafetensorsFile(std::move(file), std::move(header));
}

SafetensorsFile::SafetensorsFile(MappedFile file, SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  // The mapping's address does not change when MappedFile moves, so these
  // pointers survive moves of *this.
  const uint8_t* data_section = file_.data() + header_.data_section_offset_bytes;
  views_.reserve(header_.tensors.size());
  for (const SafetensorsTensorInfo& info : header_.tensors) {
    TensorView view;
    view.name = info.name;
    view.dtype = info.dtype;
    view.shape = info.shape;
    view.data = data_section + info.data_begin;
    view.size_bytes = static_cast<size_t>(info.size_bytes());
    index_.emplace(info.name, views_.size());
    views_.push_back(std::move(view));
  }
}

const TensorView* SafetensorsFile::Find(absl::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &views_[it->second];
}

}  // namespace tributary
