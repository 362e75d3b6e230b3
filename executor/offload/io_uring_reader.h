#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/offload/expert_reader.h"
#include "executor/offload/read_queue.h"

struct io_uring;

namespace moelab::executor::offload {

// The io_uring reader: up to `in_flight` reads outstanding in one io_uring, each into its own
// aligned staging block. Reads are issued (under the reader's mutex) by whichever thread frees a
// slot or submits a job; one thread of the reader's own waits for completions, verifies each
// block's checksum and copies it into its destination. Only built with liburing (MOELAB_HAVE_
// LIBURING); the constructor throws Error when the kernel refuses io_uring (a seccomp filter, an
// old kernel).
class IoUringExpertReader final : public QueuedExpertReader {
 public:
  IoUringExpertReader(const ExpertStore& store, int in_flight,
                      ExecutionTimeline* timeline = nullptr);
  ~IoUringExpertReader() override;
  IoUringExpertReader(const IoUringExpertReader&) = delete;
  IoUringExpertReader& operator=(const IoUringExpertReader&) = delete;

  int64_t Submit(const Job& job) override;

  // Whether io_uring can be set up here; when not, `why` says what refused it.
  static bool Available(std::string* why);

 private:
  struct Slot {
    AlignedBuffer block;
    int64_t job = -1;                              // the job it reads, -1 when free
    int64_t read_bytes = 0;                        // of the block, so far
    std::chrono::steady_clock::time_point issued;  // when the job's first read was issued
  };
  void DispatchLocked();          // fills free slots with runnable jobs (mutex held)
  void IssueLocked(size_t slot);  // queues the read of the rest of the slot's block
  void FailLocked(size_t slot, std::exception_ptr error);
  void Complete();  // the completion thread

  const ExpertStore& store_;
  ExecutionTimeline* timeline_;
  std::unique_ptr<io_uring> ring_;
  std::condition_variable issued_;
  std::vector<Slot> slots_;
  int in_flight_ = 0;  // reads issued and not yet completed
  bool stop_ = false;
  std::thread completer_;
};

}  // namespace moelab::executor::offload
