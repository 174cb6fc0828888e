#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tributary {
namespace {

struct Entry {
  float logit;
  int32_t token_id;
};

// "a ranks before b": larger logit, then lower id.
bool RanksBefore(const Entry& a, const Entry& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.token_id < b.token_id;
}

}  // namespace

double LogSumExp(absl::Span<const float> logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  // exp in float (faster), summed in double: the logprobs are reported as
  // float anyway.
  for (float logit : logits) sum += std::exp(logit - max_logit);
  return max_logit + std::log(sum);
}

std::vector<TokenLogprob> TopLogprobs(absl::Span<const float> logits,
                                      double log_sum_exp, int32_t n) {
  const size_t count = std::min<size_t>(std::max<int32_t>(n, 0), logits.size());
  std::vector<TokenLogprob> result;
  if (count == 0) return result;
  // A heap of the best `count` so far whose top is the worst of them, so
  // each new token costs one comparison unless it enters.
  std::vector<Entry> heap;
  heap.reserve(count);
  for (size_t i = 0; i < logits.size(); ++i) {
    const Entry entry{logits[i], static_cast<int32_t>(i)};
    if (heap.size() < count) {
      heap.push_back(entry);
      std::push_heap(heap.begin(), heap.end(), RanksBefore);
    } else if (RanksBefore(entry, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), RanksBefore);
      heap.back() = entry;
      std::push_heap(heap.begin(), heap.end(), RanksBefore);
    }
  }
  std::sort(heap.begin(), heap.end(), RanksBefore);
  result.reserve(count);
  for (const Entry& entry : heap) {
    result.push_back(
        {entry.token_id, static_cast<float>(entry.logit - log_sum_exp)});
  }
  return result;
}

}  // namespace tributary
