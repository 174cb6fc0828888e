#include "engine/decoder/hybrid_decoder.h"

#include <algorithm>
#include <memory>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/backend/random_fill.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

// What each sublayer keeps in the step's scratch buffers
// (StepActivations::scratch, each [T, widest]): a buffer is reused within a
// sublayer once what it held is consumed.
namespace gdn_scratch {
enum : int { kMixedThenQ, kConvOut, kZ, kBeta, kDecayThenGated, kK, kV, kCore };
}  // namespace gdn_scratch
namespace attention_scratch {
enum : int { kQAndGate, kK, kV, kQ, kGate, kAttended };
}  // namespace attention_scratch
namespace mlp_scratch {
enum : int { kGateThenAct, kUp };
}  // namespace mlp_scratch
static_assert(gdn_scratch::kCore < kNumStepScratch &&
                  attention_scratch::kAttended < kNumStepScratch &&
                  mlp_scratch::kUp < kNumStepScratch,
              "every sublayer's scratch fits the step's");

absl::StatusOr<ElementType> ComputeTypeOf(const TensorView& view) {
  switch (view.dtype) {
    case DType::kBF16:
      return ElementType::kBF16;
    case DType::kF16:
      return ElementType::kF16;
    case DType::kF32:
      return ElementType::kF32;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          view.name, ": dtype ", DTypeName(view.dtype), " is not a weight type"));
  }
}

}  // namespace

std::function<void(int64_t, int64_t)> WeightLoadOptions::LogEveryTenth() {
  auto last_tenth = std::make_shared<int>(0);
  return [last_tenth](int64_t done, int64_t total) {
    const int tenth = total > 0 ? static_cast<int>(10 * done / total) : 10;
    if (tenth > *last_tenth) {
      *last_tenth = tenth;
      LogInfo("weights: ", 10 * tenth, "% (", done >> 20, " of ", total >> 20,
              " MiB)");
    }
  };
}

absl::Status CacheConfig::Validate() const {
  if (num_kv_blocks < 0 || num_kv_blocks > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_blocks = ", num_kv_blocks, " must be in [0, 2^31)"));
  }
  if (kv_block_size < 1 || kv_block_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_block_size = ", kv_block_size, " must be in [1, 4096]"));
  }
  if (num_state_slots < 1 || num_state_slots > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_state_slots = ", num_state_slots, " must be in [1, 65536]"));
  }
  if (num_checkpoint_slots < 0 || num_checkpoint_slots > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_checkpoint_slots = ", num_checkpoint_slots,
                     " must be in [0, 65536]"));
  }
  return absl::OkStatus();
}

struct HybridDecoder::AttentionLayer {
  Tensor q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  Tensor k_pool, v_pool;  // [blocks, block_size, Hkv, head_dim]
};

struct HybridDecoder::LinearLayer {
  Tensor in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, dt_bias, a_log,
      norm, out_proj;
  Tensor window_pool;  // [slots, kernel − 1, conv_dim]
  Tensor state_pool;   // [slots, Hv, dk, dv]
};

struct HybridDecoder::Layer {
  LayerKind kind;
  Tensor input_layernorm, post_attention_layernorm;
  Tensor gate_proj, up_proj, down_proj;
  AttentionLayer attention;
  LinearLayer linear;
};

HybridDecoder::HybridDecoder(const ModelConfig& config, Backend* backend,
                             const CacheConfig& cache_config)
    : config_(&config),
      backend_(backend),
      cache_config_(cache_config),
      runner_(backend, StepDims::ForModel(config)),
      intervention_buffers_(backend) {}

HybridDecoder::~HybridDecoder() {
  for (Tensor& t : owned_) backend_->Free(t);
}

