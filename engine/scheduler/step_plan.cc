#include "engine/scheduler/step_plan.h"

#include <utility>

namespace tributary {

BatchLayout ToBatchLayout(const StepPlan& plan) {
  BatchLayout layout;
  layout.sequences.reserve(plan.sequences.size());
  int64_t offset = 0;
  for (const ScheduledSequence& s : plan.sequences) {
    SequenceSlice slice;
    slice.token_offset = offset;
    slice.num_tokens = s.num_tokens;
    slice.first_position = s.first_position;
    slice.state_slot = s.state_slot;
    slice.block_table = s.block_table;
    layout.sequences.push_back(std::move(slice));
    offset += s.num_tokens;
  }
  return layout;
}

}  // namespace tributary
