#include "engine/decoder/reference_decoder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tributary {
namespace {

namespace ref = reference;

// The loader admits only BF16, F16 and F32 weights.
ElementType ComputeType(const TensorView& view) {
  switch (view.dtype) {
    case DType::kBF16:
      return ElementType::kBF16;
    case DType::kF16:
      return ElementType::kF16;
    default:
      return ElementType::kF32;
  }
}

// y [T, out] = x [T, in] · Wᵀ, with out taken from the weight's shape.
void Linear(const std::vector<float>& x, int64_t num_tokens,
            const TensorView& w, std::vector<float>* y) {
  const int64_t out_features = w.shape[0];
  const int64_t in_features = w.shape[1];
  y->assign(static_cast<size_t>(num_tokens * out_features), 0.0f);
  ref::MatMul(x.data(), num_tokens, in_features, w.data, ComputeType(w),
              out_features, y->data());
}

}  // namespace

ReferenceDecoder::ReferenceDecoder(const ModelConfig& config,
                                   const ModelWeights& weights,
                                   int64_t max_tokens)
    : config_(&config), weights_(&weights), max_tokens_(max_tokens) {
  caches_.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    LayerCache& cache = caches_[l];
    if (config.layer_types[l] == LayerKind::kLinearAttention) {
      cache.conv_window.assign(
          (config.linear_conv_kernel_dim - 1) * config.linear_conv_dim(), 0.0f);
      cache.state.assign(config.linear_num_value_heads *
                             config.linear_key_head_dim *
                             config.linear_value_head_dim,
                         0.0f);
    } else {
      cache.k.assign(max_tokens * config.kv_proj_rows(), 0.0f);
      cache.v.assign(max_tokens * config.kv_proj_rows(), 0.0f);
    }
  }
}

absl::StatusOr<ReferenceDecoder> ReferenceDecoder::Create(
    const ModelConfig& config, const ModelWeights& weights,
    int64_t max_tokens) {
  if (max_tokens <= 0 || max_tokens > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens = ", max_tokens, " must be in [1, 2^24]"));
  }
  if (static_cast<int64_t>(weights.layers.size()) != config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights have ", weights.layers.size(),
                     " layers, config has ", config.num_hidden_layers));
  }
  return ReferenceDecoder(config, weights, max_tokens);
}

absl::StatusOr<ReferenceStepResult> ReferenceDecoder::Forward(
    absl::Span<const int32_t> ids) {
  const ModelConfig& c = *config_;
  const int64_t num_tokens = static_cast<int64_t>(ids.size());
  if (num_tokens == 0) {
    return absl::InvalidArgumentError("Forward needs at least one token");
  }
  if (num_tokens_ + num_tokens > max_tokens_) {
    return absl::OutOfRangeError(
        absl::StrCat("sequence of ", num_tokens_ + num_tokens,
                     " tokens exceeds max_tokens = ", max_tokens_));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")"));
    }
  }
  const int64_t hidden = c.hidden_size;
  const bool use_recurrent = num_tokens == 1 && num_tokens_ > 0;

  ReferenceStepResult result;
  std::vector<float> stream(static_cast<size_t>(num_tokens * hidden));
  const TensorView& embed = weights_->embed_tokens;
  ref::EmbeddingGather(ids.data(), num_tokens, embed.data, ComputeType(embed),
                       hidden, stream.data());

  std::vector<float> normed(stream.size()), update;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = weights_->layers[l];
    for (bool is_ffn : {false, true}) {
      const TensorView& norm =
          is_ffn ? lw.post_attention_layernorm : lw.input_layernorm;
      ref::RmsNormZeroCentred(stream.data(), num_tokens, hidden, norm.data,
                              ComputeType(norm),
                              static_cast<float>(c.rms_norm_eps), normed.data());
      if (is_ffn) {
        Mlp(l, normed, num_tokens, &update);
      } else if (c.layer_types[l] == LayerKind::kLinearAttention) {
        GatedDeltaNet(l, normed, num_tokens, use_recurrent, &update);
      } else {
        GatedAttention(l, normed, num_tokens, &update);
      }
      SublayerTrace trace;
      trace.layer = l;
      trace.is_ffn = is_ffn;
      trace.tokens.resize(static_cast<size_t>(num_tokens));
      ref::ResidualAdd(stream.data(), update.data(), num_tokens, hidden,
                       trace.tokens.data());
      result.residual.push_back(std::move(trace));
    }
  }

  result.final_stream_norm.resize(static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) {
    double sum_sq = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      sum_sq += double{stream[t * hidden + i]} * stream[t * hidden + i];
    }
    result.final_stream_norm[t] = static_cast<float>(std::sqrt(sum_sq));
  }
  const TensorView& final_norm = weights_->final_norm;
  ref::RmsNormZeroCentred(stream.data(), num_tokens, hidden, final_norm.data,
                          ComputeType(final_norm),
                          static_cast<float>(c.rms_norm_eps), normed.data());
  Linear(normed, num_tokens, weights_->lm_head, &result.logits);
  num_tokens_ += num_tokens;
  return result;
}

