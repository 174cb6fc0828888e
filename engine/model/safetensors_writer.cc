#include "engine/model/safetensors_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

absl::Status IoError(const std::string& path, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat(path, ": cannot ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<size_t> sizes;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name \"", t.name, "\" is empty, reserved or repeated"));
    }
    uint64_t bytes = DTypeSizeBytes(t.dtype);
    for (int64_t extent : t.shape) {
      if (extent < 0 || (extent > 0 && bytes > std::numeric_limits<uint64_t>::max() /
                                                   static_cast<uint64_t>(extent))) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor \"", t.name, "\" has a bad shape"));
      }
      bytes *= static_cast<uint64_t>(extent);
    }
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes.push_back(static_cast<size_t>(bytes));
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) return IoError(temporary, "create");
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header_text.size() >> (8 * i));
  bool ok = std::fwrite(length, 1, 8, file) == 8 &&
            std::fwrite(header_text.data(), 1, header_text.size(), file) ==
                header_text.size();
  std::vector<uint8_t> buffer;
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    buffer.assign(sizes[i], 0);
    if (tensors[i].fill) tensors[i].fill(buffer.data(), buffer.size());
    ok = std::fwrite(buffer.data(), 1, buffer.size(), file) == buffer.size();
  }
  if (!ok) {
    absl::Status status = IoError(temporary, "write");
    std::fclose(file);
    std::remove(temporary.c_str());
    return status;
  }
  if (std::fclose(file) != 0) {
    absl::Status status = IoError(temporary, "close");
    std::remove(temporary.c_str());
    return status;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    absl::Status status = IoError(path, "rename into place");
    std::remove(temporary.c_str());
    return status;
  }
  return absl::OkStatus();
}

}  // namespace tributary
