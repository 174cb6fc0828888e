// The gated delta rule: the recurrent form against an independent double
// precision transcription of S_t = e^{g_t}(I − β_t k̂ k̂ᵀ) S_{t−1} + β_t k̂ vᵀ,
// o_t = S_tᵀ q̂; the chunked form against the recurrent one, across the
// 64-token chunk boundaries and with a prefill split at arbitrary points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "delta_rule_inputs.h"
#include "engine/backend/cpu/reference_ops.h"

namespace tributary {
namespace reference {
namespace {

using Inputs = DeltaRuleInputs;

Inputs MakeInputs(int64_t tokens, int64_t hk, int64_t hv, int64_t dk,
                  int64_t dv, uint32_t seed) {
  return MakeDeltaRuleInputs(tokens, hk, hv, dk, dv, seed, 0.3f);
}

// Max |a − b| relative to max |b|.
double RelativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double max_diff = 0, max_ref = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    max_ref = std::max(max_ref, std::fabs(b[i]));
  }
  return max_diff / max_ref;
}

std::vector<double> ToDouble(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

TEST(DeltaRuleTest, RecurrentMatchesMatrixFormInDouble) {
  const int64_t t_len = 9, hk = 2, hv = 4, dk = 6, dv = 5;
  Inputs in = MakeInputs(t_len, hk, hv, dk, dv, 11);
  std::vector<double> s(in.state.begin(), in.state.end());
  std::vector<double> expected_out(t_len * hv * dv);
  for (int64_t t = 0; t < t_len; ++t) {
    for (int64_t j = 0; j < hv; ++j) {
      const int64_t kh = j / (hv / hk);
      const float* kt = &in.k[(t * hk + kh) * dk];
      const float* qt = &in.q[(t * hk + kh) * dk];
      const float* vt = &in.v[(t * hv + j) * dv];
      const double decay = std::exp(double{in.g[t * hv + j]});
      const double b = in.beta[t * hv + j];
      double* sj = &s[j * dk * dv];
      // M = e^g (I − β k kᵀ); S ← M S + β k vᵀ.
      std::vector<double> next(dk * dv, 0.0);
      for (int64_t a = 0; a < dk; ++a) {
        for (int64_t m = 0; m < dv; ++m) {
          double sum = 0;
          for (int64_t c = 0; c < dk; ++c) {
            const double mac = decay * ((a == c ? 1.0 : 0.0) - b * kt[a] * kt[c]);
            sum += mac * sj[c * dv + m];
          }
          next[a * dv + m] = sum + b * kt[a] * vt[m];
        }
      }
      std::copy(next.begin(), next.end(), sj);
      for (int64_t m = 0; m < dv; ++m) {
        double o = 0;
        for (int64_t a = 0; a < dk; ++a) o += sj[a * dv + m] * qt[a];
        expected_out[(t * hv + j) * dv + m] = o;
      }
    }
  }
  std::vector<float> state = in.state, out(t_len * hv * dv);
  GatedDeltaRuleRecurrent(in.dims, in.q.data(), in.k.data(), in.v.data(),
                          in.g.data(), in.beta.data(), state.data(), out.data());
  EXPECT_LT(RelativeError(out, expected_out), 1e-5);
  EXPECT_LT(RelativeError(state, s), 1e-5);
}

class ChunkedVsRecurrentTest
    : public testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(ChunkedVsRecurrentTest, SameOutputsAndFinalState) {
  const auto [t_len, ratio] = GetParam();
  const int64_t hk = 2, hv = 2 * ratio, dk = 12, dv = 8;
  Inputs in = MakeInputs(t_len, hk, hv, dk, dv, 100 + t_len);
  std::vector<float> s_rec = in.state, out_rec(t_len * hv * dv);
  GatedDeltaRuleRecurrent(in.dims, in.q.data(), in.k.data(), in.v.data(),
                          in.g.data(), in.beta.data(), s_rec.data(),
                          out_rec.data());
  std::vector<float> s_chunk = in.state, out_chunk(t_len * hv * dv, NAN);
  GatedDeltaRuleChunked(in.dims, 64, in.q.data(), in.k.data(), in.v.data(),
                        in.g.data(), in.beta.data(), s_chunk.data(),
                        out_chunk.data());
  EXPECT_LT(RelativeError(out_chunk, ToDouble(out_rec)), 1e-4);
  EXPECT_LT(RelativeError(s_chunk, ToDouble(s_rec)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Lengths, ChunkedVsRecurrentTest,
    testing::Combine(testing::Values(1, 5, 63, 64, 65, 130),
                     testing::Values(1, 3)));

TEST(DeltaRuleTest, ChunkedPrefillSplitAnywhereEqualsOnePrefill) {
  const int64_t t_len = 150, hk = 1, hv = 2, dk = 8, dv = 8;
  Inputs in = MakeInputs(t_len, hk, hv, dk, dv, 7);
  std::vector<float> s_whole = in.state, out_whole(t_len * hv * dv);
  GatedDeltaRuleChunked(in.dims, 64, in.q.data(), in.k.data(), in.v.data(),
                        in.g.data(), in.beta.data(), s_whole.data(),
                        out_whole.data());
  for (int64_t split : {1, 37, 64, 100, 149}) {
    std::vector<float> s = in.state, out(t_len * hv * dv);
    DeltaRuleDims first = in.dims, second = in.dims;
    first.num_tokens = split;
    second.num_tokens = t_len - split;
    GatedDeltaRuleChunked(first, 64, in.q.data(), in.k.data(), in.v.data(),
                          in.g.data(), in.beta.data(), s.data(), out.data());
    GatedDeltaRuleChunked(second, 64, in.q.data() + split * hk * dk,
                          in.k.data() + split * hk * dk,
                          in.v.data() + split * hv * dv,
                          in.g.data() + split * hv, in.beta.data() + split * hv,
                          s.data(), out.data() + split * hv * dv);
    EXPECT_LT(RelativeError(out, ToDouble(out_whole)), 1e-4) << "split " << split;
    EXPECT_LT(RelativeError(s, ToDouble(s_whole)), 1e-4) << "split " << split;
  }
}

}  // namespace
}  // namespace reference
}  // namespace tributary
