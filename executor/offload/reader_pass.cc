#include "executor/offload/reader_pass.h"

#include <algorithm>
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
  return TimeReaderPass(store, kind, reads_in_flight, compute_step).seconds;
}

ReaderPassTiming TimeReaderPass(const ExpertStore& store, ReaderKind kind, int reads_in_flight,
                                const std::function<void()>& compute_step) {
  using Clock = std::chrono::steady_clock;
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
  // Declared before the thread, so that they outlive it when a read throws.
  std::atomic_flag computing_started;
  std::vector<Clock::time_point> step_ends;  // written by the computing thread until it is joined
  step_ends.reserve(4096);
  std::jthread computing;
  if (compute_step) {
    computing = std::jthread([&](std::stop_token stop) {
      computing_started.test_and_set();
      computing_started.notify_one();
      do {
        compute_step();
        step_ends.push_back(Clock::now());
      } while (!stop.stop_requested());
    });
    computing_started.wait(false);
  }
  const Clock::time_point start = Clock::now();
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
  const Clock::time_point end = Clock::now();
  ReaderPassTiming timing;
  timing.seconds = std::chrono::duration<double>(end - start).count();
  if (!compute_step) return timing;
  computing.request_stop();
  computing.join();
  const auto first = std::lower_bound(step_ends.begin(), step_ends.end(), start);
  const auto last = std::upper_bound(first, step_ends.end(), end);
  if (last - first < 2) return timing;
  timing.compute_steps = last - first - 1;
  const double beside_s = std::chrono::duration<double>(*(last - 1) - *first).count();
  const Clock::time_point alone_start = Clock::now();
  for (int64_t i = 0; i < timing.compute_steps; ++i) compute_step();
  const double alone_s = std::chrono::duration<double>(Clock::now() - alone_start).count();
  timing.compute_rate = alone_s / beside_s;
  return timing;
}

}  // namespace moelab::executor::offload
