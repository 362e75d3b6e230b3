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

namespace moelab::kernels {

ThreadPool::ThreadPool(int threads) {
  if (threads < 1)
    throw base::Error("thread count must be at least 1, got " + std::to_string(threads));
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

void ThreadPool::Work(int thread, uint64_t generation, const std::function<void(int64_t, int)>* job,
                      int64_t tasks) {
  const uint64_t tag = (generation & 0xffffffffu) << 32;
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (true) {
    if ((claim & ~uint64_t{0xffffffffu}) != tag ||
        static_cast<int64_t>(claim & 0xffffffffu) >= tasks)
      return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    (*job)(static_cast<int64_t>(claim & 0xffffffffu), thread);
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
    claim = claim_.load(std::memory_order_acquire);
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
    for (int spin = 0; spin < kSpinIterations &&
                       (claim_.load(std::memory_order_acquire) >> 32) == (seen & 0xffffffffu);
         ++spin) {
      MOELAB_CPU_RELAX();
    }
    const std::function<void(int64_t, int)>* job;
    int64_t tasks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      tasks = tasks_;
    }
    Work(thread, seen, job, tasks);
  }
}

void ThreadPool::Run(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t task = 0; task < tasks; ++task) fn(task, 0);
    return;
  }
  if (tasks >= (int64_t{1} << 32))
    throw base::Error("thread pool: " + std::to_string(tasks) +
                      " tasks in one call (at most 2^32 - 1)");
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation = ++generation_;
    job_ = &fn;
    tasks_ = tasks;
    finished_.store(0, std::memory_order_relaxed);
    claim_.store((generation & 0xffffffffu) << 32, std::memory_order_release);
  }
  wake_.notify_all();
  Work(0, generation, &fn, tasks);
  for (int spin = 0; spin < kSpinIterations && finished_.load(std::memory_order_acquire) != tasks;
       ++spin) {
    MOELAB_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) == tasks; });
  job_ = nullptr;
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("MOELAB_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (*end != '\0' || value < 1 || value > 1024) {
      throw base::Error(std::string("MOELAB_THREADS='") + env +
                        "': expected an integer from 1 to 1024");
    }
    return static_cast<int>(value);
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

}  // namespace moelab::kernels
