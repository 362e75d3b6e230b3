#include "executor/offload/io_uring_reader.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace moelab::executor::offload {

bool IoUringExpertReader::Available(std::string* why) {
  io_uring ring;
  const int status = io_uring_queue_init(1, &ring, 0);
  if (status < 0) {
    if (why) *why = std::string("io_uring_queue_init failed: ") + std::strerror(-status);
    return false;
  }
  io_uring_queue_exit(&ring);
  return true;
}

IoUringExpertReader::IoUringExpertReader(const ExpertStore& store, int in_flight,
                                         ExecutionTimeline* timeline)
    : store_(store), timeline_(timeline), ring_(std::make_unique<io_uring>()) {
  const int depth = std::max(1, in_flight);
  if (const int status = io_uring_queue_init(static_cast<unsigned>(depth), ring_.get(), 0);
      status < 0) {
    throw base::Error(std::string("--offload-reader io_uring: io_uring_queue_init failed: ") +
                      std::strerror(-status) + " (use --offload-reader threads)");
  }
  for (int i = 0; i < depth; ++i)
    slots_.push_back(Slot{AlignedBuffer(store.key().block_bytes()), -1, 0, {}});
  completer_ = std::thread([this] { Complete(); });
}

IoUringExpertReader::~IoUringExpertReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  issued_.notify_all();
  completer_.join();
  io_uring_queue_exit(ring_.get());
}

int64_t IoUringExpertReader::Submit(const Job& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t id = queue_.Add(job);
  DispatchLocked();
  return id;
}

void IoUringExpertReader::DispatchLocked() {
  // Until no slot is free or no job can start: a job that fails before its read frees its slot
  // again and may let the jobs waiting on it start.
  while (true) {
    const auto free =
        std::find_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.job < 0; });
    if (free == slots_.end()) return;
    const std::optional<int64_t> id = queue_.StartNext();
    if (!id) return;
    const size_t s = static_cast<size_t>(free - slots_.begin());
    const Job& job = queue_.job(*id);
    slots_[s].job = *id;
    slots_[s].read_bytes = 0;
    slots_[s].issued = std::chrono::steady_clock::now();
    try {
      store_.CheckRead(job.layer, job.expert, slots_[s].block, *job.destination);
    } catch (...) {
      FailLocked(s, std::current_exception());
      continue;
    }
    IssueLocked(s);
  }
}

void IoUringExpertReader::IssueLocked(size_t slot) {
  Slot& s = slots_[slot];
  const Job& job = queue_.job(s.job);
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {  // cannot happen: the ring has a submission entry per slot
    FailLocked(slot, std::make_exception_ptr(base::Error(
                         "io_uring reader: submission queue full (an offload runtime bug)")));
    return;
  }
  const int64_t block = store_.key().block_bytes();
  io_uring_prep_read(
      sqe, store_.data_fd(), s.block.data() + s.read_bytes,
      static_cast<unsigned>(block - s.read_bytes),
      static_cast<uint64_t>(store_.BlockOffset(job.layer, job.expert) + s.read_bytes));
  io_uring_sqe_set_data64(sqe, slot);
  if (const int status = io_uring_submit(ring_.get()); status < 0) {
    try {
      store_.ThrowReadError(job.layer, job.expert, -status);
    } catch (...) {
      FailLocked(slot, std::current_exception());
    }
    return;
  }
  ++in_flight_;
  issued_.notify_all();
}

void IoUringExpertReader::FailLocked(size_t slot, std::exception_ptr error) {
  FinishLocked(slots_[slot].job, std::move(error));
  slots_[slot].job = -1;
}

void IoUringExpertReader::Complete() {
  const int64_t block = store_.key().block_bytes();
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    issued_.wait(lock, [&] { return in_flight_ > 0 || stop_; });
    if (in_flight_ == 0) return;  // stopping, and every queued job has been read
    lock.unlock();
    io_uring_cqe* cqe = nullptr;
    int status;
    do {
      status = io_uring_wait_cqe(ring_.get(), &cqe);
    } while (status == -EINTR);
    if (status < 0) {
      // The ring itself failed: nothing more will complete, so every outstanding read fails.
      lock.lock();
      for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s].job < 0) continue;
        const Job& job = queue_.job(slots_[s].job);
        try {
          store_.ThrowReadError(job.layer, job.expert, -status);
        } catch (...) {
          FailLocked(s, std::current_exception());
        }
      }
      in_flight_ = 0;
      DispatchLocked();  // queued jobs try the ring again, or fail the same way
      continue;
    }
    const size_t slot = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
    const int result = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    Slot& s = slots_[slot];
    // The slot's job is fixed while its read is outstanding, so it is read without the mutex.
    const Job job = [&] {
      std::lock_guard<std::mutex> guard(mutex_);
      --in_flight_;
      return queue_.job(s.job);
    }();
    std::exception_ptr error;
    bool finished = true;
    try {
      if (result == -EINTR || result == -EAGAIN) {
        finished = false;
      } else if (result < 0) {
        store_.ThrowReadError(job.layer, job.expert, -result);
      } else if (result == 0) {
        store_.ThrowTruncated(job.layer, job.expert,
                              store_.BlockOffset(job.layer, job.expert) + s.read_bytes);
      } else {
        s.read_bytes += result;
        if (s.read_bytes < block) {
          finished = false;  // a short read: the rest is asked for again
        } else {
          const auto block_read_at = std::chrono::steady_clock::now();
          store_.Unpack(job.layer, job.expert, s.block, *job.destination);
          if (timeline_) {
            const int lane = ExecutionTimeline::kReaderLane + static_cast<int>(slot);
            const auto layer = static_cast<int32_t>(job.layer);
            const auto expert = static_cast<int32_t>(job.expert);
            timeline_->Add(ExecutionTimeline::Kind::kStorage, layer, expert, lane, s.issued,
                           block_read_at);
            timeline_->Add(ExecutionTimeline::Kind::kCopy, layer, expert, lane, block_read_at,
                           std::chrono::steady_clock::now());
          }
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (!finished) {
      IssueLocked(slot);
      DispatchLocked();  // the slot is free again if asking for the rest failed
      continue;
    }
    FinishLocked(s.job, error);
    s.job = -1;
    DispatchLocked();  // the freed slot takes the next job, and jobs waiting on this one may run
  }
}

}  // namespace moelab::executor::offload
