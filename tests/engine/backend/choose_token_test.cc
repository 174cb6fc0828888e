// reference::ChooseToken (the naive twin of the device sampler, a full
// sort) against the engine's host sampler on the same logits, settings and
// uniform number: the same token, always. Both follow the canonical rule
// (token_choice.h, candidate_list.h); the device kernel is then tested
// against this reference in cuda_backend_test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/element_type.h"
#include "engine/sampling/candidate_list.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/philox.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/token_history.h"

namespace tributary {
namespace {

struct Settings {
  float temperature;
  int32_t top_k;
  float top_p, min_p;
};

// What the host sampler draws for `u` (CandidateList in the sampler's
// order; Sampler::Sample itself draws u from the seed).
int32_t HostToken(const std::vector<float>& logits, const Settings& s, double u) {
  if (s.temperature < TokenChoice::kGreedyTemperature) return Argmax(logits);
  CandidateList list;
  list.Reset(logits, s.temperature);
  list.KeepTopK(s.top_k);
  list.KeepTopP(s.top_p);
  list.KeepMinP(s.min_p);
  return list.Sample(u);
}

// bf16-rounded normal logits: many exact ties, so the id tie-break matters.
std::vector<float> TiedLogits(std::mt19937_64& rng, int64_t vocab) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& x : logits) x = Bf16ToF32(F32ToBf16(normal(rng)));
  return logits;
}

TEST(ChooseTokenTest, EqualsTheHostSampler) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const std::vector<Settings> settings = {
      {0.0f, 0, 1.0f, 0.0f},    {1.0f, 0, 1.0f, 0.0f},   {0.7f, 50, 1.0f, 0.0f},
      {1.0f, 0, 0.9f, 0.0f},    {1.3f, 20, 0.5f, 0.0f},  {1.0f, 1, 0.9f, 0.0f},
      {0.8f, 0, 1.0f, 0.1f},    {1.0f, 40, 0.95f, 0.05f}, {2.0f, 0, 0.05f, 0.0f},
      {1.0f, 5000, 0.99f, 0.0f}, {0.5f, 3, 1.0f, 1.0f}};
  for (int64_t vocab : {7, 1000, 4099}) {
    for (int row = 0; row < 20; ++row) {
      const std::vector<float> logits = TiedLogits(rng, vocab);
      for (const Settings& s : settings) {
        for (double u : {0.0, uniform(rng), uniform(rng), std::nextafter(1.0, 0.0)}) {
          SCOPED_TRACE(testing::Message()
                       << "vocab " << vocab << " row " << row << " T " << s.temperature
                       << " k " << s.top_k << " p " << s.top_p << " min_p "
                       << s.min_p << " u " << u);
          const TokenChoice choice{s.temperature, s.top_k, s.top_p, s.min_p, u};
          ASSERT_EQ(reference::ChooseToken(logits.data(), vocab, choice),
                    HostToken(logits, s, u));
        }
      }
    }
  }
}

// All logits equal: every rank is decided by the id; ±0 are equal logits.
TEST(ChooseTokenTest, TiesGoToTheLowerIdAndSignedZerosTie) {
  std::vector<float> logits(64, 0.0f);
  for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -0.0f;
  const Settings s{1.0f, 10, 0.5f, 0.0f};  // top-k: ids 0..9; top-p: 0..4
  for (double u : {0.0, 0.3, 0.99}) {
    const TokenChoice choice{s.temperature, s.top_k, s.top_p, s.min_p, u};
    const int32_t token = reference::ChooseToken(logits.data(), 64, choice);
    EXPECT_EQ(token, HostToken(logits, s, u));
    EXPECT_EQ(token, static_cast<int32_t>(u * 5));
  }
}

