#include "engine/scheduler/sequence.h"

namespace tributary {

absl::string_view SequenceStateName(SequenceState state) {
  switch (state) {
    case SequenceState::kWaiting:
      return "waiting";
    case SequenceState::kRunning:
      return "running";
    case SequenceState::kPreempted:
      return "preempted";
    case SequenceState::kFinished:
      return "finished";
  }
  return "unknown";
}

}  // namespace tributary
