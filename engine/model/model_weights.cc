#include "engine/model/model_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backend/element_type.h"
#include "engine/model/fp8.h"

namespace tributary {
namespace {

constexpr absl::string_view kLmHeadName = "lm_head.weight";
constexpr absl::string_view kIgnoredPrefixes[] = {"model.visual.", "mtp."};
constexpr size_t kMaxNamesListed = 10;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Where the decoder's tensors come from: the one table of names and shapes
// below (ResolveLayer and its helpers) runs against a checkpoint (Resolver)
// or only lists what it would read (SpecRecorder).
class TensorLookup {
 public:
  virtual ~TensorLookup() = default;
  // `formula` explains the expected shape in config terms, e.g.
  // "[vocab_size, hidden_size]".
  virtual TensorView Get(const std::string& name, std::vector<int64_t> shape,
                         absl::string_view formula) = 0;
  // A projection matrix [out, in]: the one kind of tensor an FP8 block
  // checkpoint may store as F8_E4M3 (with its weight_scale_inv).
  virtual TensorView GetMatrix(const std::string& name,
                               std::vector<int64_t> shape,
                               absl::string_view formula) {
    return Get(name, std::move(shape), formula);
  }
};

class SpecRecorder final : public TensorLookup {
 public:
  TensorView Get(const std::string& name, std::vector<int64_t> shape,
                 absl::string_view /*formula*/) override {
    specs_.push_back({name, std::move(shape)});
    return TensorView{};
  }
  std::vector<TensorSpec> Take() { return std::move(specs_); }

 private:
  std::vector<TensorSpec> specs_;
};

// Views with a name, a dtype and a shape but no data: the weights of a
// synthetic model, made on the backend (HybridDecoder's random init).
// Matrices and most vectors are BF16; A_log and the GDN norm weight are F32,
// as in the published checkpoints (model-spec §0).
class ShapeOnly final : public TensorLookup {
 public:
  explicit ShapeOnly(DType dtype) : dtype_(dtype) {}

  TensorView Get(const std::string& name, std::vector<int64_t> shape,
                 absl::string_view /*formula*/) override {
    TensorView view;
    view.name = name;
    view.dtype = absl::EndsWith(name, "linear_attn.A_log") ||
                         absl::EndsWith(name, "linear_attn.norm.weight")
                     ? DType::kF32
                     : dtype_;
    view.shape = std::move(shape);
    view.size_bytes = static_cast<size_t>(view.num_elements()) *
                      (view.dtype == DType::kF32 ? 4 : 2);
    return view;
  }

 private:
  DType dtype_;
};

// Looks tensors up, checks dtype and shape, and remembers what was used and
// what was missing so that all missing names can be reported at once.
class Resolver final : public TensorLookup {
 public:
  Resolver(const ModelConfig& config, const TensorStore& store,
           ModelWeights* weights)
      : config_(config), store_(store), weights_(weights) {}

  TensorView Get(const std::string& name, std::vector<int64_t> shape,
                 absl::string_view formula) override {
    const TensorView* view = store_.Find(name);
    if (view == nullptr) {
      missing_.push_back(name);
      return TensorView{};
    }
    used_.insert(name);
    if (!first_error_.ok()) return *view;
    if (view->dtype == DType::kF8E4M3 || view->dtype == DType::kF8E5M2) {
      first_error_ = absl::InvalidArgumentError(absl::StrCat(
          store_.FilePathOf(name), ": tensor \"", name, "\" has dtype ",
          DTypeName(view->dtype),
          view->dtype == DType::kF8E5M2
              ? ": float8 e5m2 is not supported (FP8 checkpoints must store "
                "F8_E4M3 projection matrices)"
              : ": only projection matrices may be F8_E4M3; the decoder needs "
                "BF16, F16 or F32 here"));
    } else if (!IsFloatWeightDType(view->dtype)) {
      first_error_ = absl::InvalidArgumentError(absl::StrCat(
          store_.FilePathOf(name), ": tensor \"", name, "\" has dtype ",
          DTypeName(view->dtype), "; the decoder needs BF16, F16 or F32"));
    } else if (view->shape != shape) {
      first_error_ = absl::InvalidArgumentError(absl::StrCat(
          store_.FilePathOf(name), ": tensor \"", name, "\" has shape ",
          ShapeString(view->shape), ", expected ", ShapeString(shape), " = ",
          formula, " from config.json"));
    }
    return *view;
  }

