// Reading the reference fixtures of tests/fixtures/ (format:
// tests/fixtures/README.md) and comparing a decoder's output with them
// (design.md §7).
#ifndef TRIBUTARY_TESTS_ENGINE_DECODER_FIXTURE_REFERENCE_H_
#define TRIBUTARY_TESTS_ENGINE_DECODER_FIXTURE_REFERENCE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tributary {
namespace testing_fixtures {

struct ResidualEntry {
  int64_t layer = 0;
  std::string sublayer;  // "mixer" or "ffn"
  std::vector<double> stream_norm, update_norm, sum_norm;  // [T]
};

// One prompt's reference, computed by transformers in float32.
struct FixtureDump {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::vector<std::vector<double>> logits;  // [T][vocab]
  std::vector<double> margins;              // [T]
  std::vector<double> generated_margins;    // [N]
  std::vector<ResidualEntry> residual;      // 2 per layer, in order
  std::vector<double> final_stream_norm;    // [T]
};

std::string SourcePath(const std::string& relative);

// The fixture model directories under tests/fixtures/models, sorted.
std::vector<std::string> FixtureModelDirs();

// Reads `path` (a reference.json); fails the current test on error.
std::vector<FixtureDump> ReadFixture(const std::string& path);

// Max |ours − ref| over a row, and max |ref|.
struct RowError {
  double max_diff = 0.0;
  double max_ref = 0.0;
};
RowError CompareRow(const float* ours, const std::vector<double>& ref);

// Index of the largest value.
int32_t ArgMax(const float* row, int64_t n);

// What a decoder produced for a whole prompt.
struct PrefillResult {
  std::vector<float> logits;  // [T, vocab]
  // Per sublayer (2 per layer, in order), per token: ‖x‖, ‖u‖, ‖x + u‖.
  std::vector<std::vector<std::array<double, 3>>> norms;
  std::vector<double> final_stream_norm;  // [T]
};

// Logits at every position within `tolerance` · max|ref| (design.md §7) and
// the residual norms within `tolerance` relative.
// `norm_tolerance` < 0: the same as `tolerance`.
void ExpectPrefillMatches(const FixtureDump& dump, const PrefillResult& result,
                          int64_t vocab, double tolerance,
                          const std::string& label,
                          double norm_tolerance = -1.0);

// The greedy continuation, teacher-forced: `last_logits` [vocab] chooses
// generated_ids[0]; decode(id) feeds one token and returns the next logits.
// Steps whose reference margin is a near-tie (below `near_tie_fraction` of
// the prompt's largest |logit|; 1e-3 for f32 decoders, more for bf16) are
// skipped; at least one step must be compared.
void ExpectGreedyMatches(const FixtureDump& dump, std::vector<float> last_logits,
                         const std::function<std::vector<float>(int32_t)>& decode,
                         int64_t vocab, const std::string& label,
                         double near_tie_fraction = 1e-3);

}  // namespace testing_fixtures
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_DECODER_FIXTURE_REFERENCE_H_
