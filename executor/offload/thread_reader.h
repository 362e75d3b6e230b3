#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/offload/expert_reader.h"
#include "executor/offload/read_queue.h"

namespace moelab::executor::offload {

// The threads reader: `threads` threads of its own, each taking the next job and reading it with
// a blocking pread (ExpertStore::Read), so up to `threads` reads are in flight. Blocked in the
// kernel most of the time, they do not compete with the compute threads.
class ThreadExpertReader final : public QueuedExpertReader {
 public:
  ThreadExpertReader(const ExpertStore& store, int threads, ExecutionTimeline* timeline = nullptr);
  ~ThreadExpertReader() override;
  ThreadExpertReader(const ThreadExpertReader&) = delete;
  ThreadExpertReader& operator=(const ThreadExpertReader&) = delete;

  int64_t Submit(const Job& job) override;

 private:
  void Work(int thread);
  void Stop();  // drains the queue, joins every started thread

  const ExpertStore& store_;
  ExecutionTimeline* timeline_;
  std::condition_variable work_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace moelab::executor::offload
