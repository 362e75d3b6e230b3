// ThreadPool: every task of every Run runs exactly once, on any pool size, across many short Runs
// back to back (workers that wake late must not run a later Run's tasks, nor a finished one's).
#include "kernels/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace moelab::kernels {
namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t tasks : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      std::atomic<int> bad_thread{0};
      pool.Run(tasks, [&](int64_t task, int thread) {
        runs[static_cast<size_t>(task)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      });
      for (int64_t task = 0; task < tasks; ++task)
        ASSERT_EQ(runs[static_cast<size_t>(task)].load(), 1)
            << threads << " threads, task " << task;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, ManyShortRunsBackToBack) {
  ThreadPool pool(3);
  for (int run = 0; run < 20000; ++run) {
    const int64_t tasks = 2 + run % 15;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
    pool.Run(tasks, [&](int64_t task, int) { runs[static_cast<size_t>(task)].fetch_add(1); });
    for (int64_t task = 0; task < tasks; ++task)
      ASSERT_EQ(runs[static_cast<size_t>(task)].load(), 1) << "run " << run << " task " << task;
  }
}

}  // namespace
}  // namespace moelab::kernels
