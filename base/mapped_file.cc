#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace {

absl::Status ErrnoStatus(int err, const std::string& path,
                         absl::string_view what) {
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  size_t size_bytes = static_cast<size_t>(st.st_size);
  if (size_bytes == 0) {
    ::close(fd);
    return MappedFile(path, nullptr, 0);
  }
  void* data = ::mmap(nullptr, size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // The mapping keeps its own reference to the file.
  if (data == MAP_FAILED) return ErrnoStatus(err, path, "cannot mmap");
  return MappedFile(path, static_cast<const uint8_t*>(data), size_bytes);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Release(); }

void MappedFile::Release() {
  if (data_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
    data_ = nullptr;
    size_bytes_ = 0;
  }
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, path, "cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return ErrnoStatus(errno, path, "cannot read");
  return buffer.str();
}

}  // namespace tributary
