#include "engine/model/model_weights.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  explicit Resolver(const TensorStore& store) : store_(store) {}

  TensorView Get(const std::string& name, std::vector<int64_t> shape,
                 absl::string_view formula) override {
    const TensorView* view = store_.Find(name);
    if (view == nullptr) {
      missing_.push_back(name);
      return TensorView{};
    }
    used_.insert(name);
    if (!first_error_.ok()) return *view;
    if (!IsFloatWeightDType(view->dtype)) {
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

  bool Has(absl::string_view name) const { return store_.Find(name) != nullptr; }
  void MarkUsed(absl::string_view name) { used_.insert(std::string(name)); }
  const std::set<std::string>& used() const { return used_; }
  const std::vector<std::string>& missing() const { return missing_; }
  const absl::Status& first_error() const { return first_error_; }

 private:
  const TensorStore& store_;
  std::set<std::string> used_;
  std::vector<std::string> missing_;
  absl::Status first_error_;
};

AttentionWeights ResolveAttention(const ModelConfig& c, const std::string& p,
                                  TensorLookup& r) {
  const int64_t d = c.hidden_size;
  AttentionWeights w;
  w.q_proj = r.Get(p + "self_attn.q_proj.weight", {c.q_proj_rows(), d},
                   "[2 * num_attention_heads * head_dim, hidden_size]");
  w.k_proj = r.Get(p + "self_attn.k_proj.weight", {c.kv_proj_rows(), d},
                   "[num_key_value_heads * head_dim, hidden_size]");
  w.v_proj = r.Get(p + "self_attn.v_proj.weight", {c.kv_proj_rows(), d},
                   "[num_key_value_heads * head_dim, hidden_size]");
  w.o_proj = r.Get(p + "self_attn.o_proj.weight",
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
  w.in_proj_qkv = r.Get(p + "linear_attn.in_proj_qkv.weight",
                        {c.linear_conv_dim(), d},
                        absl::StrCat("[", kConvDim, ", hidden_size]"));
  w.in_proj_z = r.Get(
      p + "linear_attn.in_proj_z.weight", {c.linear_value_dim(), d},
      "[linear_num_value_heads * linear_value_head_dim, hidden_size]");
  w.in_proj_b = r.Get(p + "linear_attn.in_proj_b.weight", {hv, d},
                      "[linear_num_value_heads, hidden_size]");
  w.in_proj_a = r.Get(p + "linear_attn.in_proj_a.weight", {hv, d},
                      "[linear_num_value_heads, hidden_size]");
  w.conv1d = r.Get(p + "linear_attn.conv1d.weight",
                   {c.linear_conv_dim(), 1, c.linear_conv_kernel_dim},
                   absl::StrCat("[", kConvDim, ", 1, linear_conv_kernel_dim]"));
  w.dt_bias = r.Get(p + "linear_attn.dt_bias", {hv}, "[linear_num_value_heads]");
  w.a_log = r.Get(p + "linear_attn.A_log", {hv}, "[linear_num_value_heads]");
  w.norm = r.Get(p + "linear_attn.norm.weight", {c.linear_value_head_dim},
                 "[linear_value_head_dim]");
  w.out_proj = r.Get(
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
  layer.mlp.gate_proj = r.Get(p + "mlp.gate_proj.weight", {m, d},
                              "[intermediate_size, hidden_size]");
  layer.mlp.up_proj = r.Get(p + "mlp.up_proj.weight", {m, d},
                            "[intermediate_size, hidden_size]");
  layer.mlp.down_proj = r.Get(p + "mlp.down_proj.weight", {d, m},
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
  Resolver r(store);
  const std::string prefix = c.weights_prefix();
  const int64_t d = c.hidden_size;
  ModelWeights weights;
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
