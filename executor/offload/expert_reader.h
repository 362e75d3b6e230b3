#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "executor/execution_timeline.h"
#include "executor/offload/expert_store.h"

namespace moelab::executor::offload {

// Reads experts from the store asynchronously, in the simulator's order: demand reads (class 0)
// before prefetches (class 1), higher priority first within a class, then first come. A job may
// name an earlier job that must finish first (the read that last filled, or still fills, the same
// buffer). Two implementations (`--offload-reader`), chosen by MakeExpertReader:
//   threads   a few threads of its own, each a blocking pread per read (thread_reader.h);
//   io_uring  one thread driving an io_uring of `in_flight` reads (io_uring_reader.h), where the
//             build found liburing and the kernel allows io_uring.
class ExpertReader {
 public:
  virtual ~ExpertReader() = default;

  struct Job {
    int64_t layer = 0, expert = 0;
    FfnWeights* destination = nullptr;
    int priority_class = 0;  // 0 demand, 1 prefetch
    double priority = 0;     // higher first within the class
    int64_t after = -1;      // a job id that must be done first, or -1
  };
  // Queues a read; returns its id (ids count from 0).
  virtual int64_t Submit(const Job& job) = 0;
  // Blocks until job `id` is done; rethrows its Error (a checksum mismatch, an I/O error).
  virtual void Wait(int64_t id) = 0;
  virtual bool Done(int64_t id) = 0;
  virtual int64_t reads() const = 0;
  // Seconds during which at least one read was in flight (a read: the block's pread, checksum and
  // copy into its destination), since the reader started: reads() blocks over it are the
  // bandwidth the reads got, measured by the run itself.
  virtual double busy_s() const = 0;
  // Where the finished reads' time went, summed over them: queued (submitted until a reader took
  // it: behind other reads, or waiting for its buffer's earlier read), running (the pread, the
  // checksum and the copy), and for the reads someone waited on, from the read's end to the
  // waiting thread running again (its wake-up).
  struct Spans {
    double queued_s = 0, running_s = 0, wake_s = 0;
    int64_t reads = 0, waits = 0;
    Spans operator-(const Spans& earlier) const {
      return {queued_s - earlier.queued_s, running_s - earlier.running_s, wake_s - earlier.wake_s,
              reads - earlier.reads, waits - earlier.waits};
    }
  };
  virtual Spans spans() const = 0;
};

enum class ReaderKind { kThreads, kIoUring };
std::string ToString(ReaderKind kind);
// "threads" or "io_uring"; Error naming --offload-reader otherwise.
ReaderKind ParseReaderKind(const std::string& name);

// Whether this build and kernel can run the io_uring reader; when not, `why` says which.
bool IoUringAvailable(std::string* why);

// The reader of `kind` with `in_flight` reads outstanding at most (threads: that many threads).
// Error when io_uring is asked for and unavailable (the reason named). With a `timeline`, every
// read adds its pread ("storage") and its checksum and copy ("copy") on its reader's lane
// (threads: one per thread; io_uring: one per read in flight).
std::unique_ptr<ExpertReader> MakeExpertReader(ReaderKind kind, const ExpertStore& store,
                                               int in_flight,
                                               ExecutionTimeline* timeline = nullptr);

}  // namespace moelab::executor::offload
