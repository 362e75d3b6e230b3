#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moelab {

// A persistent pool: threads are created once and reused by every parallel operation (no thread
// creation per op). The calling thread works too, so a pool of size 1 runs inline.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1, including the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task, thread_index) for every task in [0, tasks); tasks are claimed dynamically.
  // Returns when all are done. Not reentrant: fn must not call Run on the same pool.
  void Run(int64_t tasks, const std::function<void(int64_t task, int thread)>& fn);

 private:
  void WorkerLoop(int thread);
  void Work(int thread);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_workers_{0};
  std::atomic<uint64_t> generation_{0};
  bool stopping_ = false;
};

// Default thread count: MOELAB_THREADS when set, else the hardware concurrency.
int DefaultThreadCount();

}  // namespace moelab