absl::StatusOr<std::unique_ptr<HybridDecoder>> HybridDecoder::Create(
    const ModelConfig& config, const ModelWeights& weights, Backend* backend,
    const CacheConfig& cache_config, const WeightLoadOptions& load) {
  RETURN_IF_ERROR(cache_config.Validate());
  if (static_cast<int64_t>(weights.layers.size()) != config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights have ", weights.layers.size(),
                     " layers, config has ", config.num_hidden_layers));
  }
  std::unique_ptr<HybridDecoder> decoder(
      new HybridDecoder(config, backend, cache_config));
  RETURN_IF_ERROR(decoder->ImportWeights(weights, load));
  RETURN_IF_ERROR(decoder->AllocateCaches());
  return decoder;
}

absl::StatusOr<Tensor> HybridDecoder::Import(const TensorView& view,
                                             const Shape& shape,
                                             WeightRole role) {
  ASSIGN_OR_RETURN(ElementType type, ComputeTypeOf(view));
  if (shape.num_elements() != view.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat(view.name, ": ", view.num_elements(),
                     " elements, expected shape ", shape.ToString()));
  }
  Tensor t;
  if (load_.random_seed) {
    ASSIGN_OR_RETURN(t, backend_->Allocate(backend_->weight_type(type, shape.rank),
                                           shape));
    owned_.push_back(t);
    float low = 0.0f, high = 0.0f;
    switch (role) {
      case WeightRole::kMatrix:
        high = std::sqrt(3.0f / static_cast<float>(shape[shape.rank - 1]));
        low = -high;
        break;
      case WeightRole::kEmbedding:
        low = -1.0f, high = 1.0f;
        break;
      case WeightRole::kZeroCentredNorm:
        low = -0.1f, high = 0.1f;
        break;
      case WeightRole::kPlainNorm:
        low = 0.9f, high = 1.1f;
        break;
      case WeightRole::kConv:
        high = std::sqrt(3.0f / static_cast<float>(shape[shape.rank - 1]));
        low = -high;
        break;
      case WeightRole::kALog:
        low = 0.0f, high = std::log(16.0f);
        break;
      case WeightRole::kDtBias:
        low = -6.0f, high = -2.0f;
        break;
    }
    // One stream of values per tensor, in load order.
    const uint64_t tensor_seed = MixBits64(*load_.random_seed + owned_.size());
    backend_->FillRandom(t, tensor_seed, low, high, type);
  } else {
    ASSIGN_OR_RETURN(t, backend_->ImportWeight(view.data, type, shape));
    owned_.push_back(t);
  }
  loaded_bytes_ += static_cast<int64_t>(view.size_bytes);
  if (load_.progress) load_.progress(loaded_bytes_, total_weight_bytes_);
  return t;
}

