// A read-only memory map of a whole file. The bytes stay valid for the
// lifetime of the MappedFile (move-only). Mapping makes no copy: pages are
// read from the page cache on first touch.
#ifndef TRIBUTARY_BASE_MAPPED_FILE_H_
#define TRIBUTARY_BASE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

class MappedFile {
 public:
  // Maps `path` read-only. Errors (NOT_FOUND, PERMISSION_DENIED, ...) name
  // the path and the reason. An empty file maps to an empty view.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }
  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(data_), size_bytes_);
  }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}
  void Release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
};

// Reads a whole (small) file into a string, e.g. a JSON config.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace tributary

#endif  // TRIBUTARY_BASE_MAPPED_FILE_H_
