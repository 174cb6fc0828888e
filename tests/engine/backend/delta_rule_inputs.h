// Random inputs of one gated delta rule call, shared by the reference and
// fast-kernel tests: normal q, k, v and initial state, q̂ and k̂ already
// L2-normalised (q̂ scaled by dk^−½), log decays g uniform in
// (−max_log_decay, 0], β uniform in [0, 1).
#ifndef TRIBUTARY_TESTS_ENGINE_BACKEND_DELTA_RULE_INPUTS_H_
#define TRIBUTARY_TESTS_ENGINE_BACKEND_DELTA_RULE_INPUTS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/reference_ops.h"

namespace tributary {

struct DeltaRuleInputs {
  reference::DeltaRuleDims dims;
  std::vector<float> q, k, v, g, beta, state;
};

DeltaRuleInputs MakeDeltaRuleInputs(int64_t tokens, int64_t hk, int64_t hv,
                                    int64_t dk, int64_t dv, uint32_t seed,
                                    float max_log_decay);

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_BACKEND_DELTA_RULE_INPUTS_H_
