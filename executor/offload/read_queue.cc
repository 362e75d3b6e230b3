#include "executor/offload/read_queue.h"

#include <algorithm>

namespace moelab::executor::offload {

int64_t ReadQueue::Add(const ExpertReader::Job& job) {
  const int64_t id = static_cast<int64_t>(jobs_.size());
  jobs_.push_back(job);
  state_.push_back(kQueued);
  errors_.emplace_back();
  queued_.push_back(id);
  const auto now = std::chrono::steady_clock::now();
  added_at_.push_back(now);
  started_at_.push_back(now);
  finished_at_.push_back(now);
  return id;
}

namespace {
double Seconds(std::chrono::steady_clock::time_point from,
               std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}
}  // namespace

void ReadQueue::NoteWake(int64_t id) {
  spans_.wake_s += Seconds(finished_at_[static_cast<size_t>(id)], std::chrono::steady_clock::now());
  ++spans_.waits;
}

bool ReadQueue::Runnable(const ExpertReader::Job& job) const {
  return job.after < 0 || state_[static_cast<size_t>(job.after)] == kDone;
}

std::optional<int64_t> ReadQueue::StartNext() {
  auto best = queued_.end();
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    const ExpertReader::Job& job = jobs_[static_cast<size_t>(*it)];
    if (!Runnable(job)) continue;
    if (best == queued_.end()) {
      best = it;
      continue;
    }
    const ExpertReader::Job& current = jobs_[static_cast<size_t>(*best)];
    if (job.priority_class < current.priority_class ||
        (job.priority_class == current.priority_class && job.priority > current.priority)) {
      best = it;
    }
  }
  if (best == queued_.end()) return std::nullopt;
  const int64_t id = *best;
  queued_.erase(best);
  state_[static_cast<size_t>(id)] = kRunning;
  const auto now = std::chrono::steady_clock::now();
  started_at_[static_cast<size_t>(id)] = now;
  if (running_++ == 0) busy_since_ = now;
  return id;
}

void ReadQueue::Finish(int64_t id, std::exception_ptr error) {
  state_[static_cast<size_t>(id)] = kDone;
  errors_[static_cast<size_t>(id)] = std::move(error);
  ++finished_;
  const auto now = std::chrono::steady_clock::now();
  const size_t at = static_cast<size_t>(id);
  finished_at_[at] = now;
  spans_.queued_s += Seconds(added_at_[at], started_at_[at]);
  spans_.running_s += Seconds(started_at_[at], now);
  ++spans_.reads;
  if (--running_ == 0) busy_s_ += Seconds(busy_since_, now);
}

double ReadQueue::busy_s() const {
  if (running_ == 0) return busy_s_;
  return busy_s_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_since_).count();
}

void QueuedExpertReader::Wait(int64_t id) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!queue_.done(id)) {
    waited_.push_back(id);
    done_.wait(lock, [&] { return queue_.done(id); });
    waited_.erase(std::find(waited_.begin(), waited_.end(), id));
    queue_.NoteWake(id);
  }
  if (queue_.error(id)) std::rethrow_exception(queue_.error(id));
}

void QueuedExpertReader::FinishLocked(int64_t id, std::exception_ptr error) {
  queue_.Finish(id, std::move(error));
  if (std::find(waited_.begin(), waited_.end(), id) != waited_.end()) done_.notify_all();
}

ExpertReader::Spans QueuedExpertReader::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.spans();
}

bool QueuedExpertReader::Done(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.done(id);
}

double QueuedExpertReader::busy_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.busy_s();
}

int64_t QueuedExpertReader::reads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.finished();
}

}  // namespace moelab::executor::offload
