// on-demand: DeepSpeed-style offloading. Experts are fetched when a token needs them and stay in
// an expert cache that spans every layer; when it is full the least recently used expert goes.
// The cache starts filled with the most popular experts (calibration counts), most popular last
// to be evicted. Because layers are visited in a fixed cycle, a global LRU smaller than one
// token's working set (K experts x layers) evicts exactly what the next token needs: the
// pathology fMoE calls LRU "fighting the layer order".
#include <algorithm>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

class OnDemandPolicy : public OffloadPolicy {
 public:
  explicit OnDemandPolicy(const OffloadSetup& setup)
      : setup_(setup),
        slots_(setup.ExpertSlots(setup.num_layers, 0)),
        lru_(setup.num_moe_layers * setup.num_experts) {
    if (slots_ < 1) {
      throw base::Error("policy 'on-demand': accelerator memory (" +
                        report::FormatGigabytes(setup.accelerator_bytes, 2) +
                        ") leaves no room for a single expert of " +
                        report::FormatGigabytes(static_cast<double>(setup.expert_bytes), 2) +
                        " after the non-expert weights and KV cache; raise --accelerator-memory");
    }
    slots_ = std::min(slots_, setup.num_moe_layers * setup.num_experts);
  }

  std::string Name() const override { return "on-demand"; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override { return {}; }
  int64_t ExpertSlots() const override { return slots_; }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<model::ExpertId> placed =
        model::PlaceByPopularity(PopularityOrFlat(setup_), slots_);
    std::vector<ExpertRef> refs;
    // Least popular first into the LRU list, so the most popular end up most recent.
    for (auto it = placed.rbegin(); it != placed.rend(); ++it) {
      lru_.Touch(FlatIndex(setup_, it->layer, it->expert));
      refs.push_back({static_cast<int32_t>(it->layer), static_cast<int32_t>(it->expert)});
    }
    return refs;
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    const int64_t layer = demand.layer;
    auto demanded = [&](int64_t flat) {
      if (flat / setup_.num_experts != layer) return false;
      const int32_t expert = static_cast<int32_t>(flat % setup_.num_experts);
      return std::any_of(demand.experts.begin(), demand.experts.end(),
                         [&](const ExpertDemand& d) { return d.expert == expert; });
    };
    // Hits first, so a miss never evicts an expert this layer is about to use.
    hit_.assign(demand.experts.size(), 0);
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const int64_t flat = FlatIndex(setup_, layer, demand.experts[i].expert);
      if (lru_.Contains(flat)) {
        hit_[i] = 1;
        lru_.Touch(flat);
      }
    }
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const ExpertDemand& d = demand.experts[i];
      const int64_t flat = FlatIndex(setup_, layer, d.expert);
      ExpertDecision& decision = AddDecision(plan, d.expert, ExpertAction::kResident);
      if (!hit_[i]) {
        decision.action = ExpertAction::kFetch;
        decision.target = FetchTarget::kCache;
        if (lru_.size() >= slots_) {
          int64_t victim = lru_.LeastRecent(demanded);
          if (victim < 0) victim = lru_.LeastRecent();  // the layer needs more than the cache
          lru_.Remove(victim);
          decision.evict = RefOf(setup_, victim);
        }
        lru_.Touch(flat);
      }
    }
  }

 private:
  OffloadSetup setup_;
  int64_t slots_;
  LruList lru_;
  std::vector<char> hit_;
};

}  // namespace

std::unique_ptr<OffloadPolicy> MakeOnDemandPolicy(const PolicyOptions& /*options*/,
                                                  const OffloadSetup& setup) {
  return std::make_unique<OnDemandPolicy>(setup);
}

}  // namespace moelab::policies::impl
