#include "engine/backend/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace tributary {
namespace {

// Polls `done` until it returns true or kSpinSeconds pass; true if it did.
// The clock is read only every 64 polls (a steady_clock read costs about as
// much as the pauses between them).
template <typename Done>
bool SpinUntil(Done done) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(ThreadPool::kSpinSeconds));
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      _mm_pause();  // SSE2: every x86-64 CPU has it
    }
    if (Clock::now() >= deadline) return done();
  }
}

}  // namespace

void ThreadPool::AlignedFree::operator()(void* p) const { std::free(p); }

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::clamp(num_threads, 1, kMaxThreads)),
      scratch_(num_threads_) {
  threads_.reserve(num_threads_ - 1);
  for (int w = 1; w < num_threads_; ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(w); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::ParallelFor(int64_t n,
                             const std::function<void(int64_t, int64_t)>& fn,
                             int max_chunks) {
  ParallelForWorker(
      n, [&fn](int, int64_t begin, int64_t end) { fn(begin, end); },
      max_chunks);
}

void ThreadPool::RunChunks(int worker, uint32_t generation) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t chunks = (claim >> 16) & 0xffff, next = claim & 0xffff;
    if (static_cast<uint32_t>(claim >> 32) != generation || next >= chunks) {
      return;  // a later job, or every chunk taken
    }
    if (!claim_.compare_exchange_weak(claim, claim + 1,
                                      std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `claim` now holds the current value
    }
    // Chunk `next` is ours: the job stays in place until we report it done.
    const int64_t n = job_n_;
    const int64_t begin = static_cast<int64_t>(next) * n / chunks;
    const int64_t end = static_cast<int64_t>(next + 1) * n / chunks;
    if (begin < end) (*job_fn_)(worker, begin, end);
    if (done_chunks_.fetch_add(1, std::memory_order_acq_rel) + 1 ==
        static_cast<int>(chunks)) {
      // The last chunk: wake a caller that stopped spinning. Taking the
      // mutex keeps the wake from falling between its check and its wait.
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelForWorker(int64_t n, const ChunkFn& fn,
                                   int max_chunks) {
  if (n <= 0) return;
  int64_t threads = num_threads_;
  if (n < threads) threads = n;
  if (max_chunks < threads) threads = max_chunks < 1 ? 1 : max_chunks;
  // Holding call_mutex_ even inline keeps worker 0's scratch exclusive.
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  if (threads == 1) {
    fn(0, 0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(
      {n, static_cast<int64_t>(max_chunks), threads * kChunksPerThread});
  uint32_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_fn_ = &fn;
    job_n_ = n;
    done_chunks_.store(0, std::memory_order_relaxed);
    generation = generation_.load(std::memory_order_relaxed) + 1;
    claim_.store((static_cast<uint64_t>(generation) << 32) |
                     (static_cast<uint64_t>(chunks) << 16),
                 std::memory_order_release);
    generation_.store(generation, std::memory_order_release);
  }
  // Wakes the workers that went to sleep; the spinning ones have seen the
  // new generation already. Cheap (no system call) when nobody waits.
  start_cv_.notify_all();
  RunChunks(0, generation);
  auto all_done = [this, chunks] {
    return done_chunks_.load(std::memory_order_acquire) ==
           static_cast<int>(chunks);
  };
  if (!SpinUntil(all_done)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, all_done);
  }
  job_fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker) {
  uint32_t seen = 0;
  for (;;) {
    auto has_news = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!SpinUntil(has_news)) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, has_news);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunChunks(worker, seen);
  }
}

void* ThreadPool::WorkerScratch(int worker, size_t num_bytes) {
  Scratch& s = scratch_[worker];
  if (s.num_bytes < num_bytes) {
    const size_t rounded = (num_bytes + 63) / 64 * 64;
    s.data.reset(std::aligned_alloc(64, rounded));
    s.num_bytes = s.data ? rounded : 0;
  }
  return s.data.get();
}

}  // namespace tributary
