#include "engine/backend/cpu/thread_pool.h"

#include <cstdlib>

namespace tributary {

void ThreadPool::AlignedFree::operator()(void* p) const { std::free(p); }

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads < 1 ? 1 : num_threads), scratch_(num_threads_) {
  threads_.reserve(num_threads_ - 1);
  for (int w = 1; w < num_threads_; ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(w); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
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

void ThreadPool::RunChunk(int worker) {
  if (worker >= job_chunks_) return;
  const int64_t begin = worker * job_n_ / job_chunks_;
  const int64_t end = (worker + 1) * job_n_ / job_chunks_;
  if (begin < end) (*job_fn_)(worker, begin, end);
}

void ThreadPool::ParallelForWorker(int64_t n, const ChunkFn& fn,
                                   int max_chunks) {
  if (n <= 0) return;
  int64_t chunks = num_threads_;
  if (n < chunks) chunks = n;
  if (max_chunks < chunks) chunks = max_chunks < 1 ? 1 : max_chunks;
  // Holding call_mutex_ even inline keeps worker 0's scratch exclusive.
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  if (chunks == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_fn_ = &fn;
    job_n_ = n;
    job_chunks_ = static_cast<int>(chunks);
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  RunChunk(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    // job_fn_ and job_n_ are stable until pending_ reaches 0.
    RunChunk(worker);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last = --pending_ == 0;
    }
    if (last) done_cv_.notify_one();
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