  TensorView GetMatrix(const std::string& name, std::vector<int64_t> shape,
                       absl::string_view formula) override {
    const TensorView* view = store_.Find(name);
    if (view == nullptr || view->dtype != DType::kF8E4M3) {
      return Get(name, std::move(shape), formula);
    }
    used_.insert(name);
    if (!first_error_.ok()) return *view;
    absl::StatusOr<TensorView> dequantized =
        DequantizeFp8(*view, shape, formula);
    if (!dequantized.ok()) {
      first_error_ = dequantized.status();
      return *view;
    }
    return *std::move(dequantized);
  }

  bool Has(absl::string_view name) const { return store_.Find(name) != nullptr; }
  void MarkUsed(absl::string_view name) { used_.insert(std::string(name)); }
  const std::set<std::string>& used() const { return used_; }
  const std::vector<std::string>& missing() const { return missing_; }
  const absl::Status& first_error() const { return first_error_; }

 private:
  absl::Status Error(absl::string_view name, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        store_.FilePathOf(name), ": tensor \"", name, "\" ", what));
  }

  // An F8_E4M3 weight `view` and its NAME_scale_inv, checked, dequantized
  // to bf16 into memory `weights_` owns (model-spec: w = q * scale_inv of
  // the 128x128 block; the convention and its sources are in fp8.h).
  absl::StatusOr<TensorView> DequantizeFp8(const TensorView& view,
                                           const std::vector<int64_t>& shape,
                                           absl::string_view formula) {
    const std::string& name = view.name;
    if (!config_.quantization.has_value()) {
      return Error(name,
                   "has dtype F8_E4M3 but config.json has no "
                   "quantization_config (quant_method \"fp8\")");
    }
    const QuantizationConfig& q = *config_.quantization;
    if (q.IsNotConverted(name)) {
      return Error(name,
                   "has dtype F8_E4M3 but config.json's quantization_config "
                   "lists its module in modules_to_not_convert / "
                   "ignored_layers");
    }
    if (view.shape != shape) {
      return Error(name, absl::StrCat("has shape ", ShapeString(view.shape),
                                      ", expected ", ShapeString(shape), " = ",
                                      formula, " from config.json"));
    }
    const int64_t rows = shape[0], cols = shape[1];
    const std::vector<int64_t> scale_shape = {
        (rows + q.block_rows - 1) / q.block_rows,
        (cols + q.block_cols - 1) / q.block_cols};
    const std::string scale_name = name + "_scale_inv";
    const TensorView* scale = store_.Find(scale_name);
    if (scale == nullptr) {
      return Error(name, absl::StrCat("is F8_E4M3 but its scale tensor \"",
                                      scale_name,
                                      "\" is missing from the checkpoint"));
    }
    used_.insert(scale_name);
    if (scale->dtype != DType::kF32 && scale->dtype != DType::kBF16) {
      return Error(scale_name, absl::StrCat("has dtype ",
                                            DTypeName(scale->dtype),
                                            "; a weight_scale_inv must be F32 "
                                            "or BF16"));
    }
    if (scale->shape != scale_shape) {
      return Error(scale_name,
                   absl::StrCat("has shape ", ShapeString(scale->shape),
                                ", expected ", ShapeString(scale_shape),
                                " = [ceil(", rows, " / ", q.block_rows,
                                "), ceil(", cols, " / ", q.block_cols,
                                ")] for weight ", ShapeString(shape)));
    }
    const auto* scale_bytes = static_cast<const uint8_t*>(scale->data);
    std::vector<float> scales(static_cast<size_t>(scale->num_elements()));
    for (size_t k = 0; k < scales.size(); ++k) {
      if (scale->dtype == DType::kF32) {
        std::memcpy(&scales[k], scale_bytes + 4 * k, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, scale_bytes + 2 * k, 2);
        scales[k] = Bf16ToF32(bits);
      }
      if (!std::isfinite(scales[k]) || scales[k] < 0.0f) {
        return Error(scale_name,
                     absl::StrCat("has scale ", scales[k], " at block [",
                                  k / scale_shape[1], ", ", k % scale_shape[1],
                                  "]: scales must be finite and >= 0"));
      }
    }
    const auto* codes = static_cast<const uint8_t*>(view.data);
    const size_t n = static_cast<size_t>(rows * cols);
    for (size_t k = 0; k < n; ++k) {
      if ((codes[k] & 0x7F) == 0x7F) {
        return Error(name, absl::StrCat("holds the e4m3 NaN code 0x",
                                        absl::Hex(codes[k]), " at [",
                                        k / cols, ", ", k % cols, "]"));
      }
    }
    auto bf16 = std::make_shared<std::vector<uint16_t>>(n);
    uint16_t* out = bf16->data();
    DequantizeFp8Block(
        codes, rows, cols, q.block_rows, q.block_cols,
        [&](int64_t bi, int64_t bj) { return scales[bi * scale_shape[1] + bj]; },
        [&](int64_t k, float v) { out[k] = F32ToBf16(v); });
    weights_->fp8_weights.push_back({view, *scale});
    TensorView result = view;
    result.dtype = DType::kBF16;
    result.data = bf16->data();
    result.size_bytes = 2 * n;
    weights_->dequantized_data.push_back(std::move(bf16));
    return result;
  }

