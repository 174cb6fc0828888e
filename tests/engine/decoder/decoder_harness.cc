#include "decoder_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

namespace tributary {
namespace testing_fixtures {

Harness::Harness(const std::string& dir, int64_t num_blocks, int64_t num_slots,
                 BackendKind backend_kind, ElementType cuda_activations,
                 MatMulPrecision cpu_matmul, DeltaRuleForm cpu_delta_rule,
                 int64_t num_checkpoint_slots) {
  auto model = ModelDirectory::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return;
  model_ = std::make_unique<ModelDirectory>(std::move(*model));
  BackendOptions options;
  options.kind = backend_kind;
  options.cpu.num_threads = 2;
  options.cuda.activation_type = cuda_activations;
  options.cpu.matmul_precision = cpu_matmul;
  options.cpu.delta_rule_form = cpu_delta_rule;
  auto backend = CreateBackend(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return;
  backend_ = std::move(*backend);
  auto decoder =
      HybridDecoder::Create(model_->config(), model_->weights(), backend_.get(),
                            {num_blocks, kBlockSize, num_slots,
                             num_checkpoint_slots});
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (decoder.ok()) decoder_ = std::move(*decoder);
}

std::vector<int32_t> Harness::Blocks(int64_t num_tokens, int32_t* next_block,
                                     bool scrambled) {
  std::vector<int32_t> table;
  for (int64_t p = 0; p < num_tokens; p += kBlockSize) {
    table.push_back((*next_block)++);
  }
  if (scrambled) std::reverse(table.begin(), table.end());
  return table;
}

SequenceSlice Slice(int64_t offset, int64_t num_tokens, int64_t first_position,
                    int32_t slot, std::vector<int32_t> blocks) {
  SequenceSlice s;
  s.token_offset = offset;
  s.num_tokens = num_tokens;
  s.first_position = first_position;
  s.state_slot = slot;
  s.block_table = std::move(blocks);
  return s;
}

PrefillResult ToPrefillResult(const ForwardOutput& out, int64_t num_tokens) {
  PrefillResult result;
  result.logits = out.logits;
  const int64_t num_sublayers =
      static_cast<int64_t>(out.residual_stats.size()) /
      (num_tokens * kResidualStatsColumns);
  for (int64_t s = 0; s < num_sublayers; ++s) {
    std::vector<std::array<double, 3>> per_token;
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* row = out.residual_stats.data() +
                         (s * num_tokens + t) * kResidualStatsColumns;
      per_token.push_back(
          {row[kStatStreamNorm], row[kStatUpdateNorm], row[kStatSumNorm]});
    }
    result.norms.push_back(std::move(per_token));
  }
  result.final_stream_norm.assign(out.final_stream_norm.begin(),
                                  out.final_stream_norm.end());
  return result;
}

void CheckModel(Harness& h, const std::string& fixture_path,
                const std::string& name, double tolerance, double near_tie,
                bool check_greedy, double norm_tolerance) {
  ASSERT_TRUE(h.ok());
  const std::vector<FixtureDump> dumps = ReadFixture(fixture_path);
  ASSERT_FALSE(dumps.empty()) << fixture_path;
  int32_t next_block = 0;
  for (size_t p = 0; p < dumps.size(); ++p) {
    const FixtureDump& dump = dumps[p];
    const std::string label = name + " prompt " + std::to_string(p);
    const int64_t n = static_cast<int64_t>(dump.prompt_ids.size());
    const int64_t total = n + static_cast<int64_t>(dump.generated_ids.size());
    ASSERT_TRUE(h.decoder().ResetStateSlot(0).ok());
    BatchLayout layout;
    layout.sequences.push_back(Slice(0, n, 0, 0, h.Blocks(total, &next_block)));
    auto out = h.decoder().Forward(layout, dump.prompt_ids,
                                   {/*residual_stats=*/true,
                                    /*logits_for_all_tokens=*/true});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectPrefillMatches(dump, ToPrefillResult(*out, n), h.vocab(), tolerance,
                         label, norm_tolerance);
    if (!check_greedy) continue;
    std::vector<float> last(out->logits.end() - h.vocab(), out->logits.end());
    int64_t position = n;
    ExpectGreedyMatches(
        dump, last,
        [&](int32_t id) {
          layout.sequences[0].token_offset = 0;
          layout.sequences[0].num_tokens = 1;
          layout.sequences[0].first_position = position++;
          auto step = h.decoder().Forward(layout, {id}, ForwardOptions{});
          EXPECT_TRUE(step.ok()) << step.status();
          return step.ok() ? step->logits : std::vector<float>();
        },
        h.vocab(), label, near_tie);
  }
}

}  // namespace testing_fixtures
}  // namespace tributary
