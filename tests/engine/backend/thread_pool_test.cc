#include "engine/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

TEST(ThreadPoolTest, FixedPartitionAndWorkerIds) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::mutex mu;
    std::multiset<std::pair<int64_t, int64_t>> chunks;
    std::set<int> workers;
    pool.ParallelForWorker(100, [&](int worker, int64_t begin, int64_t end) {
      std::lock_guard<std::mutex> lock(mu);
      chunks.insert({begin, end});
      workers.insert(worker);
    });
    // C = min(100, 3 · kChunksPerThread) chunks [c·100 / C, (c+1)·100 / C),
    // each exactly once, whoever ran it.
    const int64_t c = 3 * ThreadPool::kChunksPerThread;
    std::multiset<std::pair<int64_t, int64_t>> expected;
    for (int64_t i = 0; i < c; ++i)
      expected.insert({i * 100 / c, (i + 1) * 100 / c});
    EXPECT_EQ(chunks, expected);
    for (int w : workers) {
      EXPECT_GE(w, 0);
      EXPECT_LT(w, 3);
    }
  }
}

TEST(ThreadPoolTest, ChunksRunOnTheCallerOrAWorker) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::pair<int, bool>> seen;  // (worker id, on the caller)
  for (int rep = 0; rep < 50; ++rep) {
    pool.ParallelForWorker(64, [&](int worker, int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert({worker, std::this_thread::get_id() == caller});
    });
  }
  // Worker 0 is always the caller, worker 1 never.
  for (const auto& [worker, on_caller] : seen) {
    EXPECT_EQ(on_caller, worker == 0) << "worker " << worker;
  }
}

TEST(ThreadPoolTest, SlowChunksOnOneSideStillCoverTheRangeOnce) {
  // While the worker sleeps in a chunk, the caller claims the others; the
  // range is still covered exactly once and the call returns only after the
  // slow chunk.
  ThreadPool pool(2);
  for (int rep = 0; rep < 100; ++rep) {
    std::atomic<int64_t> covered{0};
    pool.ParallelForWorker(37, [&](int worker, int64_t begin, int64_t end) {
      if (worker == 1 && rep % 2 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      covered.fetch_add(end - begin);
    });
    EXPECT_EQ(covered.load(), 37);
  }
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
  // A worker may run several chunks of a call (or none): the first chunk of
  // a worker fills its buffer, later ones must find the same buffer.
  void* first[2] = {nullptr, nullptr};
  pool.ParallelForWorker(8, [&](int worker, int64_t, int64_t) {
    void* p = pool.WorkerScratch(worker, 1000);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    if (first[worker] == nullptr) {
      std::memset(p, worker, 1000);
      first[worker] = p;
    }
    EXPECT_EQ(p, first[worker]);
  });
  if (first[0] != nullptr && first[1] != nullptr) {
    EXPECT_NE(first[0], first[1]);
  }
  pool.ParallelForWorker(8, [&](int worker, int64_t, int64_t) {
    // Same size or smaller: the same buffer, contents kept.
    void* p = pool.WorkerScratch(worker, 500);
    if (first[worker] != nullptr) {
      EXPECT_EQ(p, first[worker]);
      EXPECT_EQ(static_cast<unsigned char*>(p)[499], worker);
    }
  });
  pool.ParallelForWorker(8, [&](int worker, int64_t, int64_t) {
    EXPECT_NE(pool.WorkerScratch(worker, 1 << 20), nullptr);  // grows
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