  const ModelConfig& config_;
  const TensorStore& store_;
  ModelWeights* weights_;
  std::set<std::string> used_;
  std::vector<std::string> missing_;
  absl::Status first_error_;
};

AttentionWeights ResolveAttention(const ModelConfig& c, const std::string& p,
                                  TensorLookup& r) {
  const int64_t d = c.hidden_size;
  AttentionWeights w;
  w.q_proj = r.GetMatrix(p + "self_attn.q_proj.weight", {c.q_proj_rows(), d},
                   "[2 * num_attention_heads * head_dim, hidden_size]");
  w.k_proj = r.GetMatrix(p + "self_attn.k_proj.weight", {c.kv_proj_rows(), d},
                   "[num_key_value_heads * head_dim, hidden_size]");
  w.v_proj = r.GetMatrix(p + "self_attn.v_proj.weight", {c.kv_proj_rows(), d},
                   "[num_key_value_heads * head_dim, hidden_size]");
  w.o_proj = r.GetMatrix(p + "self_attn.o_proj.weight",
                   {d, c.attention_output_dim()},
                   "[hidden_size, num_attention_heads * head_dim]");
  w.q_norm = r.Get(p + "self_attn.q_norm.weight", {c.head_dim}, "[head_dim]");
  w.k_norm = r.Get(p + "self_attn.k_norm.weight", {c.head_dim}, "[head_dim]");
  return w;
}

LinearAttentionWeights ResolveLinearAttention(const ModelConfig& c,
                                              const std::string& p,
                                              TensorLookup& r) {
  const int64_t d = c.hidden_size;
  const int64_t hv = c.linear_num_value_heads;
  constexpr absl::string_view kConvDim =
      "2 * linear_num_key_heads * linear_key_head_dim + "
      "linear_num_value_heads * linear_value_head_dim";
  LinearAttentionWeights w;
  w.in_proj_qkv = r.GetMatrix(p + "linear_attn.in_proj_qkv.weight",
                        {c.linear_conv_dim(), d},
                        absl::StrCat("[", kConvDim, ", hidden_size]"));
  w.in_proj_z = r.GetMatrix(
      p + "linear_attn.in_proj_z.weight", {c.linear_value_dim(), d},
      "[linear_num_value_heads * linear_value_head_dim, hidden_size]");
  w.in_proj_b = r.GetMatrix(p + "linear_attn.in_proj_b.weight", {hv, d},
                      "[linear_num_value_heads, hidden_size]");
  w.in_proj_a = r.GetMatrix(p + "linear_attn.in_proj_a.weight", {hv, d},
                      "[linear_num_value_heads, hidden_size]");
  w.conv1d = r.Get(p + "linear_attn.conv1d.weight",
                   {c.linear_conv_dim(), 1, c.linear_conv_kernel_dim},
                   absl::StrCat("[", kConvDim, ", 1, linear_conv_kernel_dim]"));
  w.dt_bias = r.Get(p + "linear_attn.dt_bias", {hv}, "[linear_num_value_heads]");
  w.a_log = r.Get(p + "linear_attn.A_log", {hv}, "[linear_num_value_heads]");
  w.norm = r.Get(p + "linear_attn.norm.weight", {c.linear_value_head_dim},
                 "[linear_value_head_dim]");
  w.out_proj = r.GetMatrix(
      p + "linear_attn.out_proj.weight", {d, c.linear_value_dim()},
      "[hidden_size, linear_num_value_heads * linear_value_head_dim]");
  return w;
}

