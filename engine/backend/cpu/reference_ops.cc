#include "engine/backend/cpu/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tributary {
namespace reference {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void MatMul(const float* x, int64_t num_tokens, int64_t in_features,
            const void* w, ElementType w_type, int64_t out_features, float* y) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * in_features;
    for (int64_t o = 0; o < out_features; ++o) {
      const size_t row = static_cast<size_t>(o * in_features);
      float sum = 0.0f;
      for (int64_t i = 0; i < in_features; ++i) {
        sum += xt[i] * LoadAsF32(w, w_type, row + i);
      }
      y[t * out_features + o] = sum;
    }
  }
}

void EmbeddingGather(const int32_t* ids, int64_t num_tokens, const void* table,
                     ElementType table_type, int64_t hidden, float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const size_t row = static_cast<size_t>(ids[t]) * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      out[t * hidden + i] = LoadAsF32(table, table_type, row + i);
    }
  }
}

void RmsNormZeroCentred(const float* x, int64_t num_rows, int64_t dim,
                        const void* w, ElementType w_type, float eps, float* out) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += double{xr[i]} * xr[i];
    const float inv_rms =
        1.0f / std::sqrt(static_cast<float>(sum_sq / dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      yr[i] = xr[i] * inv_rms * (1.0f + LoadAsF32(w, w_type, i));
    }
  }
}

void GatedRmsNorm(const float* o, const float* z, int64_t num_rows, int64_t dim,
                  const void* w, ElementType w_type, float eps, float* out) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* orow = o + r * dim;
    const float* zrow = z + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += double{orow[i]} * orow[i];
    const float inv_rms =
        1.0f / std::sqrt(static_cast<float>(sum_sq / dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      out[r * dim + i] =
          orow[i] * inv_rms * LoadAsF32(w, w_type, i) * Silu(zrow[i]);
    }
  }
}

void PartialRopeNeox(float* x, int64_t num_tokens, int64_t num_heads,
                     int64_t head_dim, int64_t rotary_dim, const int32_t* positions,
                     float theta) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> cos_t(half), sin_t(half);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      // As transformers: inv_freq in f32, angle = f32(position) · inv_freq.
      const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) /
                                                        static_cast<float>(rotary_dim));
      const float angle = static_cast<float>(positions[t]) * inv_freq;
      cos_t[i] = std::cos(angle);
      sin_t[i] = std::sin(angle);
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      float* u = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = u[i];
        const float b = u[i + half];
        u[i] = a * cos_t[i] - b * sin_t[i];
        u[i + half] = b * cos_t[i] + a * sin_t[i];
      }
    }
  }
}

void AddScaledVector(float* x, int64_t num_rows, int64_t dim, const float* v,
                     float scale) {
  for (int64_t r = 0; r < num_rows; ++r) {
    float* xr = x + r * dim;
    for (int64_t i = 0; i < dim; ++i) xr[i] += scale * v[i];
  }
}

void ProjectOut(float* x, int64_t num_rows, int64_t dim, const float* u) {
  for (int64_t r = 0; r < num_rows; ++r) {
    float* xr = x + r * dim;
    double dot = 0.0;
    for (int64_t i = 0; i < dim; ++i) {
      dot += static_cast<double>(xr[i]) * static_cast<double>(u[i]);
    }
    for (int64_t i = 0; i < dim; ++i) {
      xr[i] = static_cast<float>(static_cast<double>(xr[i]) -
                                 dot * static_cast<double>(u[i]));
    }
  }
}