absl::Status HybridDecoder::ImportWeights(const ModelWeights& w,
                                          const WeightLoadOptions& load) {
  const ModelConfig& c = *config_;
  load_ = load;
  loaded_bytes_ = 0;
  total_weight_bytes_ = 0;
  for (const TensorView* v : AllViews(w)) {
    total_weight_bytes_ += static_cast<int64_t>(v->size_bytes);
  }
  // A matmul weight, in the layout the backend's MatMul reads fastest
  // (Backend::PrepareMatMulWeight). A prepared copy takes the imported
  // tensor's place in owned_ (Import left it last), which keeps owned_'s
  // count: synthetic weights number their random streams by it.
  auto matrix = [&](const TensorView& v) -> absl::StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor t, Import(v, Shape{v.shape[0], v.shape[1]},
                                      WeightRole::kMatrix));
    ASSIGN_OR_RETURN(Tensor prepared, backend_->PrepareMatMulWeight(t));
    if (prepared.data != t.data) {
      backend_->Free(owned_.back());
      owned_.back() = prepared;
    }
    return prepared;
  };
  auto vector = [&](const TensorView& v, WeightRole role) {
    return Import(v, Shape{v.num_elements()}, role);
  };
  const WeightRole norm = WeightRole::kZeroCentredNorm;
  ASSIGN_OR_RETURN(embed_tokens_,
                   Import(w.embed_tokens,
                          Shape{w.embed_tokens.shape[0], w.embed_tokens.shape[1]},
                          WeightRole::kEmbedding));
  ASSIGN_OR_RETURN(final_norm_, vector(w.final_norm, norm));
  if (!w.tied_embeddings) {
    ASSIGN_OR_RETURN(lm_head_, matrix(w.lm_head));
  }
  layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& lw = w.layers[i];
    Layer& layer = layers_[i];
    layer.kind = c.layer_types[i];
    ASSIGN_OR_RETURN(layer.input_layernorm, vector(lw.input_layernorm, norm));
    ASSIGN_OR_RETURN(layer.post_attention_layernorm,
                     vector(lw.post_attention_layernorm, norm));
    ASSIGN_OR_RETURN(layer.gate_proj, matrix(lw.mlp.gate_proj));
    ASSIGN_OR_RETURN(layer.up_proj, matrix(lw.mlp.up_proj));
    ASSIGN_OR_RETURN(layer.down_proj, matrix(lw.mlp.down_proj));
    if (layer.kind == LayerKind::kFullAttention) {
      const AttentionWeights& a = *lw.attention;
      AttentionLayer& al = layer.attention;
      ASSIGN_OR_RETURN(al.q_proj, matrix(a.q_proj));
      ASSIGN_OR_RETURN(al.k_proj, matrix(a.k_proj));
      ASSIGN_OR_RETURN(al.v_proj, matrix(a.v_proj));
      ASSIGN_OR_RETURN(al.o_proj, matrix(a.o_proj));
      ASSIGN_OR_RETURN(al.q_norm, vector(a.q_norm, norm));
      ASSIGN_OR_RETURN(al.k_norm, vector(a.k_norm, norm));
    } else {
      const LinearAttentionWeights& g = *lw.linear_attention;
      LinearLayer& ll = layer.linear;
      ASSIGN_OR_RETURN(ll.in_proj_qkv, matrix(g.in_proj_qkv));
      ASSIGN_OR_RETURN(ll.in_proj_z, matrix(g.in_proj_z));
      ASSIGN_OR_RETURN(ll.in_proj_b, matrix(g.in_proj_b));
      ASSIGN_OR_RETURN(ll.in_proj_a, matrix(g.in_proj_a));
      // [conv_dim, 1, kernel] is stored as [conv_dim, kernel].
      ASSIGN_OR_RETURN(ll.conv1d,
                       Import(g.conv1d,
                              Shape{c.linear_conv_dim(), c.linear_conv_kernel_dim},
                              WeightRole::kConv));
      ASSIGN_OR_RETURN(ll.dt_bias, vector(g.dt_bias, WeightRole::kDtBias));
      ASSIGN_OR_RETURN(ll.a_log, vector(g.a_log, WeightRole::kALog));
      ASSIGN_OR_RETURN(ll.norm, vector(g.norm, WeightRole::kPlainNorm));
      ASSIGN_OR_RETURN(ll.out_proj, matrix(g.out_proj));
    }
  }
  if (w.tied_embeddings) {
    // One matrix, as transformers ties them; the table still gathers rows,
    // so a prepared copy is the head's own (made last, after every random
    // stream is numbered).
    ASSIGN_OR_RETURN(lm_head_, backend_->PrepareMatMulWeight(embed_tokens_));
    if (lm_head_.data != embed_tokens_.data) owned_.push_back(lm_head_);
  }
  load_ = WeightLoadOptions{};  // the callback's captures may not outlive Create
  return absl::OkStatus();
}

