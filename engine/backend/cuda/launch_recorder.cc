#include "engine/backend/cuda/launch_recorder.h"

namespace tributary {
namespace cuda {

LaunchRecorder*& ActiveLaunchRecorder() {
  static thread_local LaunchRecorder* recorder = nullptr;
  return recorder;
}

}  // namespace cuda
}  // namespace tributary
