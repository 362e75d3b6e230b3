// expert_reader: the executor's offload reader (executor/offload/reader_pass.h) over one pass of
// a store of the model's experts, alone and while the compute threads run the model's LM head
// matrix-vector product back to back. On a CPU-only machine this is the rate the storage tier
// delivers to a run: the reads in flight share the disk, and each read's checksum and copy share
// the cores and the memory bus with the computation (validate measured the reader at 0.66-0.78x a
// plain loop of reads, and beside computation 0.82-0.91x what it read alone). A sample is the
// pass's seconds per expert (pass / experts), so bytes / median_s is the bandwidth. The beside
// sample also has `compute_rate`: the computation's rate during the passes as a fraction of the
// same steps alone (executor/offload/reader_pass.h), what the reads take from the cores.
//
// The store holds the model's routed experts, at most GridSpec::expert_reader_store_bytes of them
// (and at least 2 x the reads in flight), each block of varied bytes, written into a fresh folder
// in the storage folder, opened (O_DIRECT, as the executor opens it) and removed at once: the
// open descriptor keeps the data, so nothing is left behind once the store is open.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>

#include "base/error.h"
#include "base/stats.h"
#include "executor/offload/expert_store.h"
#include "executor/offload/offload_runtime.h"
#include "executor/offload/reader_pass.h"
#include "kernels/matmul.h"
#include "profiler/impl/benches.h"
#include "profiler/run_collector.h"

namespace moelab::profiler::impl {
namespace {

namespace offload = executor::offload;

// Untimed passes a repetition adds, at most, when none of its timed passes measured the
// computation's rate.
constexpr int kRatePassesAtMost = 32;

// Removes a folder and everything in it on scope exit (the store's files once it is open, or a
// half-written store when writing fails).
struct FolderRemover {
  std::filesystem::path dir;
  ~FolderRemover() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

// Fills `bytes` from a 64-bit linear congruential generator continuing from `state`, so no two
// blocks are alike and nothing below can compress or deduplicate them.
void FillVaried(std::span<std::byte> bytes, uint64_t& state) {
  for (std::byte& b : bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::byte>(state >> 56);
  }
}

class ExpertReaderBench : public OperatorBench {
 public:
  ExpertReaderBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : pool_(*env.pool) {
    const executor::ExecutorConfig& target = *env.target;
    for (const GridPoint& p : points) {
      if (p.bytes != ExpertBytes(target))
        throw base::Error("expert_reader: a point's bytes (" + std::to_string(p.bytes) +
                          ") are not the model's expert bytes (a bug)");
    }
    const offload::OffloadOptions options;
    kind_ = options.reader;
    reads_in_flight_ = options.reader_threads;
    offload::ExpertStoreKey key =
        offload::ExpertStoreKeyFor(target, "profiler scratch (varied bytes)");
    const int64_t routed = key.moe_layers * key.experts;
    const int64_t fit = env.spec->expert_reader_store_bytes / key.block_bytes();
    const int64_t experts = std::min(routed, std::max<int64_t>(fit, 2 * reads_in_flight_));
    key.model += "-profile";
    key.moe_layers = 1;
    key.experts = experts;

    const std::filesystem::path parent =
        env.storage_dir.empty() ? std::filesystem::temp_directory_path() : env.storage_dir;
    std::error_code error;
    if (!std::filesystem::is_directory(parent, error)) {
      throw base::Error("expert_reader: the storage folder " + parent.string() +
                        " does not exist or is not a folder");
    }
    static std::atomic<int> counter{0};
    FolderRemover folder{parent / (".moelab-profile-experts-" + std::to_string(getpid()) + "-" +
                                   std::to_string(counter++))};
    if (!std::filesystem::create_directory(folder.dir, error)) {
      throw base::Error("expert_reader: cannot create " + folder.dir.string() + ": " +
                        (error ? error.message() : std::string("it exists")));
    }
    {
      executor::FfnWeights expert;
      expert.Allocate(target.hidden_size, target.expert_intermediate_size, target.expert_format);
      offload::ExpertStoreWriter writer(folder.dir, key);
      uint64_t state = env.seed * 0x9E3779B97F4A7C15ull + 1;
      for (int64_t e = 0; e < experts; ++e) {
        FillVaried(expert.gate_up.MutableStorage(), state);
        FillVaried(expert.down.MutableStorage(), state);
        writer.Add(0, e, expert);
      }
      writer.Commit();
    }
    store_ = offload::ExpertStore::Open(folder.dir, key);
    if (!store_)
      throw base::Error("expert_reader: the store just written in " + folder.dir.string() +
                        " does not open (a bug)");
    experts_ = experts;

    // The computation beside the reads: the LM head's matrix-vector product (decode's largest
    // operator), as validate's reader probe runs it. Zero weights take the kernels' time.
    RequireMemory(2.0 * static_cast<double>(target.vocab_size * target.hidden_size),
                  "expert_reader's LM head");
    head_ = kernels::PackedBf16Matrix(target.vocab_size, target.hidden_size);
    x_.assign(static_cast<size_t>(target.hidden_size), 0.5f);
    y_.assign(static_cast<size_t>(target.vocab_size), 0.0f);

    const std::string where = parent.string();
    notes_.push_back(
        "expert_reader cpu: the executor's reader (" + offload::ToString(kind_) + ", " +
        std::to_string(reads_in_flight_) + " reads in flight) over one pass of a store of " +
        std::to_string(experts) + " of the model's " + std::to_string(routed) +
        " routed experts (" + std::to_string(key.block_bytes()) + "-byte blocks) in " + where +
        ", every read queued at once; a sample is the pass's seconds per expert. "
        "beside_compute: while the LM head's matrix-vector product (" +
        std::to_string(target.vocab_size) + " x " + std::to_string(target.hidden_size) +
        ") runs back to back on the compute threads");
    if (!store_->direct_io()) {
      notes_.push_back("expert_reader cpu: " + store_->warning() +
                       " -- these samples measure the page cache, not the disk");
    }
  }