absl::Status HybridDecoder::AllocateCaches() {
  const ModelConfig& c = *config_;
  const CacheConfig& cc = cache_config_;
  const ElementType f32 = ElementType::kF32;
  for (Layer& layer : layers_) {
    if (layer.kind == LayerKind::kFullAttention) {
      const Shape pool{cc.num_kv_blocks, cc.kv_block_size,
                       c.num_key_value_heads, c.head_dim};
      ASSIGN_OR_RETURN(layer.attention.k_pool,
                       backend_->Allocate(backend_->activation_type(), pool));
      owned_.push_back(layer.attention.k_pool);
      ASSIGN_OR_RETURN(layer.attention.v_pool,
                       backend_->Allocate(backend_->activation_type(), pool));
      owned_.push_back(layer.attention.v_pool);
    } else {
      ASSIGN_OR_RETURN(
          layer.linear.window_pool,
          backend_->Allocate(backend_->activation_type(),
                             Shape{cc.num_state_rows(),
                                   c.linear_conv_kernel_dim - 1,
                                   c.linear_conv_dim()}));
      owned_.push_back(layer.linear.window_pool);
      ASSIGN_OR_RETURN(
          layer.linear.state_pool,
          backend_->Allocate(f32, Shape{cc.num_state_rows(),
                                        c.linear_num_value_heads,
                                        c.linear_key_head_dim,
                                        c.linear_value_head_dim}));
      owned_.push_back(layer.linear.state_pool);
      backend_->Zero(layer.linear.window_pool);
      backend_->Zero(layer.linear.state_pool);
    }
  }
  return backend_->Synchronize();
}

absl::Status HybridDecoder::ResetStateSlot(int32_t slot) {
  if (slot < 0 || slot >= cache_config_.num_state_slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("state slot ", slot, " is outside [0, ",
                     cache_config_.num_state_slots, ")"));
  }
  for (Layer& layer : layers_) {
    if (layer.kind == LayerKind::kLinearAttention) {
      backend_->ZeroRows(layer.linear.window_pool, slot, slot + 1);
      backend_->ZeroRows(layer.linear.state_pool, slot, slot + 1);
    }
  }
  return absl::OkStatus();
}

absl::Status HybridDecoder::CopyStateSlot(int64_t src_row, int64_t dst_row) {
  const int64_t rows = cache_config_.num_state_rows();
  if (src_row < 0 || src_row >= rows || dst_row < 0 || dst_row >= rows ||
      src_row == dst_row) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state copy from pool row ", src_row, " to ", dst_row,
        ": rows must be distinct and inside [0, ", rows, ")"));
  }
  for (const Layer& layer : layers_) {
    if (layer.kind != LayerKind::kLinearAttention) continue;
    backend_->CopyRows(layer.linear.window_pool, src_row, dst_row, 1);
    backend_->CopyRows(layer.linear.state_pool, src_row, dst_row, 1);
  }
  return absl::OkStatus();
}

