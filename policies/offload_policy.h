#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/fiddler.h"
#include "policies/policy_options.h"

namespace moelab::policies {

// Expert-offloading policies (formulas.md sections 2-4), shared by the simulator (sim/) and the
// executor's offload runtime so both make the very same decisions. A policy decides; an engine
// carries the decisions out and tells the policy what happened:
//
//   policy = MakeOffloadPolicy(name, options, setup)      (policies/registry.h)
//   engine loads policy->InitialPlacement() into its expert cache (at model load, untimed)
//   for every forward pass (iteration):
//     policy->BeginIteration(info, plan)        -> prefetches before the first layer
//     for every MoE layer, in order, once the layer's routing is known:
//       policy->PlanLayer(demand, plan)       -> per expert: run where, fetch or not, evict what;
//                                                prefetches for later layers; staged to discard
//       engine->OnTransferDone(expert) as copies land
//     policy->EndIteration()
//
// The interface knows nothing of time: no clock, no durations. The only numbers about speed a
// policy sees are the cost estimates in OffloadSetup (Fiddler's latency model, which the executor
// measures at start-up and the simulator takes from the roofline). Everything a policy returns is
// a deterministic function of its setup and the calls it received, in order.
//
// Memory: the accelerator holds an expert cache of `ExpertSlots()` experts plus
// `StagingBuffersUsed()` staging buffers of one expert each. Cache contents change only through the
// policy's decisions (fetch into the cache, evict, promote a staged expert); the engine refuses a
// plan that overfills the cache, evicts an expert that is not there or calls an absent expert
// resident (a policy bug, reported as moelab::Error).

// One routed expert: MoE layer (0 = the first MoE layer; dense layers have no experts) and index.
struct ExpertRef {
  int32_t layer = 0;
  int32_t expert = 0;
  bool operator==(const ExpertRef&) const = default;
};

enum class Device { kAccelerator, kCpu };
std::string ToString(Device device);

// What happens to one expert the layer's tokens were routed to.
enum class ExpertAction {
  kResident,  // its weights are on the accelerator (cache or staging, possibly still arriving): run
              // there
  kFetch,     // copy its weights host -> accelerator, then run there
  kCpu,       // run it on the CPU from host memory (activations cross the link both ways)
};
std::string ToString(ExpertAction action);

// Where fetched weights land.
enum class FetchTarget {
  kCache,      // an expert-cache slot: stays resident until evicted
  kTransient,  // a staging buffer, released as soon as the expert has run (Fiddler's copy+GPU)
  kStaged,     // a staging buffer, held until promoted into the cache or discarded (speculative)
};
std::string ToString(FetchTarget target);

// Setup: everything a policy may know before the first token. Capacities are computed by the
// engine from the hardware, the model and the run (weights, KV cache); see ExpertSlots().
struct OffloadSetup {
  int64_t num_layers = 0;          // transformer layers
  int64_t first_dense_layers = 0;  // leading dense layers (MoE layer m is layer m + this)
  int64_t num_moe_layers = 0;
  int64_t num_experts = 0;  // E per MoE layer
  int64_t top_k = 0;        // K
  int64_t expert_bytes = 0;

  // Accelerator memory, bytes. The expert cache gets what is left after the always-resident part
  // (embeddings, LM head), the dense part of each layer placed on the accelerator (attention,
  // norms, router, shared experts, dense FFN, its KV cache for the run) and the staging buffers.
  double accelerator_bytes = 0;
  double fixed_bytes = 0;                 // embeddings + LM head
  std::vector<double> dense_layer_bytes;  // [transformer layer]: weights + KV of its dense part
  // Experts that fit in the cache when the dense parts of the first `dense_layers_on_accelerator`
  // layers are on the accelerator and `staging_buffers` buffers are reserved; 0 when nothing is
  // left (never negative).
  int64_t ExpertSlots(int64_t dense_layers_on_accelerator, int64_t staging_buffers) const;
  // Bytes left for experts in that configuration (negative when even the dense parts overflow).
  double ExpertBudgetBytes(int64_t dense_layers_on_accelerator, int64_t staging_buffers) const;

  // Fiddler's latency model (cpu_lat(s), gpu_lat, trans_lat): measured by the executor, from the
  // roofline in the simulator.
  model::FiddlerLatencyModel latency;

  // Calibration: expert popularity [moe layer][expert] (token counts on calibration data; never
  // the run's own routing unless the engine says so) and past requests' expert maps for fMoE.
  model::PopularityTable popularity;
  struct ExpertMap {
    int64_t request = 0;               // which past request it came from
    std::vector<float> semantic;       // the request's prompt embedding (any fixed dimension)
    std::vector<float> probabilities;  // [moe layer][expert], row-major, each layer sums to 1
  };
  std::vector<ExpertMap> history;

