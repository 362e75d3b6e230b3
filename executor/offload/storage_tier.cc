#include "executor/offload/storage_tier.h"

#include <chrono>

namespace moelab::executor::offload {

StorageTier::StorageTier(const ExecutorConfig& config, const ExpertStore& store, ReaderKind reader,
                         int reads_in_flight, ExecutionTimeline* timeline)
    : config_(config),
      store_(store),
      reader_(MakeExpertReader(reader, store, reads_in_flight, timeline)) {}

StorageTier::~StorageTier() { reader_.reset(); }

int32_t StorageTier::AddBuffer() {
  auto weights = std::make_unique<FfnWeights>();
  weights->Allocate(config_.hidden_size, config_.expert_intermediate_size, config_.expert_format);
  buffers_.push_back(std::move(weights));
  return static_cast<int32_t>(buffers_.size() - 1);
}

int64_t StorageTier::Submit(const Copy& copy) {
  ExpertReader::Job job;
  job.layer = copy.layer;
  job.expert = copy.expert;
  job.destination = buffers_[static_cast<size_t>(copy.buffer)].get();
  job.priority_class = copy.priority_class;
  job.priority = copy.priority;
  job.after = copy.after;
  return reader_->Submit(job);
}

void StorageTier::Wait(int64_t copy) {
  if (!reader_->Done(copy)) {
    const auto start = std::chrono::steady_clock::now();
    reader_->Wait(copy);
    stall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  reader_->Wait(copy);  // rethrows a failed read (checksum, I/O)
}

}  // namespace moelab::executor::offload
