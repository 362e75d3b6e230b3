#include "executor/offload/reader_pass.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/weight_matrix.h"

namespace moelab::executor::offload {

double ReaderPassSeconds(const ExpertStore& store, ReaderKind kind, int reads_in_flight,
                         const std::function<void()>& compute_step) {
  if (reads_in_flight < 1)
    throw base::Error("reader pass: reads in flight must be at least 1, got " +
                      std::to_string(reads_in_flight));
  const ExpertStoreKey& key = store.key();
  const int64_t experts = key.experts;
  const int64_t blocks = key.moe_layers * experts;
  const int64_t destinations = 2 * static_cast<int64_t>(reads_in_flight);
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;
  bool known = false;
  for (const kernels::WeightFormat f :
       {kernels::WeightFormat::kBf16, kernels::WeightFormat::kQ8_0, kernels::WeightFormat::kQ4_0}) {
    if (kernels::ToString(f) == key.format) {
      format = f;
      known = true;
    }
  }
  if (!known)
    throw base::Error("reader pass: the store's expert format '" + key.format + "' is unknown");
  std::vector<FfnWeights> into(static_cast<size_t>(destinations));
  for (FfnWeights& expert : into) expert.Allocate(key.hidden, key.intermediate, format);
  // Stopped and joined when the pass ends, also when a read throws. The pass starts once the
  // computation has: on a loaded machine a short pass could otherwise end before the thread ran.
  std::jthread computing;
  std::atomic_flag computing_started;
  if (compute_step) {
    computing = std::jthread([&](std::stop_token stop) {
      computing_started.test_and_set();
      computing_started.notify_one();
      do {
        compute_step();
      } while (!stop.stop_requested());
    });
    computing_started.wait(false);
  }
  const auto start = std::chrono::steady_clock::now();
  {
    const std::unique_ptr<ExpertReader> reader =
        MakeExpertReader(kind, store, reads_in_flight, nullptr);
    std::vector<int64_t> ids;
    ids.reserve(static_cast<size_t>(blocks));
    for (int64_t i = 0; i < blocks; ++i) {
      ExpertReader::Job job;
      job.layer = i / experts;
      job.expert = i % experts;
      job.destination = &into[static_cast<size_t>(i % destinations)];
      job.after = i >= destinations ? ids[static_cast<size_t>(i - destinations)] : -1;
      ids.push_back(reader->Submit(job));
    }
    for (const int64_t id : ids) reader->Wait(id);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace moelab::executor::offload
