#include "engine/sampling/candidate_list.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace tributary {
namespace {

// Larger logit first, then lower id: a strict total order on candidates.
bool RanksBefore(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.token_id < b.token_id;
}

// KeepTopK uses a heap when k is at most this fraction of the candidates.
constexpr size_t kHeapTopKRatio = 64;

// The first ranking chunk of KeepTopP; later chunks grow 4x. Nucleus sets
// of real models at usual p hold tens to hundreds of tokens.
constexpr size_t kFirstTopPChunk = 256;

// Relative slack on "cumulative probability reaches p": rounding in the
// running sum must not pull in one more token when the set reaches p exactly
// (p = 0.8 over probabilities 0.5, 0.3, 0.2 keeps two).
constexpr double kTopPSlack = 1e-9;

}  // namespace

void CandidateList::Reset(absl::Span<const float> logits, float temperature) {
  items_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    items_[i] = {static_cast<int32_t>(i), logits[i]};
  }
  inverse_temperature_ = 1.0 / static_cast<double>(temperature);
}

float CandidateList::MaxLogit() const {
  float max_logit = items_.front().logit;
  for (const Candidate& c : items_) max_logit = std::max(max_logit, c.logit);
  return max_logit;
}

double CandidateList::Weight(float logit, float max_logit) const {
  // The exponent in double (no overflow for any temperature), rounded to
  // float; its exp in double, rounded to float (token_choice.h): a device's
  // double exp agrees with this one to an ulp, so both round to the same
  // float weight but in about 2^-29 of cases (a float expf, 2 ulp on a GPU,
  // would differ often and move draws near a boundary).
  const float exponent = static_cast<float>(
      (static_cast<double>(logit) - max_logit) * inverse_temperature_);
  return static_cast<float>(std::exp(static_cast<double>(exponent)));
}

void CandidateList::KeepTopK(int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= items_.size()) return;
  // The k-th ranked candidate, the last one kept.
  Candidate kth;
  if (static_cast<size_t>(k) * kHeapTopKRatio <= items_.size()) {
    // A bounded heap whose top is the worst kept: most candidates cost one
    // comparison (5x faster than nth_element for k = 50 of 248k).
    selected_.clear();
    for (const Candidate& c : items_) {
      if (selected_.size() < static_cast<size_t>(k)) {
        selected_.push_back(c);
        std::push_heap(selected_.begin(), selected_.end(), RanksBefore);
      } else if (RanksBefore(c, selected_.front())) {
        std::pop_heap(selected_.begin(), selected_.end(), RanksBefore);
        selected_.back() = c;
        std::push_heap(selected_.begin(), selected_.end(), RanksBefore);
      }
    }
    kth = selected_.front();
  } else {
    selected_ = items_;
    std::nth_element(selected_.begin(), selected_.begin() + (k - 1),
                     selected_.end(), RanksBefore);
    kth = selected_[k - 1];
  }
  // Ranks are a strict total order: exactly k rank at or before the k-th.
  items_.erase(std::remove_if(items_.begin(), items_.end(),
                              [&](const Candidate& c) {
                                return RanksBefore(kth, c);
                              }),
               items_.end());
}

void CandidateList::KeepTopP(double p) {
  if (p >= 1.0 || items_.size() <= 1) return;
  const float max_logit = MaxLogit();
  double total = 0.0;
  for (const Candidate& c : items_) total += Weight(c.logit, max_logit);
  const double target = p * total * (1.0 - kTopPSlack);

  const size_t n = items_.size();
  size_t ranked = 0;  // items_[0, ranked) are the top `ranked`, in order
  double cumulative = 0.0;
  while (ranked < n) {
    const size_t end = std::min(n, std::max(kFirstTopPChunk, ranked * 4));
    if (end < n) {
      std::nth_element(items_.begin() + ranked, items_.begin() + end,
                       items_.end(), RanksBefore);
    }
    std::sort(items_.begin() + ranked, items_.begin() + end, RanksBefore);
    for (size_t i = ranked; i < end; ++i) {
      cumulative += Weight(items_[i].logit, max_logit);
      if (cumulative >= target) {
        items_.resize(i + 1);
        break;
      }
    }
    if (items_.size() < n) break;
    ranked = end;
  }
  // Back to id order (when only rounding kept everything, too).
  std::sort(items_.begin(), items_.end(),
            [](const Candidate& a, const Candidate& b) {
              return a.token_id < b.token_id;
            });
}

void CandidateList::KeepMinP(double min_p) {
  if (min_p <= 0.0 || items_.size() <= 1) return;
  const float max_logit = MaxLogit();
  // p_i >= min_p * p_max  <=>  (logit_i - max) / T >= log(min_p).
  const double log_min_p = std::log(min_p);
  items_.erase(
      std::remove_if(items_.begin(), items_.end(),
                     [&](const Candidate& c) {
                       return (static_cast<double>(c.logit) - max_logit) *
                                  inverse_temperature_ <
                              log_min_p;
                     }),
      items_.end());
}

int32_t CandidateList::Sample(double u) {
  const float max_logit = MaxLogit();
  weights_.resize(items_.size());
  double total = 0.0;
  for (size_t i = 0; i < items_.size(); ++i) {
    weights_[i] = Weight(items_[i].logit, max_logit);
    total += weights_[i];
  }
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < items_.size(); ++i) {
    cumulative += weights_[i];
    if (target < cumulative) return items_[i].token_id;
  }
  // Rounding left u * total at or past the sum: the last token with any
  // weight (the max has weight 1, so one exists).
  for (size_t i = items_.size(); i-- > 0;) {
    if (weights_[i] > 0.0) return items_[i].token_id;
  }
  return items_.back().token_id;
}

std::vector<std::pair<int32_t, double>> CandidateList::Probabilities() const {
  std::vector<std::pair<int32_t, double>> result;
  if (items_.empty()) return result;
  const float max_logit = MaxLogit();
  double total = 0.0;
  for (const Candidate& c : items_) total += Weight(c.logit, max_logit);
  result.reserve(items_.size());
  for (const Candidate& c : items_) {
    result.emplace_back(c.token_id, Weight(c.logit, max_logit) / total);
  }
  return result;
}

}  // namespace tributary
