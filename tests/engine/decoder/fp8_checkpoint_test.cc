// An FP8 block checkpoint of the default model, written at test time in the
// published layout (every projection matrix F8_E4M3 with a F32
// weight_scale_inv per 128x128 block, scale_inv = amax / 448, q = e4m3 RNE
// of w / scale_inv; embeddings, norms, conv and A_log/dt_bias as stored;
// config.json with quantization_config), loaded unmodified: its dequantized
// weights within e4m3's error bound of the bf16 originals, and its logits
// close to the bf16 model's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/mapped_file.h"
#include "decoder_harness.h"
#include "engine/backend/element_type.h"
#include "engine/model/fp8.h"
#include "engine/model/model_directory.h"
#include "engine/model/safetensors_writer.h"
#include "fixture_reference.h"

namespace tributary {
namespace {

namespace fs = std::filesystem;
using namespace testing_fixtures;  // NOLINT: test-local helpers

std::vector<const TensorView*> Matrices(const ModelWeights& w) {
  std::vector<const TensorView*> m;
  for (const LayerWeights& l : w.layers) {
    m.insert(m.end(), {&l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj});
    if (l.attention) {
      const AttentionWeights& a = *l.attention;
      m.insert(m.end(), {&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj});
    }
    if (l.linear_attention) {
      const LinearAttentionWeights& g = *l.linear_attention;
      m.insert(m.end(), {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b,
                         &g.in_proj_a, &g.out_proj});
    }
  }
  return m;
}

std::vector<float> ToF32(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.num_elements()));
  const ElementType type =
      v.dtype == DType::kBF16 ? ElementType::kBF16
      : v.dtype == DType::kF16 ? ElementType::kF16 : ElementType::kF32;
  for (size_t k = 0; k < out.size(); ++k) out[k] = LoadAsF32(v.data, type, k);
  return out;
}

// The FP8 copy of the model in `src`, written into `dst`.
void WriteFp8Copy(const std::string& src, const std::string& dst) {
  auto model = ModelDirectory::Load(src);
  ASSERT_TRUE(model.ok()) << model.status();
  std::set<std::string> matrices;
  for (const TensorView* v : Matrices(model->weights())) matrices.insert(v->name);
  std::vector<TensorToWrite> out;
  for (const auto& [name, view] : model->tensors().tensors()) {
    if (matrices.count(name) == 0) {
      const TensorView* v = view;
      out.push_back({name, v->dtype, v->shape, [v](uint8_t* d, size_t n) {
                       std::memcpy(d, v->data, n);
                     }});
      continue;
    }
    const int64_t rows = view->shape[0], cols = view->shape[1];
    auto q = std::make_shared<Fp8BlockWeight>(
        QuantizeFp8Block(ToF32(*view).data(), rows, cols, 128, 128));
    out.push_back({name, DType::kF8E4M3, view->shape,
                   [q](uint8_t* d, size_t n) { std::memcpy(d, q->q.data(), n); }});
    out.push_back({name + "_scale_inv", DType::kF32,
                   {(rows + 127) / 128, (cols + 127) / 128},
                   [q](uint8_t* d, size_t n) {
                     std::memcpy(d, q->scale_inv.data(), n);
                   }});
  }
  ASSERT_TRUE(WriteSafetensors(dst + "/model.safetensors", out,
                               {{"format", "pt"}}).ok());
  auto config = ReadFileToString(src + "/config.json");
  ASSERT_TRUE(config.ok());
  const size_t brace = config->find('{');
  config->insert(brace + 1,
                 R"(
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
    "quant_method": "fp8", "weight_block_size": [128, 128],
    "modules_to_not_convert": ["lm_head"]},)");
  FILE* f = std::fopen((dst + "/config.json").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(config->data(), 1, config->size(), f);
  std::fclose(f);
  for (const char* file : {"generation_config.json", "tokenizer.json",
                           "tokenizer_config.json"}) {
    if (fs::exists(fs::path(src) / file)) {
      fs::copy_file(fs::path(src) / file, fs::path(dst) / file);
    }
  }
}