absl::Status HybridDecoder::CopyKvBlock(int32_t src, int32_t dst) {
  const int64_t blocks = cache_config_.num_kv_blocks;
  if (src < 0 || src >= blocks || dst < 0 || dst >= blocks || src == dst) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV block copy from ", src, " to ", dst,
                     ": blocks must be distinct and inside [0, ", blocks, ")"));
  }
  for (const Layer& layer : layers_) {
    if (layer.kind != LayerKind::kFullAttention) continue;
    backend_->CopyRows(layer.attention.k_pool, src, dst, 1);
    backend_->CopyRows(layer.attention.v_pool, src, dst, 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> HybridDecoder::ReadStateRow(
    int64_t row) const {
  if (row < 0 || row >= cache_config_.num_state_rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("state pool row ", row, " is outside [0, ",
                     cache_config_.num_state_rows(), ")"));
  }
  std::vector<std::vector<uint8_t>> rows;
  for (const Layer& layer : layers_) {
    if (layer.kind != LayerKind::kLinearAttention) continue;
    for (const Tensor* pool :
         {&layer.linear.window_pool, &layer.linear.state_pool}) {
      const Tensor view = RowsOf(*pool, row, 1);
      rows.emplace_back(view.size_bytes());
      RETURN_IF_ERROR(backend_->CopyToHost(view, rows.back().data()));
    }
  }
  return rows;
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> HybridDecoder::ReadKvBlock(
    int32_t block) const {
  if (block < 0 || block >= cache_config_.num_kv_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV block ", block, " is outside [0, ",
                     cache_config_.num_kv_blocks, ")"));
  }
  std::vector<std::vector<uint8_t>> blocks;
  for (const Layer& layer : layers_) {
    if (layer.kind != LayerKind::kFullAttention) continue;
    for (const Tensor* pool : {&layer.attention.k_pool, &layer.attention.v_pool}) {
      const Tensor view = RowsOf(*pool, block, 1);
      blocks.emplace_back(view.size_bytes());
      RETURN_IF_ERROR(backend_->CopyToHost(view, blocks.back().data()));
    }
  }
  return blocks;
}

absl::Status HybridDecoder::CheckLayout(const BatchLayout& layout,
                                        absl::Span<const int32_t> ids) const {
  if (layout.sequences.empty()) {
    return absl::InvalidArgumentError("a step needs at least one sequence");
  }
  int64_t next_row = 0;
  std::set<int32_t> slots;
  for (size_t i = 0; i < layout.sequences.size(); ++i) {
    const SequenceSlice& s = layout.sequences[i];
    const std::string where = absl::StrCat("sequence ", i, ": ");
    if (s.num_tokens < 1 || s.token_offset != next_row) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "rows must be contiguous and non-empty (token_offset ",
          s.token_offset, ", num_tokens ", s.num_tokens, ")"));
    }
    next_row += s.num_tokens;
    if (s.first_position < 0 ||
        s.first_position + s.num_tokens > (int64_t{1} << 31) - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "first_position ", s.first_position, " out of range"));
    }
    if (s.state_slot < 0 || s.state_slot >= cache_config_.num_state_slots) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "state slot ", s.state_slot, " is outside [0, ",
                       cache_config_.num_state_slots, ")"));
    }
    if (!slots.insert(s.state_slot).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "state slot ", s.state_slot, " is used by two sequences"));
    }
    if (config_->num_full_attention_layers() > 0) {
      const int64_t positions = s.first_position + s.num_tokens;
      const int64_t blocks_needed =
          (positions + cache_config_.kv_block_size - 1) / cache_config_.kv_block_size;
      if (static_cast<int64_t>(s.block_table.size()) < blocks_needed) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "block table has ", s.block_table.size(), " blocks, ",
            blocks_needed, " needed for ", positions, " positions"));
      }
      for (int32_t b : s.block_table) {
        if (b < 0 || b >= cache_config_.num_kv_blocks) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, "KV block ", b, " is outside [0, ",
              cache_config_.num_kv_blocks, ")"));
        }
      }
    }
  }
  if (next_row != static_cast<int64_t>(ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout covers ", next_row, " tokens, ", ids.size(), " ids given"));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= config_->vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary [0, ",
          config_->vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ForwardOutput> HybridDecoder::Forward(
    const BatchLayout& layout, absl::Span<const int32_t> ids,
    const ForwardOptions& options) {
  RETURN_IF_ERROR(CheckLayout(layout, ids));
  intervention_buffers_.Reset();
  uploaded_vectors_.clear();
  return runner_.Run(layout, ids, options,
                     [this](StepActivations& step, const StepIo& io,
                            const StepInterventions* iv,
                            ForwardOutput* output) {
                       return RunStep(step, io, iv, output);
                     });
}

absl::Status HybridDecoder::RunStep(StepActivations& step, const StepIo& io,
                                    const StepInterventions* iv,
                                    ForwardOutput* output) {
  const ModelConfig& c = *config_;
  Backend& backend = *step.backend;
  backend.EmbeddingGather(io.ids, embed_tokens_, step.stream);
  if (iv != nullptr) {
    RETURN_IF_ERROR(ApplyInterventions(*iv, -1, step, output));
  }
  const float eps = static_cast<float>(c.rms_norm_eps);
  // Without interventions (which act on the stream between a sublayer's
  // add and the next one's norm), each add is fused with the next norm.
  bool normed_ready = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& layer = layers_[l];
    for (int sub = 0; sub < 2; ++sub) {
      const bool is_ffn = sub == 1;
      if (!normed_ready) {
        backend.RmsNorm(step.stream,
                        is_ffn ? layer.post_attention_layernorm
                               : layer.input_layernorm,
                        eps, step.normed);
      }
      normed_ready = false;
      if (is_ffn) {
        RunMlp(layer, step);
      } else if (layer.kind == LayerKind::kLinearAttention) {
        RunLinearAttention(layer, step);
      } else {
        RunAttention(layer, step);
      }
      const int sublayer = static_cast<int>(2 * l + sub);
      const Tensor stats = SublayerStats(step, sublayer);
      if (iv != nullptr) {
        for (const StepInterventions::Skip& skip : iv->skips) {
          if (skip.sublayer == sublayer) {
            backend.ZeroRows(step.update, skip.row_begin, skip.row_end);
          }
        }
      }
      const Tensor* next_norm =
          sub == 0 ? &layer.post_attention_layernorm
          : l + 1 < c.num_hidden_layers ? &layers_[l + 1].input_layernorm
                                        : nullptr;
      if (iv == nullptr && next_norm != nullptr) {
        backend.ResidualAddRmsNorm(step.stream, step.update, stats, *next_norm,
                                   eps, step.normed);
        normed_ready = true;
      } else {
        backend.ResidualAdd(step.stream, step.update, stats);
      }
      if (iv != nullptr) {
        RETURN_IF_ERROR(ApplyInterventions(*iv, sublayer, step, output));
      }
    }
  }

  // The logit rows' final norm into the normed buffer (free again), then
  // the LM head.
  Tensor selected = AsShape(step.normed, Shape{io.rows.num_elements(), c.hidden_size});
  backend.GatherRows(step.stream, io.rows, selected);
  backend.RmsNorm(selected, final_norm_, eps, selected);
  backend.MatMul(selected, lm_head_, io.logits);
  if (io.draws) {
    backend.ChooseTokens(io.logits, io.choices, io.history, io.ids_chosen,
                         io.logprobs);
  } else if (io.device_choice) {
    backend.ArgMaxRows(io.logits, io.ids_chosen);
  }
  return absl::OkStatus();
}

Tensor HybridDecoder::SublayerStats(const StepActivations& step, int64_t sublayer) {
  if (step.stats.data == nullptr) return Tensor{};
  const Tensor all_rows =
      AsShape(RowsOf(step.stats, sublayer, 1),
              Shape{step.stats.shape[1], kResidualStatsColumns});
  return RowsOf(all_rows, step.first_row, step.num_tokens);
}

void HybridDecoder::RunLinearAttention(const Layer& layer, StepActivations& step) {
  const ModelConfig& c = *config_;
  using namespace gdn_scratch;
  const LinearLayer& w = layer.linear;
  const int64_t t = step.num_tokens;
  const int64_t hk = c.linear_num_key_heads, hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t value_dim = c.linear_value_dim();

  Tensor mixed = AsShape(step.scratch[kMixedThenQ], Shape{t, c.linear_conv_dim()});
  Tensor conv_out = AsShape(step.scratch[kConvOut], Shape{t, c.linear_conv_dim()});
  Tensor z = AsShape(step.scratch[kZ], Shape{t, value_dim});
  Tensor b = AsShape(step.scratch[kBeta], Shape{t, hv});
  Tensor a = AsShape(step.scratch[kDecayThenGated], Shape{t, hv});
  step.backend->MatMuls(step.normed, {{&w.in_proj_qkv, &mixed},
                                   {&w.in_proj_z, &z},
                                   {&w.in_proj_b, &b},
                                   {&w.in_proj_a, &a}});
  step.backend->CausalConv1dSilu(mixed, w.conv1d, w.window_pool, conv_out);

  // The split q, k, v (mixed is free again: reuse it) and the gates, for a
  // backend that runs the core op by op.
  Backend::GdnScratch scratch;
  scratch.q = AsShape(step.scratch[kMixedThenQ], Shape{t, hk, dk});
  scratch.k = AsShape(step.scratch[kK], Shape{t, hk, dk});
  scratch.v = AsShape(step.scratch[kV], Shape{t, hv, dv});
  scratch.g = RowsOf(step.gates, 0, t);
  scratch.beta = RowsOf(step.gates, t, t);
  // Apart from every input: a fused backend reads them while it writes.
  Tensor core = AsShape(step.scratch[kCore], Shape{t, hv, dv});
  step.backend->GatedDeltaNet(conv_out, a, b, w.a_log, w.dt_bias, scratch,
                          w.state_pool, core);
  Tensor gated = AsShape(step.scratch[kDecayThenGated], Shape{t, value_dim});
  step.backend->GatedRmsNorm(core, z, w.norm, static_cast<float>(c.rms_norm_eps),
                         gated);
  step.backend->MatMul(gated, w.out_proj, step.update);
}

void HybridDecoder::RunAttention(const Layer& layer, StepActivations& step) {
  const ModelConfig& c = *config_;
  using namespace attention_scratch;
  const AttentionLayer& w = layer.attention;
  const int64_t t = step.num_tokens;
  const int64_t heads = c.num_attention_heads, kv_heads = c.num_key_value_heads;
  const int64_t d = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  Tensor q_and_gate = AsShape(step.scratch[kQAndGate], Shape{t, c.q_proj_rows()});
  Tensor k = AsShape(step.scratch[kK], Shape{t, c.kv_proj_rows()});
  Tensor v = AsShape(step.scratch[kV], Shape{t, c.kv_proj_rows()});
  step.backend->MatMuls(step.normed,
                    {{&w.q_proj, &q_and_gate}, {&w.k_proj, &k}, {&w.v_proj, &v}});
  // Per head of q_and_gate: d query rows, then d gate rows (model-spec §3.1).
  Tensor q = AsShape(step.scratch[kQ], Shape{t, heads, d});
  Tensor gate = AsShape(step.scratch[kGate], Shape{t, heads, d});
  step.backend->AttentionInputs(q_and_gate, AsShape(k, Shape{t, kv_heads, d}),
                            AsShape(v, Shape{t, kv_heads, d}), w.q_norm, w.k_norm,
                            eps, c.rotary_dim(), static_cast<float>(c.rope_theta),
                            q, gate, w.k_pool, w.v_pool);
  Tensor attended = AsShape(step.scratch[kAttended], Shape{t, heads, d});
  step.backend->PagedAttention(q, w.k_pool, w.v_pool,
                           static_cast<float>(c.attention_scale()), attended);
  step.backend->SigmoidGate(attended, gate);
  step.backend->MatMul(AsShape(attended, Shape{t, heads * d}), w.o_proj, step.update);
}

void HybridDecoder::RunMlp(const Layer& layer, StepActivations& step) {
  using namespace mlp_scratch;
  const int64_t t = step.num_tokens;
  Tensor gate = AsShape(step.scratch[kGateThenAct], Shape{t, config_->intermediate_size});
  Tensor up = AsShape(step.scratch[kUp], Shape{t, config_->intermediate_size});
  step.backend->GateUpSwiGlu(step.normed, layer.gate_proj, layer.up_proj, gate, up, gate);
  step.backend->MatMul(gate, layer.down_proj, step.update);
}

}  // namespace tributary