// The raw logprobs of the reference equal the host sampler's (logprobs.h),
// bit for bit: the chosen token's and the top n, ties to the lower id.
TEST(ChooseTokenTest, RowLogprobsEqualTheHostSamplers) {
  std::mt19937_64 rng(12);
  for (int64_t vocab : {5, 1000}) {
    for (int row = 0; row < 10; ++row) {
      const std::vector<float> logits = TiedLogits(rng, vocab);
      const double lse = LogSumExp(logits);
      for (int32_t n : {0, 1, 7, 20}) {
        const int32_t token = static_cast<int32_t>((row * 37) % vocab);
        const TokenLogprobs got = reference::RowLogprobs(logits.data(), vocab, token, n);
        EXPECT_EQ(got.chosen, static_cast<float>(logits[token] - lse));
        const std::vector<TokenLogprob> want = TopLogprobs(logits, lse, n);
        ASSERT_EQ(got.count, static_cast<int32_t>(want.size()));
        for (int32_t k = 0; k < got.count; ++k) {
          EXPECT_EQ(got.top_ids[k], want[k].token_id) << "vocab " << vocab << " n " << n;
          EXPECT_EQ(got.top_logprobs[k], want[k].logprob);
        }
      }
    }
  }
}

// Penalties: the reference's ApplyPenalties then ChooseToken, from the
// distinct ids of a history, equal Sampler::Sample with the same history,
// settings and seed (the host sampler draws u from the seed and the output
// length), greedy and sampled, each penalty alone and together; the
// entries keep the raw logits.
TEST(ChooseTokenTest, PenaltiesEqualTheHostSamplers) {
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int32_t> id(0, 299);
  const int64_t vocab = 300;
  struct Penalties {
    float repetition, presence, frequency;
  };
  for (int row = 0; row < 30; ++row) {
    const std::vector<float> logits = TiedLogits(rng, vocab);
    std::vector<int32_t> prompt(20), output(12);
    for (int32_t& t : prompt) t = id(rng);
    for (int32_t& t : output) t = id(rng) % 40;  // repeats
    const TokenHistory history{prompt, output};
    for (const Penalties& pen : {Penalties{1.3f, 0, 0}, Penalties{1, 0.5f, 0},
                                 Penalties{1, 0, 0.4f}, Penalties{0.8f, -0.3f, 0.6f}}) {
      for (float temperature : {0.0f, 0.9f}) {
        SamplingParams params;
        params.temperature = temperature;
        params.top_p = 0.9f;
        params.repetition_penalty = pen.repetition;
        params.presence_penalty = pen.presence;
        params.frequency_penalty = pen.frequency;
        const uint64_t seed = static_cast<uint64_t>(row) * 7 + 1;
        Sampler sampler;
        auto want = sampler.Sample(logits, params, history, seed);
        ASSERT_TRUE(want.ok()) << want.status();
        // The entries: distinct ids, output counts (prompt ids too, for the
        // repetition penalty).
        std::vector<TokenHistoryEntry> entries;
        auto entry_of = [&](int32_t t) -> TokenHistoryEntry& {
          for (TokenHistoryEntry& e : entries) {
            if (e.token_id == t) return e;
          }
          return entries.emplace_back(TokenHistoryEntry{t, 0, 0.0f});
        };
        for (int32_t t : output) ++entry_of(t).output_count;
        for (int32_t t : prompt) entry_of(t);
        TokenChoice choice{temperature, 0, 0.9f, 0.0f,
                           UniformForToken(seed, output.size())};
        choice.repetition_penalty = pen.repetition;
        choice.presence_penalty = pen.presence;
        choice.frequency_penalty = pen.frequency;
        choice.history_count = static_cast<int32_t>(entries.size());
        std::vector<float> row_copy = logits;
        reference::ApplyPenalties(row_copy.data(), choice, entries.data());
        EXPECT_EQ(reference::ChooseToken(row_copy.data(), vocab, choice),
                  want->token_id)
            << "row " << row << " T " << temperature << " r " << pen.repetition
            << " p " << pen.presence << " f " << pen.frequency;
        for (const TokenHistoryEntry& e : entries) {
          ASSERT_EQ(e.raw_logit, logits[e.token_id]);
        }
      }
    }
  }
}

TEST(ChooseTokenTest, ANonFiniteRowIsMinusOne) {
  std::vector<float> logits(10, 1.0f);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(reference::ChooseToken(logits.data(), 10, TokenChoice{1.0f, 0, 1.0f, 0.0f, 0.5}), -1);
  logits[3] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(reference::ChooseToken(logits.data(), 10, TokenChoice{0.0f, 0, 1.0f, 0.0f, 0.5}), -1);
}

}  // namespace
}  // namespace tributary