void ResidualAdd(float* x, const float* u, int64_t num_tokens, int64_t hidden,
                 ResidualTokenStats* stats) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* xt = x + t * hidden;
    const float* ut = u + t * hidden;
    double stream_sq = 0.0, update_sq = 0.0, sum_sq = 0.0;
    float max_abs = -1.0f;
    int32_t max_abs_dim = 0;
    bool nonfinite = false;
    for (int64_t i = 0; i < hidden; ++i) {
      const float y = xt[i] + ut[i];
      stream_sq += double{xt[i]} * xt[i];
      update_sq += double{ut[i]} * ut[i];
      sum_sq += double{y} * y;
      if (!std::isfinite(ut[i]) || !std::isfinite(y)) nonfinite = true;
      if (std::fabs(y) > max_abs) {
        max_abs = std::fabs(y);
        max_abs_dim = static_cast<int32_t>(i);
      }
      xt[i] = y;
    }
    if (stats != nullptr) {
      stats[t] = ResidualTokenStats{
          static_cast<float>(std::sqrt(stream_sq)),
          static_cast<float>(std::sqrt(update_sq)),
          static_cast<float>(std::sqrt(sum_sq)), std::max(max_abs, 0.0f),
          max_abs_dim, nonfinite};
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}

void SigmoidGate(float* o, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] *= Sigmoid(gate[i]);
}

int32_t ArgMaxRow(const float* x, int64_t n) {
  int32_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return -1;
    if (best < 0 || x[i] > x[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t ChooseToken(const float* x, int64_t n, const TokenChoice& choice) {
  const int32_t argmax = ArgMaxRow(x, n);
  if (argmax < 0 || choice.temperature < TokenChoice::kGreedyTemperature) {
    return argmax;
  }
  const float max_logit = x[argmax];
  const double inverse_temperature = 1.0 / static_cast<double>(choice.temperature);
  auto weight = [&](int32_t id) {
    const float exponent = static_cast<float>(
        (static_cast<double>(x[id]) - max_logit) * inverse_temperature);
    return static_cast<double>(static_cast<float>(std::exp(static_cast<double>(exponent))));
  };
  // Every id in rank order: larger logit first, then lower id.
  std::vector<int32_t> ranked(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ranked[i] = static_cast<int32_t>(i);
  std::sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) {
    return x[a] != x[b] ? x[a] > x[b] : a < b;
  });
  size_t kept = ranked.size();  // the survivors are ranked[0, kept)
  if (choice.top_k > 0 && static_cast<size_t>(choice.top_k) < kept) {
    kept = static_cast<size_t>(choice.top_k);
  }
  auto in_id_order = [&] {
    std::vector<int32_t> ids(ranked.begin(), ranked.begin() + kept);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  if (choice.top_p < 1.0f && kept > 1) {
    double total = 0.0;
    for (int32_t id : in_id_order()) total += weight(id);
    const double target = choice.top_p * total * (1.0 - 1e-9);
    double cumulative = 0.0;
    for (size_t r = 0; r < kept; ++r) {
      cumulative += weight(ranked[r]);
      if (cumulative >= target) {
        kept = r + 1;
        break;
      }
    }
  }
  if (choice.min_p > 0.0f && kept > 1) {
    const double log_min_p = std::log(static_cast<double>(choice.min_p));
    size_t r = 1;  // the max always stays
    while (r < kept && (static_cast<double>(x[ranked[r]]) - max_logit) *
                               inverse_temperature >=
                           log_min_p) {
      ++r;
    }
    kept = r;
  }
  const std::vector<int32_t> survivors = in_id_order();
  double total = 0.0;
  for (int32_t id : survivors) total += weight(id);
  const double target = choice.uniform * total;
  double cumulative = 0.0;
  for (int32_t id : survivors) {
    cumulative += weight(id);
    if (target < cumulative) return id;
  }
  // Rounding left the target at or past the total: the last survivor with
  // any weight (the max has weight 1).
  for (size_t i = survivors.size(); i-- > 0;) {
    if (weight(survivors[i]) > 0.0) return survivors[i];
  }
  return argmax;
}

void ApplyPenalties(float* x, const TokenChoice& choice, TokenHistoryEntry* history) {
  if (!choice.has_penalties()) return;
  for (int32_t e = 0; e < choice.history_count; ++e) {
    TokenHistoryEntry& entry = history[choice.history_begin + e];
    float& logit = x[entry.token_id];
    entry.raw_logit = logit;
    logit = choice.PenalizedLogit(logit, entry.output_count);
  }
}

TokenLogprobs RowLogprobs(const float* x, int64_t n, int32_t token,
                          int32_t num_top) {
  const float max_logit = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max_logit);
  const double log_sum_exp = max_logit + std::log(sum);
  TokenLogprobs out;
  out.chosen = static_cast<float>(x[token] - log_sum_exp);
  std::vector<int32_t> ranked(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ranked[i] = static_cast<int32_t>(i);
  std::sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) {
    return x[a] != x[b] ? x[a] > x[b] : a < b;
  });
  out.count = static_cast<int32_t>(
      std::min<int64_t>({num_top, kMaxTopLogprobs, n}));
  for (int32_t r = 0; r < out.count; ++r) {
    out.top_ids[r] = ranked[r];
    out.top_logprobs[r] = static_cast<float>(x[ranked[r]] - log_sum_exp);
  }
  return out;
}

void L2NormRows(float* x, int64_t num_rows, int64_t dim, float scale) {
  for (int64_t r = 0; r < num_rows; ++r) {
    float* xr = x + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += double{xr[i]} * xr[i];
    const float factor =
        scale / std::sqrt(static_cast<float>(sum_sq) + 1e-6f);
    for (int64_t i = 0; i < dim; ++i) xr[i] *= factor;
  }
}

void GdnGates(const float* a, const float* b, int64_t num_tokens,
              int64_t num_heads, const void* a_log, ElementType a_log_type,
              const void* dt_bias, ElementType dt_bias_type, float* g, float* beta) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      const int64_t i = t * num_heads + h;
      const float x = a[i] + LoadAsF32(dt_bias, dt_bias_type, h);
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
      g[i] = -std::exp(LoadAsF32(a_log, a_log_type, h)) * softplus;
      beta[i] = Sigmoid(b[i]);
    }
  }
}

