#include "engine/model/hybrid_decoder.h"

#include <algorithm>
#include <memory>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/backend/random_fill.h"
#include "engine/base/logging.h"
#include "engine/base/status_macros.h"
#include "engine/model/hybrid_decoder_step.h"

namespace tributary {
namespace {

// A view of the same memory with another shape (same element count).
Tensor View(const Tensor& t, const Shape& shape) {
  Tensor v = t;
  v.shape = shape;
  return v;
}

// Rows [begin, begin + count) of the outermost dimension.
Tensor Rows(const Tensor& t, int64_t begin, int64_t count) {
  Tensor v = t;
  const size_t row_bytes = t.size_bytes() / t.shape[0];
  v.data = static_cast<char*>(t.data) + begin * row_bytes;
  v.shape.dims[0] = count;
  return v;
}

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

// The activations of one step, [T, ·] each, freed when the step ends.
HybridDecoder::HybridDecoder(const ModelConfig& config, Backend* backend,
                             const CacheConfig& cache_config)
    : config_(&config), backend_(backend), cache_config_(cache_config) {}

HybridDecoder::~HybridDecoder() {
  for (Tensor& t : owned_) backend_->Free(t);
  for (Tensor& t : workspace_) backend_->Free(t);
  for (Tensor& t : intervention_workspace_) backend_->Free(t);
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
                             Shape{cc.num_state_slots,
                                   c.linear_conv_kernel_dim - 1,
                                   c.linear_conv_dim()}));
      owned_.push_back(layer.linear.window_pool);
      ASSIGN_OR_RETURN(
          layer.linear.state_pool,
          backend_->Allocate(f32, Shape{cc.num_state_slots,
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
  const ModelConfig& c = *config_;
  const int64_t num_tokens = static_cast<int64_t>(ids.size());
  const int64_t hidden = c.hidden_size;
  const int64_t num_sublayers = 2 * c.num_hidden_layers;
  const ElementType act = backend_->activation_type();

  // Step activations: the n-th buffer asked for in a step reuses the n-th
  // buffer of earlier steps when it is large enough (the order of requests
  // is the same every step), so a steady stream of steps allocates nothing.
  size_t next_buffer = 0;
  auto allocate = [&](ElementType type,
                      const Shape& shape) -> absl::StatusOr<Tensor> {
    Tensor wanted;
    wanted.type = type;
    wanted.shape = shape;
    if (next_buffer == workspace_.size()) workspace_.emplace_back();
    Tensor& buffer = workspace_[next_buffer++];
    if (buffer.data == nullptr || buffer.size_bytes() < wanted.size_bytes()) {
      backend_->Free(buffer);
      ASSIGN_OR_RETURN(buffer, backend_->Allocate(type, shape));
    }
    wanted.data = buffer.data;
    return wanted;
  };

  // The widest per-token activation of any sublayer.
  int64_t wide = std::max({hidden, c.intermediate_size});
  if (c.num_full_attention_layers() > 0) {
    wide = std::max({wide, c.q_proj_rows(), c.kv_proj_rows()});
  }
  if (c.num_linear_attention_layers() > 0) {
    wide = std::max({wide, c.linear_conv_dim(), c.linear_value_dim()});
  }
  Step step;
  step.backend = backend_;
  step.num_tokens = num_tokens;
  ASSIGN_OR_RETURN(step.stream, allocate(act, Shape{num_tokens, hidden}));
  ASSIGN_OR_RETURN(step.normed, allocate(act, Shape{num_tokens, hidden}));
  ASSIGN_OR_RETURN(step.update, allocate(act, Shape{num_tokens, hidden}));
  ASSIGN_OR_RETURN(step.wide_a, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.wide_b, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.wide_c, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.small_a, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.small_b, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.small_c, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.small_d, allocate(act, Shape{num_tokens, wide}));
  ASSIGN_OR_RETURN(step.small_e, allocate(act, Shape{num_tokens, wide}));
  if (c.num_linear_attention_layers() > 0) {
    ASSIGN_OR_RETURN(step.gates,
                     allocate(ElementType::kF32,
                              Shape{2 * num_tokens, c.linear_num_value_heads}));
  }
  if (options.residual_stats) {
    ASSIGN_OR_RETURN(step.stats, allocate(ElementType::kF32,
                                          Shape{num_sublayers, num_tokens,
                                                kResidualStatsColumns}));
  }
  StepIo io;
  ASSIGN_OR_RETURN(io.ids, allocate(ElementType::kI32, Shape{num_tokens}));
  RETURN_IF_ERROR(backend_->CopyFromHost(ids.data(), io.ids));

  const StepInterventions* iv =
      options.interventions != nullptr && !options.interventions->empty()
          ? options.interventions
          : nullptr;
  // The step in parts (Backend::StepParts): contiguous runs of sequences of
  // about equal token counts, part p's sequences [part_begin[p],
  // part_begin[p + 1]). Interventions address rows of the whole step and
  // copy to and from the host mid-step: those steps run in one piece.
  const int64_t num_sequences = static_cast<int64_t>(layout.sequences.size());
  const int num_parts =
      iv == nullptr
          ? static_cast<int>(std::clamp<int64_t>(backend_->StepParts(layout), 1,
                                                 num_sequences))
          : 1;
  const std::vector<int64_t> part_begin = layout.PartBegins(num_parts);

  ForwardOutput output;
  // The rows that get logits, as indexes into their part's rows (into the
  // step's for a step in one piece), and where each part's logit rows
  // begin; uploaded before the step's ops so that a graph region holds no
  // copy.
  std::vector<int32_t> rows32;
  std::vector<int64_t> part_first_logit_row;
  for (int p = 0; p < num_parts; ++p) {
    part_first_logit_row.push_back(static_cast<int64_t>(output.logit_rows.size()));
    const int64_t first_row = layout.sequences[part_begin[p]].token_offset;
    for (int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i) {
      const SequenceSlice& s = layout.sequences[i];
      const int64_t from =
          options.logits_for_all_tokens ? s.token_offset : s.token_offset + s.num_tokens - 1;
      for (int64_t t = from; t < s.token_offset + s.num_tokens; ++t) {
        output.logit_rows.push_back(t);
        rows32.push_back(static_cast<int32_t>(t - first_row));
      }
    }
  }
  const int64_t num_rows = static_cast<int64_t>(output.logit_rows.size());
  part_first_logit_row.push_back(num_rows);
  ASSIGN_OR_RETURN(io.rows, allocate(ElementType::kI32, Shape{num_rows}));
  RETURN_IF_ERROR(backend_->CopyFromHost(rows32.data(), io.rows));
  ASSIGN_OR_RETURN(io.logits,
                   allocate(ElementType::kF32, Shape{num_rows, c.vocab_size}));
  if (!options.device_choice.empty() &&
      static_cast<int64_t>(options.device_choice.size()) != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_choice has ", options.device_choice.size(),
                     " flags for ", num_rows, " logit rows"));
  }
  if (!options.token_choices.empty() &&
      static_cast<int64_t>(options.token_choices.size()) != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_choices has ", options.token_choices.size(),
                     " entries for ", num_rows, " logit rows"));
  }
  const int64_t num_history = static_cast<int64_t>(options.token_history.size());
  for (size_t r = 0; r < options.token_choices.size(); ++r) {
    const TokenChoice& choice = options.token_choices[r];
    if (choice.history_begin < 0 || choice.history_count < 0 ||
        int64_t{choice.history_begin} + choice.history_count > num_history) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token_choices[", r, "]: history entries [", choice.history_begin,
          ", +", choice.history_count, ") outside the ", num_history, " given"));
    }
  }
  {
    // A row's entries are its own: a backend writes its scratch into them
    // (TokenHistoryEntry::raw_logit), and on a GPU (or in the parts of a
    // step) two rows sharing an entry would race on it.
    std::vector<std::pair<int64_t, size_t>> ranges;  // (begin, row)
    for (size_t r = 0; r < options.token_choices.size(); ++r) {
      if (options.token_choices[r].history_count > 0) {
        ranges.emplace_back(options.token_choices[r].history_begin, r);
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) {
      const TokenChoice& before = options.token_choices[ranges[i - 1].second];
      if (ranges[i].first < int64_t{before.history_begin} + before.history_count) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token_choices[", ranges[i].second, "]: history entries from ",
            ranges[i].first, " overlap those of token_choices[",
            ranges[i - 1].second, "]; each row's entries must be its own"));
      }
    }
  }
  for (size_t e = 0; e < options.token_history.size(); ++e) {
    const int32_t id = options.token_history[e].token_id;
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token_history[", e, "]: token id ", id, " is outside the vocabulary [0, ",
          c.vocab_size, ")"));
    }
  }
  io.device_choice = !options.device_choice.empty();
  io.draws = io.device_choice && !options.token_choices.empty();
  bool with_logprobs = false;
  for (const TokenChoice& choice : options.token_choices) {
    with_logprobs = with_logprobs || choice.num_logprobs >= 0;
  }
  if (io.device_choice) {
    ASSIGN_OR_RETURN(io.ids_chosen, allocate(ElementType::kI32, Shape{num_rows}));
    // Allocated whether or not this step draws, so that the buffers after
    // them keep their places from step to step (and graphs their arguments).
    ASSIGN_OR_RETURN(io.choices, allocate(ElementType::kI32,
                                          Shape{num_rows, kTokenChoiceWords}));
    ASSIGN_OR_RETURN(io.logprobs, allocate(ElementType::kI32,
                                           Shape{num_rows, kTokenLogprobsWords}));
    ASSIGN_OR_RETURN(io.history,
                     allocate(ElementType::kI32,
                              Shape{std::max<int64_t>(num_history, 1),
                                    kTokenHistoryWords}));
    if (io.draws && num_history > 0) {
      Tensor used = io.history;
      used.shape = Shape{num_history, kTokenHistoryWords};
      RETURN_IF_ERROR(backend_->CopyFromHost(options.token_history.data(), used));
    }
    if (io.draws) {
      RETURN_IF_ERROR(backend_->CopyFromHost(options.token_choices.data(), io.choices));
    }
  }

  // The whole step's layout, for the parts' backends' owner too: nothing
  // it runs after the parts may see an earlier step's.
  RETURN_IF_ERROR(backend_->SetBatchLayout(layout));
  if (num_parts == 1) {
    // A decode step without interventions is the same work at every step of
    // its batch size (and context bucket): one graph region, which a backend
    // with graphs replays (backend.h). Interventions copy to and from the
    // host mid-step, and prefill shapes vary: those run as plain ops.
    bool graph_region = iv == nullptr;
    for (const SequenceSlice& s : layout.sequences) {
      if (s.num_tokens != 1 || s.first_position == 0) graph_region = false;
    }
    if (graph_region) backend_->BeginGraphRegion();
    RETURN_IF_ERROR(RunStep(step, io, options, iv, &output));
    if (graph_region) RETURN_IF_ERROR(backend_->EndGraphRegion());
  } else {
    // Each part: its sequences' layout from row 0, its rows of every buffer
    // (a buffer of [T, w] for some w holds [n, w] from row r at r · w), its
    // logit rows.
    std::vector<BatchLayout> part_layouts(static_cast<size_t>(num_parts));
    for (int p = 0; p < num_parts; ++p) {
      const int64_t first_row = layout.sequences[part_begin[p]].token_offset;
      for (int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i) {
        SequenceSlice s = layout.sequences[i];
        s.token_offset -= first_row;
        part_layouts[p].sequences.push_back(std::move(s));
      }
    }
    RETURN_IF_ERROR(backend_->RunInParts(
        num_parts, [&](int p, Backend& part_backend) -> absl::Status {
          const BatchLayout& part_layout = part_layouts[p];
          RETURN_IF_ERROR(part_backend.SetBatchLayout(part_layout));
          const int64_t r = layout.sequences[part_begin[p]].token_offset;
          const int64_t n = part_layout.num_tokens();
          auto rows_of = [&](const Tensor& t) {
            return t.data == nullptr ? t : Rows(t, r, n);
          };
          Step part;
          part.backend = &part_backend;
          part.num_tokens = n;
          part.first_row = r;
          part.stream = rows_of(step.stream);
          part.normed = rows_of(step.normed);
          part.update = rows_of(step.update);
          part.wide_a = rows_of(step.wide_a);
          part.wide_b = rows_of(step.wide_b);
          part.wide_c = rows_of(step.wide_c);
          part.small_a = rows_of(step.small_a);
          part.small_b = rows_of(step.small_b);
          part.small_c = rows_of(step.small_c);
          part.small_d = rows_of(step.small_d);
          part.small_e = rows_of(step.small_e);
          // gates [2T, Hv] as g then beta: the part's g and beta side by side in
          // its 2n rows.
          if (step.gates.data != nullptr) part.gates = Rows(step.gates, 2 * r, 2 * n);
          part.stats = step.stats;
          const int64_t lr = part_first_logit_row[p];
          const int64_t ln = part_first_logit_row[p + 1] - lr;
          auto logit_rows_of = [&](const Tensor& t) {
            return t.data == nullptr ? t : Rows(t, lr, ln);
          };
          StepIo part_io = io;
          part_io.ids = Rows(io.ids, r, n);
          part_io.rows = Rows(io.rows, lr, ln);
          part_io.logits = Rows(io.logits, lr, ln);
          part_io.ids_chosen = logit_rows_of(io.ids_chosen);
          part_io.choices = logit_rows_of(io.choices);
          part_io.logprobs = logit_rows_of(io.logprobs);
          return RunStep(part, part_io, options, nullptr, nullptr);
        }));
  }
  if (!io.device_choice) {
    output.logits.resize(static_cast<size_t>(num_rows * c.vocab_size));
    RETURN_IF_ERROR(backend_->CopyToHost(io.logits, output.logits.data()));
  } else {
    output.device_ids.resize(static_cast<size_t>(num_rows));
    RETURN_IF_ERROR(backend_->CopyToHost(io.ids_chosen, output.device_ids.data()));
    if (with_logprobs) {
      output.device_logprobs.resize(static_cast<size_t>(num_rows));
      RETURN_IF_ERROR(backend_->CopyToHost(io.logprobs, output.device_logprobs.data()));
    }
    int64_t kept = 0;
    for (int64_t r = 0; r < num_rows; ++r) kept += options.device_choice[r] ? 0 : 1;
    output.logits.resize(static_cast<size_t>(kept * c.vocab_size));
    int64_t at = 0;
    for (int64_t r = 0; r < num_rows; ++r) {
      if (options.device_choice[r]) continue;
      RETURN_IF_ERROR(backend_->CopyToHost(
          Rows(io.logits, r, 1), output.logits.data() + at * c.vocab_size));
      ++at;
    }
  }
  if (options.residual_stats) {
    output.residual_stats.resize(
        static_cast<size_t>(num_sublayers * num_tokens * kResidualStatsColumns));
    RETURN_IF_ERROR(backend_->CopyToHost(step.stats, output.residual_stats.data()));
    // The stream entering the final norm is the last sublayer's sum.
    output.final_stream_norm.resize(static_cast<size_t>(num_tokens));
    const float* last = output.residual_stats.data() +
                        (num_sublayers - 1) * num_tokens * kResidualStatsColumns;
    for (int64_t t = 0; t < num_tokens; ++t) {
      output.final_stream_norm[t] = last[t * kResidualStatsColumns + kStatSumNorm];
    }
  }
  RETURN_IF_ERROR(backend_->Synchronize());
  return output;
}

