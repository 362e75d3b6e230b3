#include "executor/offload/thread_reader.h"

#include <algorithm>
#include <system_error>

#include "base/error.h"

namespace moelab::executor::offload {

ThreadExpertReader::ThreadExpertReader(const ExpertStore& store, int threads,
                                       ExecutionTimeline* timeline)
    : store_(store), timeline_(timeline) {
  try {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this, i] { Work(i); });
  } catch (const std::system_error& e) {
    // The threads already started are stopped and joined: a joinable std::thread destroyed by the
    // unwinding would std::terminate ("terminate called without an active exception").
    Stop();
    throw base::Error("--offload-readers " + std::to_string(threads) + ": could not start reader " +
                      std::to_string(threads_.size() + 1) + " (" + e.what() + ")");
  }
}

void ThreadExpertReader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

ThreadExpertReader::~ThreadExpertReader() { Stop(); }

int64_t ThreadExpertReader::Submit(const Job& job) {
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = queue_.Add(job);
  }
  work_.notify_one();
  return id;
}

void ThreadExpertReader::Work(int thread) {
  AlignedBuffer buffer(store_.key().block_bytes());
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const std::optional<int64_t> id = queue_.StartNext();
    if (!id) {
      // Queued jobs drain before the threads stop (the destructor's promise to the tier).
      if (stop_) return;
      work_.wait(lock);
      continue;
    }
    const Job job = queue_.job(*id);
    lock.unlock();
    std::exception_ptr error;
    const auto start = ExecutionTimeline::Clock::now();
    auto block_read_at = start;
    try {
      store_.Read(job.layer, job.expert, buffer, *job.destination, &block_read_at);
    } catch (...) {
      error = std::current_exception();
    }
    if (timeline_ && !error) {
      const int lane = ExecutionTimeline::kReaderLane + thread;
      const auto layer = static_cast<int32_t>(job.layer), expert = static_cast<int32_t>(job.expert);
      timeline_->Add(ExecutionTimeline::Kind::kStorage, layer, expert, lane, start, block_read_at);
      timeline_->Add(ExecutionTimeline::Kind::kCopy, layer, expert, lane, block_read_at,
                     ExecutionTimeline::Clock::now());
    }
    lock.lock();
    FinishLocked(*id, error);
    work_.notify_all();  // jobs waiting on this one may run now
  }
}

}  // namespace moelab::executor::offload
