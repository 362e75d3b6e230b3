#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "executor/expert_provider.h"
#include "executor/offload/expert_reader.h"
#include "executor/offload/expert_store.h"
#include "executor/offload/expert_tier.h"
#include "policies/decision_log.h"
#include "policies/gate_signals.h"
#include "policies/offload_policy.h"
#include "policies/plan_checker.h"

namespace moelab::executor::offload {

// The executor's offload runtime on a CPU-only machine: routed experts live in the expert store
// (storage, the slow tier) and a RAM expert cache of `expert_memory_bytes` (the fast tier) holds
// what the policy keeps, plus its staging buffers, all inside that budget. Every decision (hit,
// miss, eviction, prefetch, discard) is made by the same policy objects the simulator uses
// (policies/registry.h), checked and applied by the same PlanChecker; the runtime carries them out
// with asynchronous reads (ExpertReader: demand reads before prefetches) while the compute
// threads run what has landed.
//
// The tier boundary is device-neutral: in policy terms the RAM cache is "the accelerator" and
// storage is "the host". A policy's kCpu decision (run an expert from its home copy: static-split's
// layers that do not fit) reads the expert from storage into a transient buffer and runs it (as
// llama.cpp does with an mmapped model that does not fit in RAM). fiddler needs a second compute
// device and is refused.
struct OffloadOptions {
  std::string policy = "lru-prefetch";
  policies::PolicyOptions policy_options;
  int64_t expert_memory_bytes = 0;           // the RAM cache and staging buffers
  std::filesystem::path offload_dir;         // empty: DefaultOffloadDir()
  int reader_threads = 2;                    // asynchronous reads in flight (--offload-readers)
  ReaderKind reader = ReaderKind::kThreads;  // how they are issued (--offload-reader)
  // What the policies may know before the first token (OffloadSetup): calibration popularity
  // [moe layer][expert] (empty: flat) and fMoE's expert maps; CalibrateOn fills them (moelab run
  // --offload-calibration), none without it.
  model::PopularityTable popularity;
  std::vector<policies::OffloadSetup::ExpertMap> history;
  int64_t semantic_dim = 16;  // fMoE's seeded per-request embeddings
  uint64_t seed = 0;
  bool record_decisions = false;  // keep every decision (OffloadStats::decisions)
  // --timeline-out: the compute thread's waits for reads and the storage tier's reads go here.
  ExecutionTimeline* timeline = nullptr;
  // Fiddler's latency model (cpu_lat(s), gpu_lat, trans_lat), measured by the engine at start-up
  // where the tier has a second compute device (the GPU backend); fiddler needs it.
  std::optional<model::FiddlerLatencyModel> fiddler_latency;

  void Validate() const;  // Error naming the flag
  // Calibrates the policies on the routing `spec` names (a --routing value, e.g. trace:FILE) for a
  // model of this shape: policies::CalibrateRouting with its default options and `seed`, the very
  // sample sim offload calibrates on for the same routing and seed. Errors are CalibrateRouting's.
  void CalibrateOn(const std::string& spec, int64_t num_layers, int64_t num_experts, int64_t top_k,
                   uint64_t seed);
};

struct OffloadStats {
  std::string policy;
  std::vector<std::pair<std::string, double>> policy_options;
  std::string store_path;
  bool store_reused = false;
  double store_build_s = 0;
  bool direct_io = true;
  std::string reader;       // the storage tier's expert reader ("threads", "io_uring"); else empty
  int reads_in_flight = 0;  // its reads outstanding at most
  std::string warning;
  int64_t expert_bytes = 0;  // stored bytes per expert (the block is padded to 4096)
  int64_t expert_slots = 0, staging_buffers = 0, buffers_allocated = 0;
  int64_t passes = 0;
  int64_t activations = 0, hits = 0, inflight_hits = 0, demand_fetches = 0, transient_fetches = 0,
          storage_runs = 0;
  int64_t prefetches = 0, prefetches_used = 0, prefetches_wasted = 0;
  int64_t reads = 0, initial_reads = 0;
  double bytes_read_storage = 0;  // during the run (initial placement excluded)
  double stall_s = 0;             // compute waiting for reads
  // Seconds during which at least one copy from the slow tier was in flight and the copies that
  // finished, initial placement included, where the tier measures them (storage): the finished
  // copies' blocks over the busy time is the bandwidth the run's reads got (copy_bytes_per_s; a
  // prefetch still landing when the stats are taken counts in neither).
  std::optional<double> copy_busy_s;
  int64_t copies_done = 0;
  // The run's reads (the initial placement's left out): queued, running and wake-up seconds
  // (ExpertReader::Spans); where the tier times its reads.
  std::optional<ExpertReader::Spans> read_spans;
  double copy_block_bytes = 0;  // bytes one copy moves (a storage block, padding included)
  std::optional<double> copy_bytes_per_s() const;
  std::vector<int64_t> layer_hits, layer_activations;  // [moe layer]
  // The speculative gate: of the experts layer l+1 used, how many were among the same number of
  // top-scored experts predicted from layer l.
  int64_t speculative_used = 0, speculative_predicted = 0;
  std::vector<policies::DecisionEvent> decisions;
  std::optional<model::FiddlerLatencyModel> fiddler_latency;  // as measured, when fiddler ran
  // What the gate showed the policy, for replay in the simulator (when record_decisions).
  policies::GateSignals signals;