LayerWeights ResolveLayer(const ModelConfig& c, int64_t index,
                          TensorLookup& r) {
  const std::string p =
      absl::StrCat(c.weights_prefix(), "layers.", index, ".");
  const int64_t d = c.hidden_size;
  const int64_t m = c.intermediate_size;
  LayerWeights layer;
  layer.kind = c.layer_types[index];
  layer.input_layernorm =
      r.Get(p + "input_layernorm.weight", {d}, "[hidden_size]");
  layer.post_attention_layernorm =
      r.Get(p + "post_attention_layernorm.weight", {d}, "[hidden_size]");
  if (layer.kind == LayerKind::kFullAttention) {
    layer.attention = ResolveAttention(c, p, r);
  } else {
    layer.linear_attention = ResolveLinearAttention(c, p, r);
  }
  layer.mlp.gate_proj = r.GetMatrix(p + "mlp.gate_proj.weight", {m, d},
                              "[intermediate_size, hidden_size]");
  layer.mlp.up_proj = r.GetMatrix(p + "mlp.up_proj.weight", {m, d},
                            "[intermediate_size, hidden_size]");
  layer.mlp.down_proj = r.GetMatrix(p + "mlp.down_proj.weight", {d, m},
                              "[hidden_size, intermediate_size]");
  return layer;
}