class Fp8CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("tributary-fp8-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->random_seed());
    fs::create_directories(dir_);
    WriteFp8Copy(SourcePath("models/tiny-shakespeare"), dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Fp8CheckpointTest, DequantizedWeightsWithinTheE4m3Bound) {
  auto bf16 = ModelDirectory::Load(SourcePath("models/tiny-shakespeare"));
  auto fp8 = ModelDirectory::Load(dir_.string());
  ASSERT_TRUE(bf16.ok() && fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->weights().fp8_weights.size(), 8u * 3 + 6u * 5 + 2u * 4);
  const auto a = Matrices(bf16->weights()), b = Matrices(fp8->weights());
  ASSERT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t m = 0; m < a.size(); ++m) {
    ASSERT_EQ(b[m]->dtype, DType::kBF16);
    const std::vector<float> w = ToF32(*a[m]), dq = ToF32(*b[m]);
    const int64_t cols = a[m]->shape[1];
    // The block scales, from the stored scale_inv.
    const TensorView* scale_view =
        fp8->tensors().Find(a[m]->name + "_scale_inv");
    ASSERT_NE(scale_view, nullptr) << a[m]->name;
    const TensorView& scale = *scale_view;
    const std::vector<float> s = ToF32(scale);
    for (size_t k = 0; k < w.size(); ++k) {
      const int64_t i = static_cast<int64_t>(k) / cols, j = k % cols;
      const float si = s[(i / 128) * scale.shape[1] + j / 128];
      // e4m3's half ulp (2^-4 relative; 2^-10 * scale among subnormals),
      // then the bf16 rounding of the product (2^-8 relative).
      const float bound = std::fmax(std::fabs(w[k]) * 0.0625f, si * 0.0009765625f) +
                          std::fabs(dq[k]) * 0.00390625f;
      ASSERT_LE(std::fabs(w[k] - dq[k]), bound * 1.0001f)
          << a[m]->name << " [" << i << ", " << j << "] w " << w[k] << " dq " << dq[k] << " s " << si;
      worst = std::max(worst, static_cast<double>(std::fabs(w[k] - dq[k]) / bound));
    }
  }
  RecordProperty("worst_error_over_bound", std::to_string(worst));
}

TEST_F(Fp8CheckpointTest, LogitsCloseToTheBf16Model) {
  Harness bf16(SourcePath("models/tiny-shakespeare"));
  Harness fp8(dir_.string());
  ASSERT_TRUE(bf16.ok() && fp8.ok());
  std::vector<int32_t> prompt;
  uint32_t x = 40;
  for (int i = 0; i < 48; ++i) {
    x = x * 1664525u + 1013904223u;
    prompt.push_back(static_cast<int32_t>((x >> 8) % bf16.vocab()));
  }
  const int64_t n = static_cast<int64_t>(prompt.size()), vocab = bf16.vocab();
  std::vector<std::vector<float>> logits;
  for (Harness* h : {&bf16, &fp8}) {
    ASSERT_TRUE(h->decoder().ResetStateSlot(0).ok());
    int32_t next = 0;
    BatchLayout layout;
    layout.sequences.push_back(Slice(0, n, 0, 0, h->Blocks(n, &next)));
    auto out = h->decoder().Forward(layout, prompt, ForwardOptions{true, true});
    ASSERT_TRUE(out.ok()) << out.status();
    logits.push_back(out->logits);
  }
  // Per position: the largest logit difference relative to the row's
  // largest |logit|, and top-1 agreement away from near-ties.
  double worst = 0.0;
  int agree = 0, compared = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* a = logits[0].data() + t * vocab;
    const float* b = logits[1].data() + t * vocab;
    float scale = 0.0f, diff = 0.0f;
    for (int64_t v = 0; v < vocab; ++v) {
      scale = std::max(scale, std::fabs(a[v]));
      diff = std::max(diff, std::fabs(a[v] - b[v]));
    }
    worst = std::max(worst, static_cast<double>(diff / scale));
    std::vector<float> sorted(a, a + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(),
                      std::greater<float>());
    if (sorted[0] - sorted[1] > 2 * diff) {
      ++compared;
      agree += std::max_element(a, a + vocab) - a ==
               std::max_element(b, b + vocab) - b;
    }
  }
  RecordProperty("worst_relative_logit_difference", std::to_string(worst));
  std::printf("fp8 vs bf16: worst max|dlogit| / max|logit| = %.4f; top-1 "
              "agreement %d of %d positions with a clear margin\n",
              worst, agree, compared);
  EXPECT_LT(worst, 0.05);  // the stated tolerance: 5 % of the row's scale
  EXPECT_EQ(agree, compared);
}

}  // namespace
}  // namespace tributary
