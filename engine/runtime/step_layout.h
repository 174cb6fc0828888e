// The step plan (the scheduler's, backend-free) as the decoder's batch
// layout: the one place that joins the two, so that the scheduler stays pure
// logic with no backend type in it.
#ifndef TRIBUTARY_ENGINE_RUNTIME_STEP_LAYOUT_H_
#define TRIBUTARY_ENGINE_RUNTIME_STEP_LAYOUT_H_

#include "engine/backend/batch_layout.h"
#include "engine/scheduler/step_plan.h"

namespace tributary {

// The layout of HybridDecoder::Forward for `plan`: rows are the scheduled
// sequences' tokens back to back, in plan order. The block tables move out
// of the plan (nothing reads them after the forward), so that a step copies
// each table once, in Schedule().
BatchLayout TakeBatchLayout(StepPlan* plan);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_STEP_LAYOUT_H_