absl::Status MissingError(const ModelConfig& c, const TensorStore& store,
                          const std::vector<std::string>& missing) {
  std::vector<std::string> listed(
      missing.begin(),
      missing.begin() + std::min(missing.size(), kMaxNamesListed));
  std::string message = absl::StrCat(
      "checkpoint is missing ", missing.size(), " tensor",
      missing.size() == 1 ? "" : "s", " the decoder needs (model_type \"",
      c.model_type, "\", prefix \"", c.weights_prefix(), "\"): ",
      absl::StrJoin(listed, ", "));
  if (missing.size() > listed.size()) {
    absl::StrAppend(&message, ", ... and ", missing.size() - listed.size(),
                    " more");
  }
  // A common cause: a config whose model_type does not match the layout.
  const std::string other_prefix = c.layout == ModelLayout::kQwen3_5
                                       ? "model."
                                       : "model.language_model.";
  if (store.Find(other_prefix + "embed_tokens.weight") != nullptr) {
    absl::StrAppend(&message, " (the checkpoint has tensors under \"",
                    other_prefix,
                    "\": does config.json's model_type match it?)");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

std::vector<TensorSpec> DecoderTensorSpecs(const ModelConfig& c) {
  SpecRecorder r;
  const std::string prefix = c.weights_prefix();
  r.Get(prefix + "embed_tokens.weight", {c.vocab_size, c.hidden_size}, "");
  for (int64_t i = 0; i < static_cast<int64_t>(c.layer_types.size()); ++i) {
    ResolveLayer(c, i, r);
  }
  r.Get(prefix + "norm.weight", {c.hidden_size}, "");
  if (!c.tie_word_embeddings) {
    r.Get(std::string(kLmHeadName), {c.vocab_size, c.hidden_size}, "");
  }
  return r.Take();
}

std::vector<const TensorView*> AllViews(const ModelWeights& w) {
  std::vector<const TensorView*> views = {&w.embed_tokens};
  for (const LayerWeights& lw : w.layers) {
    views.insert(views.end(),
                 {&lw.input_layernorm, &lw.post_attention_layernorm});
    if (lw.attention) {
      const AttentionWeights& a = *lw.attention;
      views.insert(views.end(), {&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj,
                                 &a.q_norm, &a.k_norm});
    }
    if (lw.linear_attention) {
      const LinearAttentionWeights& g = *lw.linear_attention;
      views.insert(views.end(),
                   {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a,
                    &g.conv1d, &g.dt_bias, &g.a_log, &g.norm, &g.out_proj});
    }
    views.insert(views.end(),
                 {&lw.mlp.gate_proj, &lw.mlp.up_proj, &lw.mlp.down_proj});
  }
  views.push_back(&w.final_norm);
  if (!w.tied_embeddings) views.push_back(&w.lm_head);
  return views;
}

ModelWeights SyntheticModelWeights(const ModelConfig& c, DType dtype) {
  ShapeOnly r(dtype);
  const std::string prefix = c.weights_prefix();
  ModelWeights weights;
  weights.embed_tokens =
      r.Get(prefix + "embed_tokens.weight", {c.vocab_size, c.hidden_size}, "");
  for (int64_t i = 0; i < static_cast<int64_t>(c.layer_types.size()); ++i) {
    weights.layers.push_back(ResolveLayer(c, i, r));
  }
  weights.final_norm = r.Get(prefix + "norm.weight", {c.hidden_size}, "");
  weights.tied_embeddings = c.tie_word_embeddings;
  weights.lm_head =
      c.tie_word_embeddings
          ? weights.embed_tokens
          : r.Get(std::string(kLmHeadName), {c.vocab_size, c.hidden_size}, "");
  return weights;
}

absl::StatusOr<ModelWeights> ResolveModelWeights(const ModelConfig& c,
                                                 const TensorStore& store) {
  ModelWeights weights;
  Resolver r(c, store, &weights);
  const std::string prefix = c.weights_prefix();
  const int64_t d = c.hidden_size;
  weights.embed_tokens = r.Get(prefix + "embed_tokens.weight",
                               {c.vocab_size, d}, "[vocab_size, hidden_size]");
  weights.layers.reserve(c.layer_types.size());
  for (int64_t i = 0; i < static_cast<int64_t>(c.layer_types.size()); ++i) {
    weights.layers.push_back(ResolveLayer(c, i, r));
  }
  weights.final_norm = r.Get(prefix + "norm.weight", {d}, "[hidden_size]");

  const bool has_lm_head = r.Has(kLmHeadName);
  if (c.tie_word_embeddings) {
    weights.tied_embeddings = true;
    weights.lm_head = weights.embed_tokens;
    if (has_lm_head) {
      r.MarkUsed(kLmHeadName);
      weights.warnings.push_back(absl::StrCat(
          store.FilePathOf(kLmHeadName), ": ", kLmHeadName,
          " is present but tie_word_embeddings = true: it is ignored and the "
          "head reuses the embedding, as in transformers"));
    }
  } else if (has_lm_head) {
    weights.lm_head = r.Get(std::string(kLmHeadName), {c.vocab_size, d},
                            "[vocab_size, hidden_size]");
  } else if (r.missing().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has no ", kLmHeadName,
        " but config.json sets tie_word_embeddings = false (or leaves it at "
        "its default false): the output head is missing"));
  } else {
    r.Get(std::string(kLmHeadName), {c.vocab_size, d},
          "[vocab_size, hidden_size]");  // Listed with the other missing.
  }

  if (!r.missing().empty()) return MissingError(c, store, r.missing());
  if (!r.first_error().ok()) return r.first_error();

  std::vector<std::string> unused;
  for (const auto& [name, view] : store.tensors()) {
    if (r.used().count(name) != 0) continue;
    bool ignored = false;
    for (absl::string_view ignored_prefix : kIgnoredPrefixes) {
      ignored = ignored || absl::StartsWith(name, ignored_prefix);
    }
    if (!ignored) unused.push_back(name);
  }
  for (size_t i = 0; i < unused.size() && i < kMaxNamesListed; ++i) {
    weights.warnings.push_back(
        absl::StrCat(store.FilePathOf(unused[i]), ": tensor \"", unused[i],
                     "\" is not used by the decoder"));
  }
  if (unused.size() > kMaxNamesListed) {
    weights.warnings.push_back(
        absl::StrCat(unused.size() - kMaxNamesListed,
                     " more tensors are not used by the decoder"));
  }
  return weights;
}

}  // namespace tributary
