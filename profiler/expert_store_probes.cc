#include "profiler/expert_store_probes.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/offload/offload_runtime.h"
#include "executor/offload/reader_pass.h"
#include "kernels/matmul.h"

namespace moelab::profiler {
namespace {

// `threads` threads read the store's experts in turn, pass after pass, each through its own
// `read(layer, expert)` (from `make_read`, called once per thread), until at least `min_reads`
// were taken and `seconds` have passed: experts read / wall time, times `bytes_per_read`. The
// first error stops every thread and is rethrown (it names the file and the expert).
double ProbeReads(const executor::offload::ExpertStore& store, int threads, int64_t min_reads,
                  double seconds, double bytes_per_read,
                  const std::function<std::function<void(int64_t, int64_t)>()>& make_read) {
  const int64_t experts = store.key().experts;
  const int64_t blocks = store.key().moe_layers * experts;
  std::atomic<int64_t> next{0}, read{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::function<void(int64_t, int64_t)>> reads;
  for (int t = 0; t < threads; ++t) reads.push_back(make_read());
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      try {
        for (int64_t i = next++; !failed && (i < min_reads || elapsed() < seconds); i = next++) {
          const int64_t at = i % blocks;
          reads[static_cast<size_t>(t)](at / experts, at % experts);
          ++read;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  const double wall_s = elapsed();
  if (error) std::rethrow_exception(error);
  return static_cast<double>(read.load()) * bytes_per_read / wall_s;
}

}  // namespace

double ProbeStorageReadBandwidth(const executor::offload::ExpertStore& store,
                                 const executor::ExecutorConfig& config, int readers) {
  // At least one pass, then until kStoreReadProbeSeconds have passed.
  return ProbeReads(
      store, readers, store.key().moe_layers * store.key().experts, kStoreReadProbeSeconds,
      static_cast<double>(store.key().payload_bytes()), [&] {
        auto buffer = std::make_shared<executor::offload::AlignedBuffer>(store.key().block_bytes());
        auto expert = std::make_shared<executor::FfnWeights>();
        expert->Allocate(config.hidden_size, config.expert_intermediate_size, config.expert_format);
        return [&store, buffer, expert](int64_t layer, int64_t e) {
          store.Read(layer, e, *buffer, *expert);
        };
      });
}

double ProbeBarePreads(const executor::offload::ExpertStore& store, int in_flight) {
  return ProbeReads(
      store, in_flight, 0, kBarePreadSeconds, static_cast<double>(store.key().block_bytes()), [&] {
        auto buffer = std::make_shared<executor::offload::AlignedBuffer>(store.key().block_bytes());
        return [&store, buffer](int64_t layer, int64_t expert) {
          store.ReadBlock(layer, expert, *buffer);
        };
      });
}

ReaderProbe ProbeReaderPass(const executor::offload::ExpertStore& store,
                            const executor::ModelWeights& weights, kernels::ThreadPool& pool,
                            bool beside_compute) {
  const executor::offload::OffloadOptions options;
  const kernels::PackedBf16Matrix& head = weights.lm_head;
  std::vector<float> x(static_cast<size_t>(head.cols()), 0.5f), y(static_cast<size_t>(head.rows()));
  std::function<void()> compute_step;
  if (beside_compute)
    compute_step = [&] { kernels::MatmulBf16(x.data(), 1, head, y.data(), head.rows(), pool); };
  const executor::offload::ReaderPassTiming timing = executor::offload::TimeReaderPass(
      store, options.reader, options.reader_threads, compute_step);
  const int64_t blocks = store.key().moe_layers * store.key().experts;
  return {static_cast<double>(blocks) * static_cast<double>(store.key().payload_bytes()) /
              timing.seconds,
          timing.compute_rate};
}

}  // namespace moelab::profiler
