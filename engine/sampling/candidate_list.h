// The tokens still eligible for sampling, and the truncation steps that
// narrow them: top-k, top-p (nucleus), min-p; then the draw.
//
// Temperature is not a pass over the logits: a candidate's weight is
// exp((logit - max_logit) / temperature), computed in double. Dividing by the
// temperature is monotonic, so top-k on scaled or unscaled logits keeps the
// same set; folding it into the weights saves a pass over the vocabulary and
// cannot overflow for a small temperature. The result equals "temperature,
// then top-k, then top-p, then min-p" exactly.
//
// Ranking is by logit, ties to the lower id, so every step is deterministic
// (and so is the draw for a given uniform number).
//
// The canonical rule (the backends' ChooseTokens, backend.h, follows it
// too, so a token drawn on a device is the token drawn here): the list is
// in id order after every call; top-p totals the current candidates in id
// order and accumulates in rank order; the draw totals and walks the
// survivors in id order. Sums are in double.
//
// Not thread-safe; reuse one per engine thread (the buffers are kept).
#ifndef TRIBUTARY_ENGINE_SAMPLING_CANDIDATE_LIST_H_
#define TRIBUTARY_ENGINE_SAMPLING_CANDIDATE_LIST_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace tributary {

struct Candidate {
  int32_t token_id;
  float logit;  // after penalties, before temperature
};

class CandidateList {
 public:
  // Every token of `logits` [vocab] (finite) is a candidate, in id order.
  // `temperature` > 0. O(vocab).
  void Reset(absl::Span<const float> logits, float temperature);

  // Keeps exactly the k highest-ranked (ties to the lower id, where HF and
  // vLLM keep every token tied with the k-th: with real logits ties are
  // rare, and "exactly k" is the contract the engine can rely on). k <= 0 or
  // k >= size() keeps all. O(size): the k-th ranked found with a bounded
  // heap for small k, nth_element otherwise, then one filtering pass that
  // keeps the order.
  void KeepTopK(int32_t k);

  // Keeps the smallest set of highest-ranked candidates whose probability
  // (renormalized over the current candidates) reaches p; at least one. p >= 1
  // keeps all. Sorts only as far as needed: the ranking is extended in
  // growing chunks (nth_element + sort of the chunk) until the cumulative
  // probability reaches p, so a peaked distribution costs O(size); the kept
  // ones are then put back in id order (O(kept · log kept)).
  void KeepTopP(double p);

  // Keeps candidates whose probability is at least min_p times the most
  // likely one's (the ratio is unaffected by renormalization, so this is the
  // same whether computed before or after top-k/top-p). min_p <= 0 keeps
  // all. O(size); keeps the order.
  void KeepMinP(double min_p);

  // The candidate at `u` in [0, 1) of the cumulative distribution, walked in
  // id order (inverse-CDF sampling: one uniform per token). Requires
  // size() > 0. O(size).
  int32_t Sample(double u);

  // The surviving tokens and their renormalized probabilities, in list order
  // (tests, debugging).
  std::vector<std::pair<int32_t, double>> Probabilities() const;

  size_t size() const { return items_.size(); }
  const std::vector<Candidate>& items() const { return items_; }

 private:
  float MaxLogit() const;
  double Weight(float logit, float max_logit) const;

  std::vector<Candidate> items_;
  std::vector<Candidate> selected_;  // scratch for KeepTopK
  std::vector<double> weights_;      // scratch for Sample
  double inverse_temperature_ = 1.0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_CANDIDATE_LIST_H_
