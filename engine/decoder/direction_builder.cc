#include "engine/decoder/direction_builder.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tributary {

absl::StatusOr<std::vector<float>> MeanStream(
    HybridDecoder& decoder, const std::vector<std::vector<int32_t>>& prompts,
    StreamPoint point, bool all_tokens) {
  const ModelConfig& c = decoder.config();
  const CacheConfig& cache = decoder.cache_config();
  if (point.layer < 0 || point.layer >= c.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", point.layer, " is outside [0, ", c.num_hidden_layers, ")"));
  }
  if (prompts.empty()) {
    return absl::InvalidArgumentError("no prompts to average");
  }
  std::vector<double> sum(static_cast<size_t>(c.hidden_size), 0.0);
  int64_t count = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>& ids = prompts[i];
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n == 0 || n > cache.num_kv_blocks * cache.kv_block_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt ", i, " has ", n, " tokens; it must have 1 to ",
                       cache.num_kv_blocks * cache.kv_block_size));
    }
    RETURN_IF_ERROR(decoder.ResetStateSlot(0));
    BatchLayout layout;
    SequenceSlice s;
    s.num_tokens = n;
    s.state_slot = 0;
    for (int64_t p = 0; p < n; p += cache.kv_block_size) {
      s.block_table.push_back(static_cast<int32_t>(p / cache.kv_block_size));
    }
    layout.sequences.push_back(std::move(s));
    StepInterventions iv;
    const int32_t sublayer = 2 * point.layer + (point.after_ffn ? 1 : 0);
    for (int64_t t = all_tokens ? 0 : n - 1; t < n; ++t) {
      iv.captures.push_back({sublayer, t});
    }
    ForwardOptions options;
    options.residual_stats = false;
    options.interventions = &iv;
    ASSIGN_OR_RETURN(ForwardOutput out, decoder.Forward(layout, ids, options));
    for (const std::vector<float>& row : out.captured) {
      for (size_t d = 0; d < sum.size(); ++d) sum[d] += row[d];
      ++count;
    }
  }
  std::vector<float> mean(sum.size());
  for (size_t d = 0; d < sum.size(); ++d) {
    mean[d] = static_cast<float>(sum[d] / static_cast<double>(count));
  }
  return mean;
}

}  // namespace tributary
