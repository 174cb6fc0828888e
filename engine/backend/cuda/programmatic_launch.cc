#include "engine/backend/cuda/programmatic_launch.h"

#include <atomic>
#include <cstdint>
#include <mutex>

namespace tributary {
namespace cuda {
namespace {

// The streams with the attribute on, as their handles' bits (0: a free
// place). Read on every launch, so lock-free; changed under a mutex (a
// backend turns it on at creation or between steps, and off when it is
// destroyed, before its stream is, so a handle the driver reuses starts
// off).
constexpr int kMaxStreams = 64;
std::atomic<uintptr_t> g_streams[kMaxStreams];
std::mutex g_change;

}  // namespace

bool SetProgrammaticLaunch(cudaStream_t stream, bool on) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(stream);
  if (key == 0) return !on;  // the legacy default stream: never
  std::lock_guard<std::mutex> lock(g_change);
  for (std::atomic<uintptr_t>& place : g_streams) {
    if (place.load(std::memory_order_relaxed) == key) {
      if (!on) place.store(0, std::memory_order_release);
      return true;
    }
  }
  if (!on) return true;
  for (std::atomic<uintptr_t>& place : g_streams) {
    if (place.load(std::memory_order_relaxed) == 0) {
      place.store(key, std::memory_order_release);
      return true;
    }
  }
  return false;
}

bool ProgrammaticLaunch(cudaStream_t stream) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(stream);
  if (key == 0) return false;
  for (const std::atomic<uintptr_t>& place : g_streams) {
    if (place.load(std::memory_order_acquire) == key) return true;
  }
  return false;
}

}  // namespace cuda
}  // namespace tributary
