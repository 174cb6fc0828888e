#include "tests/engine/model/test_files.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace tributary::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                   "/tributary_model_test_XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::File(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

void WriteBytes(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string Le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  return bytes;
}

std::string RawSafetensors(absl::string_view header, absl::string_view data) {
  return absl::StrCat(Le64(header.size()), header, data);
}

std::string PatternBytes(size_t n, uint8_t seed) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<char>((i * 7 + seed) % 251);
  }
  return bytes;
}

size_t TestDTypeSize(absl::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "BF16" || dtype == "F16" || dtype == "I16" || dtype == "U16") {
    return 2;
  }
  return 1;
}

namespace {

size_t NumBytes(const TestTensor& t) {
  if (!t.bytes.empty()) return t.bytes.size();
  size_t n = TestDTypeSize(t.dtype);
  for (int64_t extent : t.shape) n *= static_cast<size_t>(extent);
  return n;
}

}  // namespace

std::string SafetensorsHeaderJson(
    const std::vector<TestTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> items;
    for (const auto& [key, value] : metadata) {
      items.push_back(absl::StrCat("\"", key, "\":\"", value, "\""));
    }
    entries.push_back(
        absl::StrCat("\"__metadata__\":{", absl::StrJoin(items, ","), "}"));
  }
  size_t offset = 0;
  for (const TestTensor& t : tensors) {
    size_t size = NumBytes(t);
    entries.push_back(absl::StrCat("\"", t.name, "\":{\"dtype\":\"", t.dtype,
                                   "\",\"shape\":[",
                                   absl::StrJoin(t.shape, ","),
                                   "],\"data_offsets\":[", offset, ",",
                                   offset + size, "]}"));
    offset += size;
  }
  return absl::StrCat("{", absl::StrJoin(entries, ","), "}");
}

std::string BuildSafetensors(
    const std::vector<TestTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::string header = SafetensorsHeaderJson(tensors, metadata);
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string data;
  uint8_t seed = 1;
  for (const TestTensor& t : tensors) {
    data += t.bytes.empty() ? PatternBytes(NumBytes(t), seed) : t.bytes;
    ++seed;
  }
  return RawSafetensors(header, data);
}

std::string TinyConfigJson(const TinyModelOptions& options) {
  const std::string decoder = absl::StrCat(R"(
    "vocab_size": 32, "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention",
                    "linear_attention", "full_attention"],
    "full_attention_interval": 4,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
    "linear_num_key_heads": 1, "linear_num_value_heads": 2,
    "linear_key_head_dim": 4, "linear_value_head_dim": 4,
    "linear_conv_kernel_dim": 4, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "max_position_embeddings": 128, "attention_bias": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000,
                        "partial_rotary_factor": 0.5},
    "tie_word_embeddings": )",
                                           options.tied ? "true" : "false");
  if (options.nested) {
    return absl::StrCat(R"({"model_type": "qwen3_5",
      "architectures": ["Qwen3_5ForConditionalGeneration"],
      "tie_word_embeddings": )",
                        options.tied ? "true" : "false", R"(,
      "text_config": {"model_type": "qwen3_5_text", )",
                        decoder, R"(, "eos_token_id": 31},
      "vision_config": {"depth": 1, "hidden_size": 4}})");
  }
  return absl::StrCat(R"({"model_type": "qwen3_5_text",
    "architectures": ["Qwen3_5ForCausalLM"], "eos_token_id": 31, )",
                      decoder, "}");
}

std::vector<TestTensor> TinyModelTensors(const TinyModelOptions& options) {
  const std::string p =
      options.nested ? "model.language_model." : "model.";
  std::vector<TestTensor> t;
  t.push_back({p + "embed_tokens.weight", "BF16", {32, 8}, ""});
  for (int i = 0; i < 4; ++i) {
    const std::string l = absl::StrCat(p, "layers.", i, ".");
    t.push_back({l + "input_layernorm.weight", "BF16", {8}, ""});
    t.push_back({l + "post_attention_layernorm.weight", "BF16", {8}, ""});
    if (i == 3) {
      t.push_back({l + "self_attn.q_proj.weight", "BF16", {32, 8}, ""});
      t.push_back({l + "self_attn.k_proj.weight", "BF16", {8, 8}, ""});
      t.push_back({l + "self_attn.v_proj.weight", "BF16", {8, 8}, ""});
      t.push_back({l + "self_attn.o_proj.weight", "BF16", {8, 16}, ""});
      t.push_back({l + "self_attn.q_norm.weight", "BF16", {8}, ""});
      t.push_back({l + "self_attn.k_norm.weight", "BF16", {8}, ""});
    } else {
      // key_dim 4, value_dim 8, conv_dim 16.
      t.push_back({l + "linear_attn.in_proj_qkv.weight", "BF16", {16, 8}, ""});
      t.push_back({l + "linear_attn.in_proj_z.weight", "BF16", {8, 8}, ""});
      t.push_back({l + "linear_attn.in_proj_b.weight", "BF16", {2, 8}, ""});
      t.push_back({l + "linear_attn.in_proj_a.weight", "BF16", {2, 8}, ""});
      t.push_back({l + "linear_attn.conv1d.weight", "BF16", {16, 1, 4}, ""});
      t.push_back({l + "linear_attn.dt_bias", "BF16", {2}, ""});
      t.push_back({l + "linear_attn.A_log", "F32", {2}, ""});
      t.push_back({l + "linear_attn.norm.weight", "F32", {4}, ""});
      t.push_back({l + "linear_attn.out_proj.weight", "BF16", {8, 8}, ""});
    }
    t.push_back({l + "mlp.gate_proj.weight", "BF16", {16, 8}, ""});
    t.push_back({l + "mlp.up_proj.weight", "BF16", {16, 8}, ""});
    t.push_back({l + "mlp.down_proj.weight", "BF16", {8, 16}, ""});
  }
  t.push_back({p + "norm.weight", "BF16", {8}, ""});
  if (options.write_lm_head) {
    t.push_back({"lm_head.weight", "BF16", {32, 8}, ""});
  }
  if (options.add_vision_and_mtp) {
    t.push_back({"model.visual.patch_embed.proj.weight", "BF16", {4, 3}, ""});
    t.push_back({"model.visual.blocks.0.attn.qkv.bias", "F32", {12}, ""});
    t.push_back({"mtp.fc.weight", "BF16", {8, 16}, ""});
    t.push_back({"mtp.layers.0.self_attn.q_proj.weight", "BF16", {32, 8}, ""});
    t.push_back({"mtp.norm.weight", "BF16", {8}, ""});
  }
  return t;
}

void WriteTinyModel(const std::string& dir, const TinyModelOptions& options) {
  WriteBytes(dir + "/config.json", TinyConfigJson(options));
  WriteBytes(dir + "/model.safetensors",
             BuildSafetensors(TinyModelTensors(options), {{"format", "pt"}}));
}

}  // namespace tributary::testing
