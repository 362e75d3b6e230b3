#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/offload/expert_store.h"

namespace moelab::executor::offload {

// Reads experts from the store on a few threads of their own (blocked in the kernel most of the
// time, so they do not compete with the compute threads), in the simulator's order: demand reads
// (class 0) before prefetches (class 1), higher priority first within a class, then first come.
// A job may name an earlier job that must finish first (the read that last filled, or still
// fills, the same buffer). io_uring was not needed: a thread per outstanding read saturates the
// disk at these block sizes (results/offload-runtime.md).
class AsyncExpertReader {
 public:
  AsyncExpertReader(const ExpertStore& store, int threads);
  ~AsyncExpertReader();
  AsyncExpertReader(const AsyncExpertReader&) = delete;
  AsyncExpertReader& operator=(const AsyncExpertReader&) = delete;

  struct Job {
    int64_t layer = 0, expert = 0;
    FfnWeights* destination = nullptr;
    int priority_class = 0;  // 0 demand, 1 prefetch
    double priority = 0;     // higher first within the class
    int64_t after = -1;      // a job id that must be done first, or -1
  };
  // Queues a read; returns its id (ids count from 0).
  int64_t Submit(const Job& job);
  // Blocks until job `id` is done; rethrows its Error (a checksum mismatch, an I/O error).
  void Wait(int64_t id);
  bool Done(int64_t id);

  int64_t reads() const { return reads_; }
  double bytes_read() const {
    return static_cast<double>(reads_) * static_cast<double>(store_.key().block_bytes());
  }

 private:
  void Work();
  bool Runnable(const Job& job) const;  // under mutex_

  const ExpertStore& store_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::vector<Job> jobs_;    // by id
  std::vector<char> state_;  // by id: 0 queued, 1 running, 2 done
  std::vector<std::exception_ptr> errors_;
  std::vector<int64_t> queue_;  // queued ids
  bool stop_ = false;
  int64_t reads_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace moelab::executor::offload
