// Where the next token of a row that samples is chosen: on the backend
// (ForwardOptions::device_choice: only the chosen id comes back, 4 bytes
// instead of a vocabulary's row of logits) or on the host (the Sampler, on
// the row copied back). The engine asks this for every such row of a step.
#ifndef TRIBUTARY_ENGINE_SAMPLING_DEVICE_CHOICE_H_
#define TRIBUTARY_ENGINE_SAMPLING_DEVICE_CHOICE_H_

#include <cstdint>

#include "engine/backend/token_choice.h"
#include "engine/sampling/sampling_params.h"

namespace tributary {

struct DeviceChoice {
  // The backend chooses the token (its argmax unless `draws`).
  bool on_device = false;
  // The backend chooses by `choice` (ChooseTokens): a draw, logprobs or
  // penalties. Without it an on-device row takes its argmax.
  bool draws = false;
  // The host sampler's rule for this row (token_choice.h). With penalties
  // the caller points history_begin / history_count at the request's
  // history entries.
  TokenChoice choice;
};

// The choice for a request with `params` whose next token is its
// `num_generated`-th output token, drawn under `seed`:
//  - greedy without penalties or logprobs: on the device, its argmax (the
//    host sampler's choice too);
//  - any other request, when the backend samples (`device_sampling`): on
//    the device, drawn by the host sampler's rule and formulas, with the
//    uniform UniformForToken(seed, num_generated);
//  - otherwise on the host.
DeviceChoice ChooseWhereToSample(const SamplingParams& params,
                                 bool device_sampling, uint64_t seed,
                                 uint64_t num_generated);

// A row that samples nothing (a prefill chunk before its last) or whose
// request is gone: its logits are not needed, so nothing comes back but an
// argmax nobody reads.
inline DeviceChoice UnsampledRow() {
  DeviceChoice c;
  c.on_device = true;
  return c;
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_DEVICE_CHOICE_H_