void ReferenceDecoder::GatedDeltaNet(int64_t layer,
                                     const std::vector<float>& normed,
                                     int64_t num_tokens, bool use_recurrent,
                                     std::vector<float>* update) {
  const ModelConfig& c = *config_;
  const LinearAttentionWeights& w = *weights_->layers[layer].linear_attention;
  LayerCache& cache = caches_[layer];
  const int64_t hk = c.linear_num_key_heads, hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t conv_dim = c.linear_conv_dim();
  const int64_t key_dim = c.linear_key_dim();

  std::vector<float> mixed, z, a, b;
  Linear(normed, num_tokens, w.in_proj_qkv, &mixed);  // [T, conv_dim]
  Linear(normed, num_tokens, w.in_proj_z, &z);        // [T, Hv * dv]
  Linear(normed, num_tokens, w.in_proj_b, &b);        // [T, Hv]
  Linear(normed, num_tokens, w.in_proj_a, &a);        // [T, Hv]

  std::vector<float> conv_out(mixed.size());
  ref::CausalConv1dSilu(mixed.data(), num_tokens, conv_dim,
                        c.linear_conv_kernel_dim, w.conv1d.data,
                        ComputeType(w.conv1d), cache.conv_window.data(),
                        conv_out.data());
  // Split the channels [q (Hk·dk) | k (Hk·dk) | v (Hv·dv)] per token.
  std::vector<float> q(num_tokens * key_dim), k(num_tokens * key_dim),
      v(num_tokens * hv * dv);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = conv_out.data() + t * conv_dim;
    std::copy(row, row + key_dim, q.data() + t * key_dim);
    std::copy(row + key_dim, row + 2 * key_dim, k.data() + t * key_dim);
    std::copy(row + 2 * key_dim, row + conv_dim, v.data() + t * hv * dv);
  }
  ref::L2NormRows(q.data(), num_tokens * hk, dk,
                  1.0f / std::sqrt(static_cast<float>(dk)));
  ref::L2NormRows(k.data(), num_tokens * hk, dk, 1.0f);

  std::vector<float> g(num_tokens * hv), beta(num_tokens * hv);
  ref::GdnGates(a.data(), b.data(), num_tokens, hv, w.a_log.data,
                ComputeType(w.a_log), w.dt_bias.data, ComputeType(w.dt_bias),
                g.data(), beta.data());

  const ref::DeltaRuleDims dims{num_tokens, hk, hv, dk, dv};
  std::vector<float> core(num_tokens * hv * dv);
  if (use_recurrent) {
    ref::GatedDeltaRuleRecurrent(dims, q.data(), k.data(), v.data(), g.data(),
                                 beta.data(), cache.state.data(), core.data());
  } else {
    ref::GatedDeltaRuleChunked(dims, /*chunk_size=*/64, q.data(), k.data(),
                               v.data(), g.data(), beta.data(),
                               cache.state.data(), core.data());
  }
  // Gated RMSNorm per (token, value head), then the output projection.
  std::vector<float> gated(core.size());
  ref::GatedRmsNorm(core.data(), z.data(), num_tokens * hv, dv, w.norm.data,
                    ComputeType(w.norm), static_cast<float>(c.rms_norm_eps),
                    gated.data());
  Linear(gated, num_tokens, w.out_proj, update);
}

