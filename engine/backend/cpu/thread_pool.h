// A small fixed-size pool of worker threads for the CPU backend.
//
// The backend owns one pool (no globals, no singletons) and hands it to the
// kernels that split their work: ParallelFor(n, fn) cuts [0, n) into
// num_threads() contiguous chunks by a fixed rule (static partitioning, so a
// given (n, num_threads) always yields the same chunks) and runs chunk 0 on the
// calling thread, the others on the workers, returning when all are done.
//
// Thread safety: ParallelFor may be called from any thread; concurrent calls
// on one pool are serialised (one job at a time). `fn` must not call
// ParallelFor on the same pool (that would deadlock) and must not throw.
// Each worker also owns a scratch buffer (WorkerScratch) that only the code
// running that worker's chunk may touch, so kernels need no allocation per
// call. The destructor wakes and joins every worker; it must not run while a
// ParallelFor is in flight.
//
// Cost: one mutex/condition-variable round trip per call (tens of µs when the
// workers are asleep); a pool of one thread runs fn inline.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tributary {

class ThreadPool {
 public:
  // fn(worker, begin, end): one chunk [begin, end) of the range, run by
  // worker `worker` in [0, num_threads()).
  using ChunkFn = std::function<void(int worker, int64_t begin, int64_t end)>;

  // num_threads: the total parallelism, the calling thread included (so
  // num_threads − 1 threads are started); values below 1 are taken as 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over the chunks of [0, n); with
  // P = min(num_threads(), n, max_chunks) chunks, chunk w is
  // [w·n / P, (w+1)·n / P), run by worker w (chunk 0 on the calling thread).
  // P == 1 runs inline without waking anyone. n <= 0 does nothing.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                   int max_chunks = kNoLimit);

  // The same, also telling fn which worker runs the chunk (for WorkerScratch).
  void ParallelForWorker(int64_t n, const ChunkFn& fn,
                         int max_chunks = kNoLimit);

  static constexpr int kNoLimit = 1 << 30;

  // A 64-byte-aligned buffer of at least `num_bytes` owned by `worker`, kept
  // (and grown when needed) across calls. Only the chunk running as `worker`
  // may call this and use the memory, and only until its chunk returns.
  void* WorkerScratch(int worker, size_t num_bytes);

 private:
  struct AlignedFree {
    void operator()(void* p) const;
  };
  struct Scratch {
    std::unique_ptr<void, AlignedFree> data;
    size_t num_bytes = 0;
  };

  void WorkerLoop(int worker);
  void RunChunk(int worker);

  const int num_threads_;
  std::vector<std::thread> threads_;
  std::vector<Scratch> scratch_;  // [num_threads_]

  std::mutex call_mutex_;  // serialises ParallelFor callers

  std::mutex mutex_;  // guards everything below
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped for each job
  int pending_ = 0;          // workers still running the current job
  bool stop_ = false;
  const ChunkFn* job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_
