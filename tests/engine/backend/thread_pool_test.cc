#include "engine/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace tributary {
namespace {

TEST(ThreadPoolTest, CoversTheRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 8, 9, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

TEST(ThreadPoolTest, StaticPartitionAndWorkerIds) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::pair<int64_t, int64_t>> chunks;
  std::set<int> workers;
  pool.ParallelForWorker(10, [&](int worker, int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.insert({begin, end});
    workers.insert(worker);
    EXPECT_EQ(begin, worker * 10 / 3);
    EXPECT_EQ(end, (worker + 1) * 10 / 3);
  });
  EXPECT_EQ(chunks,
            (std::set<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 10}}));
  EXPECT_EQ(workers, (std::set<int>{0, 1, 2}));
}

TEST(ThreadPoolTest, ChunkZeroRunsOnTheCaller) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id chunk0, chunk1;
  pool.ParallelForWorker(2, [&](int worker, int64_t, int64_t) {
    (worker == 0 ? chunk0 : chunk1) = std::this_thread::get_id();
  });
  EXPECT_EQ(chunk0, caller);
  EXPECT_NE(chunk1, caller);
}

TEST(ThreadPoolTest, MaxChunksLimitsParallelism) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(
      100,
      [&](int64_t begin, int64_t end) {
        EXPECT_EQ(begin, 0);
        EXPECT_EQ(end, 100);
        EXPECT_EQ(std::this_thread::get_id(), caller);
        calls.fetch_add(1);
      },
      1);
  EXPECT_EQ(calls.load(), 1);
  std::atomic<int> chunks{0};
  pool.ParallelFor(
      100, [&](int64_t, int64_t) { chunks.fetch_add(1); }, 2);
  EXPECT_EQ(chunks.load(), 2);
}

TEST(ThreadPoolTest, ManyCallsAndConcurrentCallers) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int rep = 0; rep < 200; ++rep) {
      pool.ParallelFor(50, [&](int64_t begin, int64_t end) {
        total.fetch_add(end - begin);
      });
    }
  };
  std::thread a(caller), b(caller);
  caller();
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 3 * 200 * 50);
}

TEST(ThreadPoolTest, WorkerScratchIsAlignedPerWorkerAndKept) {
  ThreadPool pool(2);
  void* first[2] = {nullptr, nullptr};
  pool.ParallelForWorker(2, [&](int worker, int64_t, int64_t) {
    void* p = pool.WorkerScratch(worker, 1000);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, worker, 1000);
    first[worker] = p;
  });
  EXPECT_NE(first[0], first[1]);
  pool.ParallelForWorker(2, [&](int worker, int64_t, int64_t) {
    // Same size or smaller: the same buffer, contents kept.
    void* p = pool.WorkerScratch(worker, 500);
    EXPECT_EQ(p, first[worker]);
    EXPECT_EQ(static_cast<unsigned char*>(p)[499], worker);
    // Larger: grows.
    EXPECT_NE(pool.WorkerScratch(worker, 1 << 20), nullptr);
  });
}

TEST(ThreadPoolTest, ConstructAndDestroyWithoutWork) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(4);
    EXPECT_EQ(pool.num_threads(), 4);
  }
  ThreadPool zero(0);
  EXPECT_EQ(zero.num_threads(), 1);
}

}  // namespace
}  // namespace tributary