absl::Status HybridDecoder::RunStep(Step& step, const StepIo& io,
                                    const ForwardOptions& options,
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
      const Tensor stats = options.residual_stats ? SublayerStats(step, sublayer)
                                                  : Tensor{};
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
  Tensor selected = View(step.normed, Shape{io.rows.num_elements(), c.hidden_size});
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

Tensor HybridDecoder::SublayerStats(const Step& step, int64_t sublayer) {
  if (step.stats.data == nullptr) return Tensor{};
  Tensor all_rows = Rows(step.stats, sublayer, 1);
  all_rows.shape = Shape{step.stats.shape[1], kResidualStatsColumns};
  return Rows(all_rows, step.first_row, step.num_tokens);
}

void HybridDecoder::RunLinearAttention(const Layer& layer, Step& step) {
  const ModelConfig& c = *config_;
  const LinearLayer& w = layer.linear;
  const int64_t t = step.num_tokens;
  const int64_t hk = c.linear_num_key_heads, hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t value_dim = c.linear_value_dim();

  Tensor mixed = View(step.wide_a, Shape{t, c.linear_conv_dim()});
  Tensor conv_out = View(step.wide_b, Shape{t, c.linear_conv_dim()});
  Tensor z = View(step.wide_c, Shape{t, value_dim});
  Tensor b = View(step.small_a, Shape{t, hv});
  Tensor a = View(step.small_b, Shape{t, hv});
  step.backend->MatMuls(step.normed, {{&w.in_proj_qkv, &mixed},
                                   {&w.in_proj_z, &z},
                                   {&w.in_proj_b, &b},
                                   {&w.in_proj_a, &a}});
  step.backend->CausalConv1dSilu(mixed, w.conv1d, w.window_pool, conv_out);

  // The split q, k, v (mixed is free again: reuse it) and the gates, for a
  // backend that runs the core op by op.
  Backend::GdnScratch scratch;
  scratch.q = View(step.wide_a, Shape{t, hk, dk});
  scratch.k = View(step.small_c, Shape{t, hk, dk});
  scratch.v = View(step.small_d, Shape{t, hv, dv});
  scratch.g = Rows(step.gates, 0, t);
  scratch.beta = Rows(step.gates, t, t);
  // Apart from every input: a fused backend reads them while it writes.
  Tensor core = View(step.small_e, Shape{t, hv, dv});
  step.backend->GatedDeltaNet(conv_out, a, b, w.a_log, w.dt_bias, scratch,
                          w.state_pool, core);
  Tensor gated = View(step.small_b, Shape{t, value_dim});
  step.backend->GatedRmsNorm(core, z, w.norm, static_cast<float>(c.rms_norm_eps),
                         gated);
  step.backend->MatMul(gated, w.out_proj, step.update);
}

void HybridDecoder::RunAttention(const Layer& layer, Step& step) {
  const ModelConfig& c = *config_;
  const AttentionLayer& w = layer.attention;
  const int64_t t = step.num_tokens;
  const int64_t heads = c.num_attention_heads, kv_heads = c.num_key_value_heads;
  const int64_t d = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  Tensor q_and_gate = View(step.wide_a, Shape{t, c.q_proj_rows()});
  Tensor k = View(step.wide_b, Shape{t, c.kv_proj_rows()});
  Tensor v = View(step.wide_c, Shape{t, c.kv_proj_rows()});
  step.backend->MatMuls(step.normed,
                    {{&w.q_proj, &q_and_gate}, {&w.k_proj, &k}, {&w.v_proj, &v}});
  // Per head of q_and_gate: d query rows, then d gate rows (model-spec §3.1).
  Tensor q = View(step.small_a, Shape{t, heads, d});
  Tensor gate = View(step.small_b, Shape{t, heads, d});
  step.backend->AttentionInputs(q_and_gate, View(k, Shape{t, kv_heads, d}),
                            View(v, Shape{t, kv_heads, d}), w.q_norm, w.k_norm,
                            eps, c.rotary_dim(), static_cast<float>(c.rope_theta),
                            q, gate, w.k_pool, w.v_pool);
  Tensor attended = View(step.small_c, Shape{t, heads, d});
  step.backend->PagedAttention(q, w.k_pool, w.v_pool,
                           static_cast<float>(c.attention_scale()), attended);
  step.backend->SigmoidGate(attended, gate);
  step.backend->MatMul(View(attended, Shape{t, heads * d}), w.o_proj, step.update);
}

void HybridDecoder::RunMlp(const Layer& layer, Step& step) {
  const int64_t t = step.num_tokens;
  Tensor gate = View(step.wide_a, Shape{t, config_->intermediate_size});
  Tensor up = View(step.wide_b, Shape{t, config_->intermediate_size});
  step.backend->GateUpSwiGlu(step.normed, layer.gate_proj, layer.up_proj, gate, up, gate);
  step.backend->MatMul(gate, layer.down_proj, step.update);
}

}  // namespace tributary
