// Programmatic dependent launch (sm_90), per stream. A kernel launched with
// it on may begin while the kernel before it on the stream finishes: its
// blocks are scheduled once every block of the earlier grid has started,
// run whatever does not read the earlier grid's results (a weight
// prefetch), and wait at griddepcontrol.wait until that grid has completed
// and its writes are visible. Every kernel of this backend begins with that
// wait (BeginAfterPriorGrids in device_common.cuh, a no-op when launched
// without the attribute), so turning it on changes when kernels start, not
// what they read. It hides the gap between dependent launches, ~600 a
// decode step of the 27B. Off unless CudaBackendOptions::programmatic_launch.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_PROGRAMMATIC_LAUNCH_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_PROGRAMMATIC_LAUNCH_H_

#include "engine/backend/cuda/cuda_api.h"

namespace tributary {
namespace cuda {

// Launches on `stream` take the attribute from now on (or no longer).
// Returns false when too many streams have it on at once (64). Turn it off
// before destroying the stream.
bool SetProgrammaticLaunch(cudaStream_t stream, bool on);

// Whether launches on `stream` take it.
bool ProgrammaticLaunch(cudaStream_t stream);

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_PROGRAMMATIC_LAUNCH_H_
