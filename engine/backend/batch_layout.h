// Which sequences one forward step runs, and where their caches are.
//
// A step concatenates the new tokens of every sequence along one token
// dimension (prefill chunks and single decode tokens mixed). Row-wise ops
// (matmuls, norms, the residual add) ignore sequence boundaries; the ops that
// read or write a cache (RoPE positions, the KV cache, attention, the conv
// window, the delta rule) use this layout.
#ifndef TRIBUTARY_ENGINE_BACKEND_BATCH_LAYOUT_H_
#define TRIBUTARY_ENGINE_BACKEND_BATCH_LAYOUT_H_

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace tributary {

struct SequenceSlice {
  // Rows [token_offset, token_offset + num_tokens) of the step.
  int64_t token_offset = 0;
  int64_t num_tokens = 0;
  // Position of the first new token = number of tokens already cached.
  int64_t first_position = 0;
  // The sequence's GDN state slot (conv window and recurrent state).
  int32_t state_slot = 0;
  // Physical KV blocks of logical blocks 0, 1, …; must cover positions
  // [0, first_position + num_tokens).
  std::vector<int32_t> block_table;
};

struct BatchLayout {
  std::vector<SequenceSlice> sequences;

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const SequenceSlice& s : sequences) n += s.num_tokens;
    return n;
  }

  // The step cut into `parts` contiguous runs of sequences of about equal
  // token counts (Backend::StepParts), at least one sequence each (1 <=
  // parts <= sequences.size()): part p is sequences [begin[p], begin[p +
  // 1]), begin[0] = 0 and begin[parts] = sequences.size(). Each cut goes
  // where the tokens before it come nearest to its share.
  std::vector<int64_t> PartBegins(int parts) const {
    const int64_t n = static_cast<int64_t>(sequences.size());
    const int64_t tokens = num_tokens();
    std::vector<int64_t> begin{0};
    int64_t done = 0, next = 0;
    for (int p = 1; p < parts; ++p) {
      const int64_t target = tokens * p / parts;
      // At least one sequence a part, and one left for each part after.
      while (next < n - (parts - p) &&
             (next == begin.back() ||
              std::abs(done + sequences[next].num_tokens - target) <
                  std::abs(done - target))) {
        done += sequences[next++].num_tokens;
      }
      begin.push_back(next);
    }
    begin.push_back(n);
    return begin;
  }
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_BATCH_LAYOUT_H_
