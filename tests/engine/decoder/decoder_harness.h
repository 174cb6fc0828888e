// A decoder on a fixture model for the decoder tests, on any backend: the
// model, the backend, the decoder and a trivial block allocator, plus the
// whole-fixture check (prefill logits and residual norms against
// transformers, then the teacher-forced greedy continuation).
#ifndef TRIBUTARY_TESTS_ENGINE_DECODER_DECODER_HARNESS_H_
#define TRIBUTARY_TESTS_ENGINE_DECODER_DECODER_HARNESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/delta_rule.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "fixture_reference.h"

namespace tributary {
namespace testing_fixtures {

constexpr int64_t kBlockSize = 16;

class Harness {
 public:
  // Fails the current test (and ok() is false) when anything cannot be made.
  explicit Harness(const std::string& dir, int64_t num_blocks = 256,
                   int64_t num_slots = 8,
                   BackendKind backend = BackendKind::kCpu,
                   ElementType cuda_activations = ElementType::kBF16,
                   MatMulPrecision cpu_matmul = MatMulPrecision::kF32,
                   DeltaRuleForm cpu_delta_rule = DeltaRuleForm::kFastest,
                   int64_t num_checkpoint_slots = 0);
  bool ok() const { return decoder_ != nullptr; }
  HybridDecoder& decoder() { return *decoder_; }
  Backend& backend() { return *backend_; }
  int64_t vocab() const { return model_->config().vocab_size; }

  // Blocks for `num_tokens` positions, taken from `next_block` on, in order
  // or scrambled (reversed).
  std::vector<int32_t> Blocks(int64_t num_tokens, int32_t* next_block,
                              bool scrambled = false);

 private:
  std::unique_ptr<ModelDirectory> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<HybridDecoder> decoder_;
};

SequenceSlice Slice(int64_t offset, int64_t num_tokens, int64_t first_position,
                    int32_t slot, std::vector<int32_t> blocks);

PrefillResult ToPrefillResult(const ForwardOutput& out, int64_t num_tokens);

// Every prompt of the fixture at `fixture_path`: the prefill within
// `tolerance` (ExpectPrefillMatches), then the greedy continuation
// teacher-forced one decode step at a time, skipping reference margins below
// `near_tie` of the largest |logit| (ExpectGreedyMatches).
// Without `check_greedy`, the prefill only. The residual norms within
// `norm_tolerance` (< 0: `tolerance`).
void CheckModel(Harness& harness, const std::string& fixture_path,
                const std::string& name, double tolerance = 1e-4,
                double near_tie = 1e-3, bool check_greedy = true,
                double norm_tolerance = -1.0);

}  // namespace testing_fixtures
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_DECODER_DECODER_HARNESS_H_