void CausalConv1dSilu(const float* x, int64_t num_tokens, int64_t channels,
                      int64_t kernel, const void* w, ElementType w_type,
                      float* window, float* out) {
  const int64_t history = kernel - 1;
  // The input at relative time s (s < 0: from the window, s ≥ 0: from x).
  auto input_at = [&](int64_t s, int64_t c) -> float {
    return s < 0 ? window[(history + s) * channels + c] : x[s * channels + c];
  };
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      float sum = 0.0f;
      // Tap j multiplies the input at t − (kernel − 1) + j: the last tap is
      // the current token (PyTorch cross-correlation, left padding).
      for (int64_t j = 0; j < kernel; ++j) {
        sum += LoadAsF32(w, w_type, static_cast<size_t>(c * kernel + j)) *
               input_at(t - history + j, c);
      }
      out[t * channels + c] = Silu(sum);
    }
  }
  // The new window: the last `history` inputs of concat(window, x).
  std::vector<float> updated(static_cast<size_t>(history * channels));
  for (int64_t r = 0; r < history; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      updated[r * channels + c] = input_at(num_tokens - history + r, c);
    }
  }
  std::copy(updated.begin(), updated.end(), window);
}

void GatedDeltaRuleRecurrent(const DeltaRuleDims& dims, const float* q,
                             const float* k, const float* v, const float* g,
                             const float* beta, float* state, float* out) {
  const int64_t dk = dims.key_dim, dv = dims.value_dim;
  const int64_t group = dims.num_value_heads / dims.num_key_heads;
  std::vector<float> delta(dv);
  for (int64_t t = 0; t < dims.num_tokens; ++t) {
    for (int64_t j = 0; j < dims.num_value_heads; ++j) {
      const int64_t kh = j / group;
      const float* qt = q + (t * dims.num_key_heads + kh) * dk;
      const float* kt = k + (t * dims.num_key_heads + kh) * dk;
      const float* vt = v + (t * dims.num_value_heads + j) * dv;
      const float decay = std::exp(g[t * dims.num_value_heads + j]);
      const float b = beta[t * dims.num_value_heads + j];
      float* s = state + j * dk * dv;  // [dk, dv]
      for (int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
      for (int64_t m = 0; m < dv; ++m) {
        float prediction = 0.0f;  // (Sᵀ k̂)[m]
        for (int64_t i = 0; i < dk; ++i) prediction += s[i * dv + m] * kt[i];
        delta[m] = b * (vt[m] - prediction);
      }
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t m = 0; m < dv; ++m) s[i * dv + m] += kt[i] * delta[m];
      }
      float* ot = out + (t * dims.num_value_heads + j) * dv;
      for (int64_t m = 0; m < dv; ++m) {
        float sum = 0.0f;
        for (int64_t i = 0; i < dk; ++i) sum += s[i * dv + m] * qt[i];
        ot[m] = sum;
      }
    }
  }
}

