#include "engine/runtime/step_layout.h"

#include <utility>

namespace tributary {

BatchLayout TakeBatchLayout(StepPlan* plan) {
  BatchLayout layout;
  layout.sequences.reserve(plan->sequences.size());
  int64_t offset = 0;
  for (ScheduledSequence& s : plan->sequences) {
    SequenceSlice slice;
    slice.token_offset = offset;
    slice.num_tokens = s.num_tokens;
    slice.first_position = s.first_position;
    slice.state_slot = s.state_slot;
    slice.block_table = std::move(s.block_table);
    s.block_table.clear();  // moved-from: empty, as the contract says
    layout.sequences.push_back(std::move(slice));
    offset += s.num_tokens;
  }
  return layout;
}

}  // namespace tributary
