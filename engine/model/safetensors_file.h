// One memory-mapped, validated .safetensors file.
#ifndef TRIBUTARY_ENGINE_MODEL_SAFETENSORS_FILE_H_
#define TRIBUTARY_ENGINE_MODEL_SAFETENSORS_FILE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mapped_file.h"
#include "engine/model/safetensors_header.h"
#include "engine/model/tensor_view.h"

namespace tributary {

// Opening maps the file read-only (MappedFile: no copy, pages come from the
// page cache on first touch) and validates the header with
// ParseSafetensorsHeader; only the header pages are read. Move-only; the
// TensorViews point into the mapping and stay valid for the object's
// lifetime, including across moves. Thread-compatible; const methods are
// safe to call concurrently.
class SafetensorsFile {
 public:
  // Errors name the path: NOT_FOUND / PERMISSION_DENIED from the mapping,
  // INVALID_ARGUMENT for a malformed file.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) = default;
  SafetensorsFile& operator=(SafetensorsFile&&) = default;

  const std::string& path() const { return file_.path(); }
  size_t file_size_bytes() const { return file_.size_bytes(); }
  const SafetensorsHeader& header() const { return header_; }
  const std::map<std::string, std::string>& metadata() const {
    return header_.metadata;
  }

  // All tensors, in file (offset) order.
  const std::vector<TensorView>& tensors() const { return views_; }

  // The tensor named `name`, or nullptr. O(log n).
  const TensorView* Find(absl::string_view name) const;

 private:
  SafetensorsFile(MappedFile file, SafetensorsHeader header);

  MappedFile file_;
  SafetensorsHeader header_;
  std::vector<TensorView> views_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> views_ index
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_SAFETENSORS_FILE_H_
