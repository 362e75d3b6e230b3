#include "kernels/thread_pool.h"

#include <cstdlib>
#include <string>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define MOELAB_CPU_RELAX() _mm_pause()
#else
#define MOELAB_CPU_RELAX() ((void)0)
#endif

namespace moelab {

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw Error("thread count must be at least 1, got " + std::to_string(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Work(int thread) {
  while (true) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) break;
    (*job_)(task, thread);
  }
}

namespace {
// Decode runs hundreds of short parallel operations per token; spinning briefly before sleeping
// saves the wake-up latency of a condition variable on each of them.
constexpr int kSpinIterations = 20000;
}  // namespace

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  while (true) {
    for (int spin = 0; spin < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++spin) {
      MOELAB_CPU_RELAX();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stopping_) return;
      seen = generation_.load(std::memory_order_acquire);
    }
    Work(thread);
    if (active_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::Run(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t task = 0; task < tasks; ++task) fn(task, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    next_task_.store(0, std::memory_order_relaxed);
    active_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  Work(0);
  for (int spin = 0; spin < kSpinIterations && active_workers_.load(std::memory_order_acquire) != 0; ++spin) {
    MOELAB_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return active_workers_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("MOELAB_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (*end != '\0' || value < 1 || value > 1024) {
      throw Error(std::string("MOELAB_THREADS='") + env + "': expected an integer from 1 to 1024");
    }
    return static_cast<int>(value);
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

}  // namespace moelab
