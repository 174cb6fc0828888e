// Writes a safetensors file that SafetensorsFile reads back: the header (JSON,
// padded with spaces to a multiple of 8 bytes so that the data section is
// aligned), then each tensor's bytes, contiguous, in the order given. The
// file is written under a temporary name and renamed into place, so a
// reader never sees half a file.
//
// Tensor bytes come from a callback, so that a large checkpoint is produced
// tensor by tensor without holding it in memory.
#ifndef TRIBUTARY_ENGINE_MODEL_SAFETENSORS_WRITER_H_
#define TRIBUTARY_ENGINE_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/dtype.h"

namespace tributary {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Fills `size_bytes` bytes (shape × dtype size) at `dst`.
  std::function<void(uint8_t* dst, size_t size_bytes)> fill;
};

// Errors: duplicate or empty names, negative dimensions, sizes that
// overflow, I/O failures (naming the path).
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_SAFETENSORS_WRITER_H_