void GatedDeltaRuleChunked(const DeltaRuleDims& dims, int64_t chunk_size,
                           const float* q, const float* k, const float* v,
                           const float* g, const float* beta, float* state,
                           float* out) {
  const int64_t dk = dims.key_dim, dv = dims.value_dim;
  const int64_t hk = dims.num_key_heads, hv = dims.num_value_heads;
  const int64_t group = hv / hk;
  const int64_t c = chunk_size;
  // Per-chunk scratch. A shorter last chunk is the same as right-padding with
  // zeros (q = k = v = 0, β = 0, g = 0), which changes neither outputs nor
  // the final state.
  std::vector<float> cum(c), a(c * c), u(c * dv), w(c * dk), v_new(c * dv);
  for (int64_t j = 0; j < hv; ++j) {
    const int64_t kh = j / group;
    float* s = state + j * dk * dv;
    auto q_row = [&](int64_t t) { return q + (t * hk + kh) * dk; };
    auto k_row = [&](int64_t t) { return k + (t * hk + kh) * dk; };
    for (int64_t start = 0; start < dims.num_tokens; start += c) {
      const int64_t n = std::min(c, dims.num_tokens - start);
      // G_i: cumulative log decay within the chunk.
      float running = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        running += g[(start + i) * hv + j];
        cum[i] = running;
      }
      // A_ij = β_i (k̂_i · k̂_j) e^{G_i − G_j} for j < i (strictly lower).
      for (int64_t i = 0; i < n; ++i) {
        const float bi = beta[(start + i) * hv + j];
        for (int64_t jj = 0; jj < i; ++jj) {
          float dot = 0.0f;
          for (int64_t d = 0; d < dk; ++d) {
            dot += k_row(start + i)[d] * k_row(start + jj)[d];
          }
          a[i * c + jj] = bi * dot * std::exp(cum[i] - cum[jj]);
        }
      }
      // Forward substitution with L = I + A: U = L⁻¹(β V), W = L⁻¹(β K̂ e^G).
      for (int64_t i = 0; i < n; ++i) {
        const float bi = beta[(start + i) * hv + j];
        const float* vi = v + ((start + i) * hv + j) * dv;
        const float scale_w = bi * std::exp(cum[i]);
        for (int64_t m = 0; m < dv; ++m) u[i * dv + m] = bi * vi[m];
        for (int64_t d = 0; d < dk; ++d) {
          w[i * dk + d] = scale_w * k_row(start + i)[d];
        }
        for (int64_t jj = 0; jj < i; ++jj) {
          const float aij = a[i * c + jj];
          for (int64_t m = 0; m < dv; ++m) u[i * dv + m] -= aij * u[jj * dv + m];
          for (int64_t d = 0; d < dk; ++d) w[i * dk + d] -= aij * w[jj * dk + d];
        }
      }
      // V_new = U − W S.
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t m = 0; m < dv; ++m) {
          float ws = 0.0f;
          for (int64_t d = 0; d < dk; ++d) ws += w[i * dk + d] * s[d * dv + m];
          v_new[i * dv + m] = u[i * dv + m] - ws;
        }
      }
      // O_i = e^{G_i} q̂_i S + Σ_{jj ≤ i} (q̂_i · k̂_jj) e^{G_i − G_jj} V_new_jj.
      for (int64_t i = 0; i < n; ++i) {
        const float* qi = q_row(start + i);
        float* oi = out + ((start + i) * hv + j) * dv;
        const float e_gi = std::exp(cum[i]);
        for (int64_t m = 0; m < dv; ++m) {
          float qs = 0.0f;
          for (int64_t d = 0; d < dk; ++d) qs += qi[d] * s[d * dv + m];
          oi[m] = e_gi * qs;
        }
        for (int64_t jj = 0; jj <= i; ++jj) {
          float dot = 0.0f;
          for (int64_t d = 0; d < dk; ++d) dot += qi[d] * k_row(start + jj)[d];
          const float coeff = dot * std::exp(cum[i] - cum[jj]);
          for (int64_t m = 0; m < dv; ++m) oi[m] += coeff * v_new[jj * dv + m];
        }
      }
      // S ← e^{G_last} S + Σ_i (k̂_i e^{G_last − G_i}) ⊗ V_new_i.
      const float g_last = cum[n - 1];
      const float e_last = std::exp(g_last);
      for (int64_t d = 0; d < dk * dv; ++d) s[d] *= e_last;
      for (int64_t i = 0; i < n; ++i) {
        const float weight = std::exp(g_last - cum[i]);
        for (int64_t d = 0; d < dk; ++d) {
          const float kd = k_row(start + i)[d] * weight;
          for (int64_t m = 0; m < dv; ++m) s[d * dv + m] += kd * v_new[i * dv + m];
        }
      }
    }
  }
}