  double hit_rate() const {
    return activations > 0 ? static_cast<double>(hits + inflight_hits) / activations : 0;
  }
  nlohmann::json ToJson() const;
};

class OffloadRuntime : public ExpertProvider {
 public:
  // Builds the policy for `config` and `options`, checks the memory, and loads its initial
  // placement from `store` (untimed). Errors name the flag: a cache smaller than one layer's top-k
  // experts, a policy that needs a second compute device, a policy's own refusals.
  OffloadRuntime(const ExecutorConfig& config, const ExpertStore& store,
                 const OffloadOptions& options);
  // Between any two tiers (storage -> RAM above; host -> GPU in executor/gpu/).
  OffloadRuntime(const ExecutorConfig& config, std::unique_ptr<ExpertTier> tier,
                 const OffloadOptions& options);
  ~OffloadRuntime() override;

  policies::PolicyNeeds Needs() const override { return needs_; }
  void BeginPass(const std::string& kind, int64_t tokens, int64_t sequences) override;
  void PlanLayer(const policies::LayerDemand& demand, std::vector<int32_t>& run_order) override;
  const FfnWeights& Acquire(int32_t moe_layer, int32_t expert) override;
  void Release(int32_t moe_layer, int32_t expert) override;
  void EndPass() override;

  // The fast-tier buffer `expert` of the current layer runs from, once its copy is waited for
  // (Acquire is this plus the tier's host weights).
  int32_t AcquireBuffer(int32_t moe_layer, int32_t expert);
  // Whether the current layer's plan runs `expert` on the host compute device from the slow
  // tier's copy (a kCpu decision where the tier has host compute): it is never acquired.
  bool RunsOnHost(int32_t expert) const { return runs_on_host_[static_cast<size_t>(expert)] != 0; }
  ExpertTier& tier() { return *tier_; }

  // Counters so far (reads and bytes from the reader).
  OffloadStats Stats() const;
  OffloadStats& mutable_stats() { return stats_; }

 private:
  // The constructor's steps (after PlanOffload): the stats' fixed fields, the cache's buffers
  // allocated before the first token, and the policy's initial placement loaded (untimed).
  void InitStats(int64_t slots, int64_t staging);
  void PreallocateBuffers(int64_t cache_buffers);
  void LoadInitialPlacement();

  struct Slot {
    int32_t buffer = -1;     // index into buffers_, or -1 when not in RAM
    int64_t job = -1;        // the read that fills it
    bool transient = false;  // dropped after its computation
  };
  size_t Flat(int64_t layer, int64_t expert) const {
    return static_cast<size_t>(layer * experts_ + expert);
  }
  int32_t TakeBuffer();
  void FreeBuffer(int32_t buffer);
  void Load(policies::ExpertRef ref, int priority_class, double priority, bool transient);
  void Drop(
      policies::ExpertRef ref);  // its buffer freed once no computation of this layer needs it
  void ApplyPrefetches(const policies::LayerPlan& plan);
  void CountSpeculative(const policies::LayerDemand& demand);

  ExecutorConfig config_;
  std::unique_ptr<ExpertTier> tier_;
  OffloadOptions options_;
  int64_t experts_ = 0, moe_layers_ = 0;
  std::unique_ptr<policies::OffloadPolicy> policy_;
  policies::PolicyNeeds needs_;
  std::optional<policies::PlanChecker> checker_;
  std::vector<int64_t> buffer_job_;  // [buffer]: the last read into it
  std::vector<int32_t> free_buffers_;
  std::vector<Slot> slots_;   // [flat expert]
  std::vector<char> in_use_;  // [buffer]: a computation of the current layer needs it
  std::vector<int32_t> deferred_free_;
  static constexpr int32_t kPending = -2;  // Slot::buffer of a read waiting for a buffer
  struct PendingLoad {
    policies::ExpertRef ref;
    int priority_class = 0;
    double priority = 0;
    bool transient = false;
  };
  std::vector<PendingLoad> pending_;
  int32_t current_layer_ = -1;
  std::vector<int32_t> layer_buffer_;  // [expert]: the buffer it runs from in the current layer
  std::vector<int64_t> layer_job_;     // [expert]: the read it waits for
  std::vector<char> runs_on_host_;     // [expert]: kCpu on the tier's host compute device
  policies::LayerPlan plan_;
  std::vector<float> previous_next_scores_;
  int64_t pass_ = 0;
  int64_t reads_issued_ = 0;
  ExpertReader::Spans initial_spans_;  // the initial placement's reads, left out of Stats()
  OffloadStats stats_;
};

// Every check that can refuse an offloaded run, before anything is built or written: the options,
// the model (MoE), the device (fiddler needs host compute beside the cache), and the expert memory
// against one layer's top-k and against the policy's cache and staging buffers of `expert_bytes`
// each. Returns the policy it built for the check; errors name the user's flags (--expert-memory,
// not the simulator's --accelerator-memory). The runtime's constructor runs it too; run calls it
// before the expert store is written, so a refused budget never costs a store build.
std::unique_ptr<policies::OffloadPolicy> PlanOffload(const ExecutorConfig& config,
                                                     const OffloadOptions& options,
                                                     int64_t expert_bytes, bool has_host_compute);

// The store for `config` in `dir` from `weights_source`: opened when its manifest matches,
// otherwise built by calling `write_experts(writer)` (which must Add every expert in order) and
// committed. Errors name the folder (unwritable, disk full).
struct PreparedStore {
  std::unique_ptr<ExpertStore> store;
  bool reused = false;
  double build_s = 0;
};
PreparedStore PrepareExpertStore(const ExecutorConfig& config, const std::string& weights_source,
                                 const std::filesystem::path& dir,
                                 const std::function<void(ExpertStoreWriter&)>& write_experts);

}  // namespace moelab::executor::offload
