#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "executor/offload/expert_reader.h"

namespace moelab::executor::offload {

// The bookkeeping both readers share, not thread-safe (the reader holds its mutex around every
// call): every job submitted, its state, its error, and which queued job runs next.
class ReadQueue {
 public:
  int64_t Add(const ExpertReader::Job& job);
  // The best runnable queued job (class, then priority, then id; a job whose `after` is not done
  // waits), marked running; nullopt when none can run now.
  std::optional<int64_t> StartNext();
  void Finish(int64_t id, std::exception_ptr error);
  // Seconds during which at least one job was running (started, not finished), so far: the
  // storage's busy time, over which the bytes read give the bandwidth the reads got.
  double busy_s() const;
  // The finished jobs' queued and running seconds, and the wake-ups noted (NoteWake).
  ExpertReader::Spans spans() const { return spans_; }
  // A thread that waited for job `id` runs again now: the time since the job finished.
  void NoteWake(int64_t id);
  bool done(int64_t id) const { return state_[static_cast<size_t>(id)] == kDone; }
  const std::exception_ptr& error(int64_t id) const { return errors_[static_cast<size_t>(id)]; }
  const ExpertReader::Job& job(int64_t id) const { return jobs_[static_cast<size_t>(id)]; }
  int64_t finished() const { return finished_; }

 private:
  enum State : char { kQueued, kRunning, kDone };
  bool Runnable(const ExpertReader::Job& job) const;

  std::vector<ExpertReader::Job> jobs_;  // by id
  std::vector<State> state_;             // by id
  std::vector<std::exception_ptr> errors_;
  std::vector<int64_t> queued_;  // queued ids
  int64_t finished_ = 0;
  int64_t running_ = 0;
  std::chrono::steady_clock::time_point busy_since_;  // when running_ last left 0
  double busy_s_ = 0;                                 // closed busy spans
  // By id: when the job was added, started and finished (the last two once they happen).
  std::vector<std::chrono::steady_clock::time_point> added_at_, started_at_, finished_at_;
  ExpertReader::Spans spans_;
};

// What both readers do the same way: the queue under one mutex, waiting for a job, the count of
// reads done. A reader adds how jobs start, and ends each with FinishLocked (under mutex_).
class QueuedExpertReader : public ExpertReader {
 public:
  void Wait(int64_t id) final;
  bool Done(int64_t id) final;
  int64_t reads() const final;
  double busy_s() const final;
  Spans spans() const final;

 protected:
  // Marks job `id` finished and wakes the threads waiting for it -- only those: a compute thread
  // waiting for one expert is not woken by every other read that ends meanwhile.
  void FinishLocked(int64_t id, std::exception_ptr error);

  mutable std::mutex mutex_;
  ReadQueue queue_;

 private:
  std::condition_variable done_;
  std::vector<int64_t> waited_;  // the ids threads are waiting for in Wait (a thread each)
};

}  // namespace moelab::executor::offload