void ReferenceDecoder::GatedAttention(int64_t layer,
                                      const std::vector<float>& normed,
                                      int64_t num_tokens,
                                      std::vector<float>* update) {
  const ModelConfig& c = *config_;
  const AttentionWeights& w = *weights_->layers[layer].attention;
  LayerCache& cache = caches_[layer];
  const int64_t heads = c.num_attention_heads, kv_heads = c.num_key_value_heads;
  const int64_t d = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  std::vector<float> q_and_gate, k, v;
  Linear(normed, num_tokens, w.q_proj, &q_and_gate);  // [T, H · 2d]
  Linear(normed, num_tokens, w.k_proj, &k);           // [T, Hkv · d]
  Linear(normed, num_tokens, w.v_proj, &v);
  // q_proj rows are interleaved per head: d query rows, then d gate rows.
  std::vector<float> q(num_tokens * heads * d), gate(num_tokens * heads * d);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* src = q_and_gate.data() + (t * heads + h) * 2 * d;
      std::copy(src, src + d, q.data() + (t * heads + h) * d);
      std::copy(src + d, src + 2 * d, gate.data() + (t * heads + h) * d);
    }
  }
  ref::RmsNormZeroCentred(q.data(), num_tokens * heads, d, w.q_norm.data,
                          ComputeType(w.q_norm), eps, q.data());
  ref::RmsNormZeroCentred(k.data(), num_tokens * kv_heads, d, w.k_norm.data,
                          ComputeType(w.k_norm), eps, k.data());
  std::vector<int32_t> positions(static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) {
    positions[t] = static_cast<int32_t>(num_tokens_ + t);
  }
  const float theta = static_cast<float>(c.rope_theta);
  ref::PartialRopeNeox(q.data(), num_tokens, heads, d, c.rotary_dim(),
                       positions.data(), theta);
  ref::PartialRopeNeox(k.data(), num_tokens, kv_heads, d, c.rotary_dim(),
                       positions.data(), theta);

  // The dense cache is one block of max_tokens rows.
  const int32_t block_table[1] = {0};
  ref::WriteKv(k.data(), v.data(), num_tokens, num_tokens_, block_table,
               max_tokens_, kv_heads, d, cache.k.data(), cache.v.data());
  const ref::PagedKvView view{cache.k.data(), cache.v.data(), block_table,
                              max_tokens_,    kv_heads,       d};
  std::vector<float> attended(q.size());
  ref::PagedAttention(q.data(), num_tokens, heads, num_tokens_, view,
                      static_cast<float>(c.attention_scale()), attended.data());
  ref::SigmoidGate(attended.data(), gate.data(),
                   static_cast<int64_t>(attended.size()));
  Linear(attended, num_tokens, w.o_proj, update);
}

void ReferenceDecoder::Mlp(int64_t layer, const std::vector<float>& normed,
                           int64_t num_tokens, std::vector<float>* update) {
  const MlpWeights& w = weights_->layers[layer].mlp;
  std::vector<float> gate, up;
  Linear(normed, num_tokens, w.gate_proj, &gate);
  Linear(normed, num_tokens, w.up_proj, &up);
  ref::SwiGlu(gate.data(), up.data(), static_cast<int64_t>(gate.size()),
              gate.data());
  Linear(gate, num_tokens, w.down_proj, update);
}

}  // namespace tributary