  bool manual_time() const override { return true; }
  double time_scale() const override { return 1.0 / static_cast<double>(experts_); }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      std::function<void()> compute_step;
      if (point.beside_compute) {
        compute_step = [this] {
          kernels::MatmulBf16(x_.data(), 1, head_, y_.data(), head_.rows(), pool_);
        };
      }
      std::vector<double> compute_rates;
      for (auto _ : state) {
        const offload::ReaderPassTiming timing =
            offload::TimeReaderPass(*store_, kind_, reads_in_flight_, compute_step);
        state.SetIterationTime(timing.seconds);
        if (timing.compute_rate > 0) compute_rates.push_back(timing.compute_rate);
      }
      // Every timed pass ended before two of the computation's steps did: its thread got no
      // core during them (a short pass on a loaded machine). More passes, untimed, for the rate.
      for (int pass = 0; compute_step && compute_rates.empty() && pass < kRatePassesAtMost;
           ++pass) {
        const double rate =
            offload::TimeReaderPass(*store_, kind_, reads_in_flight_, compute_step).compute_rate;
        if (rate > 0) compute_rates.push_back(rate);
      }
      // The repetition's median pass; the profile's sample takes the median over the
      // repetitions of every round (a family's bench is built afresh each round).
      if (!compute_rates.empty()) state.counters["compute_rate"] = base::Median(compute_rates);
    });
  }

  void Annotate(const GridPoint& /*point*/, nlohmann::json& sample) const override {
    sample["direct_io"] = store_->direct_io();
    sample["store_experts"] = experts_;
  }

 private:
  kernels::ThreadPool& pool_;
  offload::ReaderKind kind_ = offload::ReaderKind::kThreads;
  int reads_in_flight_ = 1;
  int64_t experts_ = 1;
  std::unique_ptr<offload::ExpertStore> store_;
  kernels::PackedBf16Matrix head_;
  std::vector<float> x_, y_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeExpertReaderBench(const std::vector<GridPoint>& points,
                                                     const BenchEnvironment& env) {
  return std::make_unique<ExpertReaderBench>(points, env);
}

}  // namespace moelab::profiler::impl
