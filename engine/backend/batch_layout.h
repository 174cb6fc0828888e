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
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_BATCH_LAYOUT_H_
