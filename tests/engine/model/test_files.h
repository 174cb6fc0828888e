// Test helpers: temporary directories and safetensors files written byte by
// byte, so that tests can build valid files and corrupt them at will.
#ifndef TRIBUTARY_TESTS_ENGINE_MODEL_TEST_FILES_H_
#define TRIBUTARY_TESTS_ENGINE_MODEL_TEST_FILES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tributary::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(absl::string_view name) const;

 private:
  std::string path_;
};

// Writes `bytes` to `path`, replacing it; aborts the test on failure.
void WriteBytes(const std::string& path, absl::string_view bytes);

// The 8-byte little-endian encoding of `value`.
std::string Le64(uint64_t value);

// Length prefix + header + data: no validation, any header text.
std::string RawSafetensors(absl::string_view header, absl::string_view data);

struct TestTensor {
  std::string name;
  std::string dtype;  // Safetensors name, e.g. "BF16".
  std::vector<int64_t> shape;
  // Bytes; when empty, filled with a deterministic pattern of the size the
  // dtype and shape imply (see PatternBytes).
  std::string bytes;
};

// Bytes 0..n-1 with value (i * 7 + seed) % 251.
std::string PatternBytes(size_t n, uint8_t seed);

size_t TestDTypeSize(absl::string_view dtype);

// A valid file: tensors laid out contiguously in the given order, header
// padded with spaces to a multiple of 8 bytes, optional __metadata__.
std::string BuildSafetensors(
    const std::vector<TestTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

// The header JSON BuildSafetensors would write (no padding).
std::string SafetensorsHeaderJson(
    const std::vector<TestTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

// A tiny Qwen3.5 decoder: vocab 32, hidden 8, intermediate 16, 4 layers
// (3 GDN + 1 attention at index 3), 2 query heads / 1 KV head x head_dim 8,
// partial rotary 0.5, GDN 1 key head / 2 value heads x 4, kernel 4.
struct TinyModelOptions {
  bool nested = true;      // model_type qwen3_5 (else qwen3_5_text).
  bool tied = false;       // tie_word_embeddings.
  bool write_lm_head = true;
  bool add_vision_and_mtp = false;
};

std::string TinyConfigJson(const TinyModelOptions& options);
// Every tensor of the tiny model (shapes written out literally, not derived
// from the loader's own code), plus vision/MTP tensors when asked.
std::vector<TestTensor> TinyModelTensors(const TinyModelOptions& options);

// Writes config.json and model.safetensors of the tiny model into `dir`.
void WriteTinyModel(const std::string& dir, const TinyModelOptions& options);

}  // namespace tributary::testing

#endif  // TRIBUTARY_TESTS_ENGINE_MODEL_TEST_FILES_H_
