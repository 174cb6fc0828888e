#include "engine/sampling/device_choice.h"

#include "engine/sampling/philox.h"

namespace tributary {

// The backend's copies of the sampler's limits (the backend layer does not
// see engine/sampling).
static_assert(TokenChoice::kGreedyTemperature ==
              SamplingParams::kGreedyTemperature);
static_assert(kMaxTopLogprobs == SamplingParams::kMaxNumLogprobs);

DeviceChoice ChooseWhereToSample(const SamplingParams& p, bool device_sampling,
                                 uint64_t seed, uint64_t num_generated) {
  DeviceChoice out;
  const bool logprobs = p.num_logprobs.has_value();
  if (p.is_greedy() && !logprobs && !p.has_penalties()) {
    out.on_device = true;
    return out;
  }
  if (!device_sampling) return out;
  out.on_device = true;
  out.draws = true;
  TokenChoice& choice = out.choice;  // default: the argmax
  if (!p.is_greedy()) {
    choice.temperature = p.temperature;
    choice.top_k = p.top_k;
    choice.top_p = p.top_p;
    choice.min_p = p.min_p;
    choice.uniform = UniformForToken(seed, num_generated);
  }
  choice.num_logprobs = logprobs ? *p.num_logprobs : -1;
  if (p.has_penalties()) {
    choice.repetition_penalty = p.repetition_penalty;
    choice.presence_penalty = p.presence_penalty;
    choice.frequency_penalty = p.frequency_penalty;
  }
  return out;
}

}  // namespace tributary
