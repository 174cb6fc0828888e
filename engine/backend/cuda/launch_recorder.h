// Recording of device work for CUDA graphs. While a LaunchRecorder is active
// on a thread (CudaBackend's graph regions), every kernel launch through
// TRIBUTARY_LAUNCH, every cuBLAS call and every memset of the backend is not
// issued but appended here: a closure that issues it, and its exact
// arguments as 64-bit words (the kernel, the grid, the block and each
// parameter). Two regions with equal words issue the same work on the same
// memory, so a graph captured from one may replay the other
// (CudaBackend::EndGraphRegion compares the words exactly, not only a hash).
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_LAUNCH_RECORDER_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_LAUNCH_RECORDER_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_kernels.h"

namespace tributary {
namespace cuda {

class LaunchRecorder {
 public:
  // Appends one unit of work: `issue` runs it later (into a capturing
  // stream, or eagerly); the caller has added its arguments first.
  void AddWork(std::function<void()> issue) { work_.push_back(std::move(issue)); }

  // Argument words. Every parameter type has an exact encoding: floats by
  // their bits, the typed pointers member by member, and anything else only
  // if its bytes are its value (no padding, no floating point).
  void Add(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    words_.push_back(bits);
  }
  void Add(bool value) { words_.push_back(value ? 1 : 0); }
  void Add(const Typed& t) {
    Add(t.data);
    Add(t.type);
  }
  void Add(const ConstTyped& t) {
    Add(t.data);
    Add(t.type);
  }
  void Add(const dim3& d) {
    words_.push_back(d.x);
    words_.push_back(d.y);
    words_.push_back(d.z);
  }
  template <typename T>
  void Add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T> &&
                      std::has_unique_object_representations_v<T>,
                  "a launch parameter whose bytes are not its value: give it "
                  "an Add overload");
    const size_t words = (sizeof(T) + 7) / 8;
    const size_t at = words_.size();
    words_.resize(at + words, 0);
    std::memcpy(&words_[at], &value, sizeof(T));
  }

  const std::vector<uint64_t>& words() const { return words_; }
  std::vector<std::function<void()>>& work() { return work_; }
  bool empty() const { return work_.empty(); }
  void Clear() {
    words_.clear();
    work_.clear();
  }

 private:
  std::vector<uint64_t> words_;
  std::vector<std::function<void()>> work_;
};

// The recorder active on this thread, or null (work is issued at once).
LaunchRecorder*& ActiveLaunchRecorder();

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_LAUNCH_RECORDER_H_
