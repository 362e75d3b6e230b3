// stream-all: naive offloading as Hugging Face accelerate does it (the "naive offloading" row of
// Mixtral-offloading's Table 2): every expert of every layer is loaded for every pass and nothing
// is kept. Used experts are read into a staging buffer, run and dropped (transient fetches); the
// layer's other experts are read too, as staged prefetches that are never used and are dropped
// when the next layer is planned. No expert cache: the layer's E experts need E staging buffers.
// The unused reads are urgent (demand priority, after the layer's own reads): accelerate moves the
// whole layer before it runs, so they hold up the next layer's reads, never the other way round.
#include <algorithm>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

class StreamAllPolicy : public OffloadPolicy {
 public:
  explicit StreamAllPolicy(const OffloadSetup& setup) : setup_(setup) {
    if (setup.ExpertBudgetBytes(setup.num_layers, setup.num_experts) < 0) {
      throw base::Error(
          "policy 'stream-all': memory (" + report::FormatGigabytes(setup.accelerator_bytes, 2) +
          ") does not hold one layer's " + std::to_string(setup.num_experts) + " experts of " +
          report::FormatGigabytes(static_cast<double>(setup.expert_bytes), 2) +
          " after the non-expert weights; raise the memory");
    }
  }

  std::string Name() const override { return "stream-all"; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override { return {}; }
  int64_t StagingBuffersUsed() const override { return setup_.num_experts; }
  int64_t ExpertSlots() const override { return 0; }
  std::vector<ExpertRef> InitialPlacement() override { return {}; }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    plan.discard_staged = std::move(staged_);
    staged_.clear();
    for (const ExpertDemand& d : demand.experts) {
      AddDecision(plan, d.expert, ExpertAction::kFetch).target = FetchTarget::kTransient;
    }
    for (int32_t expert = 0; expert < setup_.num_experts; ++expert) {
      const bool used = std::any_of(demand.experts.begin(), demand.experts.end(),
                                    [&](const ExpertDemand& d) { return d.expert == expert; });
      if (used) continue;
      staged_.push_back({demand.layer, expert});
      plan.prefetches.push_back(
          {{demand.layer, expert}, FetchTarget::kStaged, std::nullopt, 0.0, true});
    }
  }

 private:
  OffloadSetup setup_;
  std::vector<ExpertRef> staged_;  // the previous layer's unused experts
};

}  // namespace

std::unique_ptr<OffloadPolicy> MakeStreamAllPolicy(const PolicyOptions& /*options*/,
                                                   const OffloadSetup& setup) {
  return std::make_unique<StreamAllPolicy>(setup);
}

}  // namespace moelab::policies::impl
