#include "executor/offload/async_reader.h"

#include <algorithm>

namespace moelab::executor::offload {

AsyncExpertReader::AsyncExpertReader(const ExpertStore& store, int threads) : store_(store) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Work(); });
}

AsyncExpertReader::~AsyncExpertReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

int64_t AsyncExpertReader::Submit(const Job& job) {
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = static_cast<int64_t>(jobs_.size());
    jobs_.push_back(job);
    state_.push_back(0);
    errors_.emplace_back();
    queue_.push_back(id);
  }
  work_.notify_one();
  return id;
}

bool AsyncExpertReader::Done(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_[static_cast<size_t>(id)] == 2;
}

void AsyncExpertReader::Wait(int64_t id) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return state_[static_cast<size_t>(id)] == 2; });
  if (errors_[static_cast<size_t>(id)]) std::rethrow_exception(errors_[static_cast<size_t>(id)]);
}

bool AsyncExpertReader::Runnable(const Job& job) const {
  return job.after < 0 || state_[static_cast<size_t>(job.after)] == 2;
}

void AsyncExpertReader::Work() {
  AlignedBuffer buffer(store_.key().block_bytes());
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // The best runnable job: class, then priority, then id.
    auto best = queue_.end();
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      const Job& job = jobs_[static_cast<size_t>(*it)];
      if (!Runnable(job)) continue;
      if (best == queue_.end()) {
        best = it;
        continue;
      }
      const Job& current = jobs_[static_cast<size_t>(*best)];
      if (job.priority_class < current.priority_class ||
          (job.priority_class == current.priority_class && job.priority > current.priority)) {
        best = it;
      }
    }
    if (best == queue_.end()) {
      if (stop_) return;
      work_.wait(lock);
      continue;
    }
    const int64_t id = *best;
    queue_.erase(best);
    state_[static_cast<size_t>(id)] = 1;
    const Job job = jobs_[static_cast<size_t>(id)];
    lock.unlock();
    std::exception_ptr error;
    try {
      store_.Read(job.layer, job.expert, buffer, *job.destination);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    state_[static_cast<size_t>(id)] = 2;
    errors_[static_cast<size_t>(id)] = error;
    ++reads_;
    done_.notify_all();
    work_.notify_all();  // jobs waiting on this one may run now
  }
}

}  // namespace moelab::executor::offload
