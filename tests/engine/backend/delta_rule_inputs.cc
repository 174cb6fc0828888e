#include "delta_rule_inputs.h"

#include <cmath>
#include <random>

namespace tributary {

DeltaRuleInputs MakeDeltaRuleInputs(int64_t tokens, int64_t hk, int64_t hv,
                                    int64_t dk, int64_t dv, uint32_t seed,
                                    float max_log_decay) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  DeltaRuleInputs in;
  in.dims = {tokens, hk, hv, dk, dv};
  auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(static_cast<size_t>(n));
    for (float& e : x) e = normal(rng);
  };
  fill(in.q, tokens * hk * dk);
  fill(in.k, tokens * hk * dk);
  fill(in.v, tokens * hv * dv);
  fill(in.state, hv * dk * dv);
  reference::L2NormRows(in.q.data(), tokens * hk, dk,
                        1.0f / std::sqrt(static_cast<float>(dk)));
  reference::L2NormRows(in.k.data(), tokens * hk, dk, 1.0f);
  in.g.resize(static_cast<size_t>(tokens * hv));
  in.beta.resize(static_cast<size_t>(tokens * hv));
  for (float& x : in.g) x = -max_log_decay * unit(rng);
  for (float& x : in.beta) x = unit(rng);
  return in;
}

}  // namespace tributary
