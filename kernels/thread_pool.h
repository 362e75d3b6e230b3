#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moelab::kernels {

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
  // Claims and runs tasks of generation `generation` until none is left (or a newer Run began).
  void Work(int thread, uint64_t generation, const std::function<void(int64_t, int)>* job,
            int64_t tasks);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t tasks_ = 0;
  // (generation & 0xffffffff) << 32 | next task: a task is claimed with one compare-exchange that
  // also checks the generation, so a worker that wakes late never runs another Run's tasks, and
  // Run waits for finished tasks, not for every worker to check in (a worker descheduled on a busy
  // machine used to hold every call up for a time slice).
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> finished_{0};
  uint64_t generation_ = 0;  // guarded by mutex_
  bool stopping_ = false;
};

// Default thread count: MOELAB_THREADS when set, else the hardware concurrency.
int DefaultThreadCount();

}  // namespace moelab::kernels