void WriteKv(const float* k, const float* v, int64_t num_tokens,
             int64_t first_position, const int32_t* block_table,
             int64_t block_size, int64_t num_kv_heads, int64_t head_dim,
             float* k_pool, float* v_pool) {
  const int64_t row = num_kv_heads * head_dim;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t p = first_position + t;
    const int64_t slot =
        static_cast<int64_t>(block_table[p / block_size]) * block_size +
        p % block_size;
    std::copy(k + t * row, k + (t + 1) * row, k_pool + slot * row);
    std::copy(v + t * row, v + (t + 1) * row, v_pool + slot * row);
  }
}

void PagedAttention(const float* q, int64_t num_tokens, int64_t num_q_heads,
                    int64_t first_position, const PagedKvView& kv, float scale,
                    float* out) {
  const int64_t d = kv.head_dim;
  const int64_t group = num_q_heads / kv.num_kv_heads;
  const int64_t row = kv.num_kv_heads * d;
  std::vector<float> scores;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t num_keys = first_position + t + 1;  // causal: keys 0 … p
    scores.resize(num_keys);
    for (int64_t h = 0; h < num_q_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q + (t * num_q_heads + h) * d;
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t p = 0; p < num_keys; ++p) {
        const int64_t slot =
            static_cast<int64_t>(kv.block_table[p / kv.block_size]) *
                kv.block_size + p % kv.block_size;
        const float* kp = kv.k_pool + slot * row + kvh * d;
        float dot = 0.0f;
        for (int64_t i = 0; i < d; ++i) dot += qh[i] * kp[i];
        scores[p] = dot * scale;
        max_score = std::max(max_score, scores[p]);
      }
      double denominator = 0.0;
      for (int64_t p = 0; p < num_keys; ++p) {
        scores[p] = std::exp(scores[p] - max_score);
        denominator += scores[p];
      }
      float* oh = out + (t * num_q_heads + h) * d;
      std::fill(oh, oh + d, 0.0f);
      for (int64_t p = 0; p < num_keys; ++p) {
        const int64_t slot =
            static_cast<int64_t>(kv.block_table[p / kv.block_size]) *
                kv.block_size + p % kv.block_size;
        const float* vp = kv.v_pool + slot * row + kvh * d;
        const float weight = static_cast<float>(scores[p] / denominator);
        for (int64_t i = 0; i < d; ++i) oh[i] += weight * vp[i];
      }
    }
  }
}

}  // namespace reference
}  // namespace tributary
