// A small fixed-size pool of worker threads for the CPU backend.
//
// The backend owns one pool (no globals, no singletons) and hands it to the
// kernels that split their work: ParallelFor(n, fn) cuts [0, n) into a fixed
// set of contiguous chunks (a given (n, num_threads, max_chunks) always
// yields the same chunks) and the calling thread and the workers claim them
// one at a time until none is left, returning when all are done. Which
// thread runs which chunk is not fixed: a worker that is late (asleep,
// descheduled by another process on a busy machine) finds its share already
// taken by the others instead of holding the call up. Kernels therefore
// must (and do) compute each unit of work the same way whoever runs it.
//
// Thread safety: ParallelFor may be called from any thread; concurrent calls
// on one pool are serialised (one job at a time). `fn` must not call
// ParallelFor on the same pool (that would deadlock) and must not throw.
// Each worker also owns a scratch buffer (WorkerScratch) that only the code
// running that worker's chunks may touch, so kernels need no allocation per
// call. The destructor wakes and joins every worker; it must not run while a
// ParallelFor is in flight.
//
// Cost: a worker that finished a job spins for kSpinSeconds before it goes
// to sleep, and the caller spins the same while it waits for the last chunk,
// so the back-to-back calls of a forward step hand work over in about a
// microsecond; a call after a longer pause pays one mutex/condition-variable
// round trip (tens of µs when the workers are asleep). A pool of one thread
// runs fn inline and never spins.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_

#include <atomic>
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
  // num_threads − 1 threads are started); clamped to [1, kMaxThreads].
  explicit ThreadPool(int num_threads);

  // A call's chunk count (at most kChunksPerThread per thread) must fit the
  // 16-bit fields of the packed claim word.
  static constexpr int kMaxThreads = 4096;
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over the chunks of [0, n): with
  // P = min(num_threads(), n, max_chunks) and
  // C = min(n, max_chunks, P · kChunksPerThread) chunks, chunk c is
  // [c·n / C, (c+1)·n / C), run exactly once by whichever thread claims it.
  // P == 1 runs fn(0, n) inline without waking anyone. n <= 0 does nothing.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                   int max_chunks = kNoLimit);

  // The same, also telling fn which worker runs the chunk (for
  // WorkerScratch): 0 for the calling thread, 1 … num_threads() − 1 for the
  // workers. A worker may run several chunks of one call, one after another.
  void ParallelForWorker(int64_t n, const ChunkFn& fn,
                         int max_chunks = kNoLimit);

  static constexpr int kNoLimit = 1 << 30;

  // Chunks per thread of a call: enough that a late thread's share can be
  // taken over by the others, few enough that a chunk stays a good piece of
  // work. (The matmul asks for one chunk a thread: each claim moves this
  // pool's shared cache lines between the cores; matmul.cc.)
  static constexpr int kChunksPerThread = 4;

  // How long a worker (and a waiting caller) polls before it blocks. Long
  // enough to span the serial gaps between the parallel ops of one step
  // (a few to tens of µs), short enough that an idle pool gives its cores
  // back almost at once.
  static constexpr double kSpinSeconds = 100e-6;

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
  // Claims and runs chunks of job `generation` as `worker` until none is
  // left.
  void RunChunks(int worker, uint32_t generation);

  const int num_threads_;
  std::vector<std::thread> threads_;
  std::vector<Scratch> scratch_;  // [num_threads_]

  std::mutex call_mutex_;  // serialises ParallelFor callers

  // A job is published by writing job_fn_ and job_n_ under mutex_, then
  // claim_ (release) and generation_. claim_ packs the job's generation (32
  // bits), its chunk count (16) and the next unclaimed chunk (16); a thread
  // claims a chunk with a compare-and-swap that also checks the generation,
  // so a late thread can never claim a chunk of a finished job, and once it
  // holds a chunk the job (and job_*) stays in place until that chunk is
  // done (done_chunks_).
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint32_t> generation_{0};  // bumped for each job
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_chunks_{0};
  std::atomic<bool> stop_{false};
  const ChunkFn* job_fn_ = nullptr;
  int64_t job_n_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_THREAD_POOL_H_