  uint64_t seed = 0;

  void Validate() const;  // Error naming the field
};

// A forward pass. `requests` lists the requests whose tokens it carries (fMoE keys its maps on
// them); `semantic` is the mean prompt embedding of those requests (may be empty).
struct IterationInfo {
  int64_t index = 0;
  std::string kind;  // "prefill", "decode", "verify"
  int64_t tokens = 0;
  std::vector<int64_t> requests;
  std::vector<float> semantic;
};

// One activated expert of a layer: how many of the pass's tokens were routed to it.
struct ExpertDemand {
  int32_t expert = 0;
  int64_t tokens = 0;
};

// A layer's routing, handed to the policy once known.
struct LayerDemand {
  int32_t layer = 0;                      // MoE layer
  int64_t tokens = 0;                     // tokens in the pass
  std::span<const ExpertDemand> experts;  // activated experts, ascending index, tokens >= 1
  // The gate's probabilities at this layer, averaged over the pass's tokens (E values summing to
  // 1; fMoE's expert map row), or empty when the engine has none.
  std::span<const float> gate_probabilities;
  // The speculative gate: layer+1's router applied to this layer's input hidden states, summed
  // over tokens (Mixtral-offloading); E scores, or empty when the engine has none (last layer).
  std::span<const float> next_layer_scores;
};

struct ExpertDecision {
  int32_t expert = 0;
  ExpertAction action = ExpertAction::kResident;
  FetchTarget target = FetchTarget::kCache;  // kFetch: kCache or kTransient
  bool promote = false;                      // kResident from a staging buffer into the cache
  std::optional<ExpertRef> evict;            // kFetch to kCache / promote: the slot it takes
};

struct PrefetchRequest {
  ExpertRef expert;
  FetchTarget target = FetchTarget::kCache;  // kCache or kStaged
  std::optional<ExpertRef> evict;            // kCache: the slot it takes, when the cache is full
  double priority = 0;                       // higher first; demand copies always go before
  // Read with the demand reads' priority, not behind them: stream-all's unused experts, which
  // accelerate loads with the layer before it runs.
  bool urgent = false;
};

struct LayerPlan {
  std::vector<ExpertDecision> decisions;  // one per demanded expert, in the demand's order
  std::vector<PrefetchRequest> prefetches;
  std::vector<ExpertRef> discard_staged;  // staged experts to drop (buffers freed)
  void Clear() {
    decisions.clear();
    prefetches.clear();
    discard_staged.clear();
  }
};

// Counters a policy keeps about itself (reported next to the engine's).
struct PolicyStats {
  int64_t prefetches_issued = 0;
  int64_t searches = 0;  // fMoE map searches
  int64_t map_store_size = 0;
};

// What a policy needs the engine to compute for every layer (both cost the executor a router
// evaluation, so an engine may skip what no one reads; LayerDemand's spans are then empty).
struct PolicyNeeds {
  bool gate_probabilities = false;  // fMoE's expert maps
  bool next_layer_scores = false;   // the speculative gate (Mixtral-offloading)
};

class OffloadPolicy {
 public:
  virtual ~OffloadPolicy() = default;
  virtual std::string Name() const = 0;
  virtual PolicyNeeds Needs() const { return {}; }
  // The options it resolved (explicit or defaulted), for reports: {"cache_per_layer": 2, ...}.
  virtual std::vector<std::pair<std::string, double>> ResolvedOptions() const = 0;

  // Where transformer layer `layer`'s dense part (attention, router, norms, shared experts) runs.
  virtual Device DenseDevice(int64_t layer) const;
  // Staging buffers the policy uses (the engine reserves their memory).
  virtual int64_t StagingBuffersUsed() const { return 0; }
  // Cache capacity the policy works with (experts); the engine checks it fits.
  virtual int64_t ExpertSlots() const = 0;
  // true: the ideal that ignores memory limits (resident); the engine reports whether it fits.
  virtual bool IgnoresMemoryLimit() const { return false; }
  // Experts in the cache before the first token, in load order; at most ExpertSlots().
  virtual std::vector<ExpertRef> InitialPlacement() = 0;

  // A pass begins; a policy may ask for prefetches before any layer is routed (plan.prefetches
  // only; `plan` is cleared by the caller).
  virtual void BeginIteration(const IterationInfo& /*info*/, LayerPlan& /*plan*/) {}
  // Fills `plan` (cleared by the caller) for the layer's demand.
  virtual void PlanLayer(const LayerDemand& demand, LayerPlan& plan) = 0;
  // A copy the policy asked for has landed on the accelerator.
  virtual void OnTransferDone(ExpertRef /*expert*/) {}
  virtual void EndIteration() {}

  virtual PolicyStats Stats() const { return {}; }
};

}  // namespace moelab::policies
