// fiddler: Fiddler's CPU-GPU orchestration (formulas.md section 2, model/fiddler.h).
//  - Placement: non-expert weights on the accelerator; the remaining memory filled with the most
//    popular experts by calibration counts (PlaceByPopularity). The placement never changes.
//  - Per layer, per activated expert with s tokens, Algorithm 1 (FiddlerDecide) with the latency
//    model of the setup: placed -> run on the accelerator; else copy the weights and run on the
//    accelerator when cpu_lat(s) > gpu_lat + trans_lat; else run on the CPU.
//  - Copied weights go to a staging buffer and are dropped once the expert has run
//    (--staging-buffers, default 1: Fiddler's expert loop copies and runs one expert at a time).
#include <algorithm>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

constexpr PolicyOptionSpec kStagingBuffersOption{
    "staging-buffers",
    1,
    "",
    1,
    OptionMaximum::kNone,
    "device staging buffers for copied experts (2 double-buffers)"};

class FiddlerPolicy : public OffloadPolicy {
 public:
  FiddlerPolicy(const PolicyOptions& options, const OffloadSetup& setup)
      : setup_(setup),
        staging_(*kStagingBuffersOption.Resolve(options, setup)),
        on_accelerator_(static_cast<size_t>(setup.num_moe_layers * setup.num_experts), 0) {
    const double budget = setup.ExpertBudgetBytes(setup.num_layers, staging_);
    if (budget < 0) {
      throw base::Error("policy 'fiddler': the non-expert weights, KV cache and " +
                        std::to_string(staging_) + " staging buffer(s) need " +
                        report::FormatGigabytes(setup.accelerator_bytes - budget, 2) +
                        " of accelerator memory, the accelerator has " +
                        report::FormatGigabytes(setup.accelerator_bytes, 2));
    }
    slots_ = std::min(setup.ExpertSlots(setup.num_layers, staging_),
                      setup.num_moe_layers * setup.num_experts);
  }

  std::string Name() const override { return "fiddler"; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override {
    return {
        {"staging_buffers", static_cast<double>(staging_)},
        {"crossover_tokens", static_cast<double>(model::FiddlerCrossoverTokens(setup_.latency))}};
  }
  int64_t StagingBuffersUsed() const override { return staging_; }
  int64_t ExpertSlots() const override { return slots_; }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<ExpertRef> placed;
    for (const model::ExpertId& id : model::PlaceByPopularity(PopularityOrFlat(setup_), slots_)) {
      on_accelerator_[static_cast<size_t>(FlatIndex(setup_, id.layer, id.expert))] = 1;
      placed.push_back({static_cast<int32_t>(id.layer), static_cast<int32_t>(id.expert)});
    }
    return placed;
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    for (const ExpertDemand& d : demand.experts) {
      const bool placed =
          on_accelerator_[static_cast<size_t>(FlatIndex(setup_, demand.layer, d.expert))];
      ExpertDecision& decision = AddDecision(plan, d.expert, ExpertAction::kResident);
      switch (model::FiddlerDecide(setup_.latency, d.tokens, placed)) {
        case model::ExpertExecution::kSkip:  // tokens >= 1 for every demanded expert
        case model::ExpertExecution::kGpuResident:
          break;
        case model::ExpertExecution::kCopyWeightsThenGpu:
          decision.action = ExpertAction::kFetch;
          decision.target = FetchTarget::kTransient;
          break;
        case model::ExpertExecution::kCpu:
          decision.action = ExpertAction::kCpu;
          break;
      }
    }
  }

 private:
  OffloadSetup setup_;
  int64_t staging_;
  int64_t slots_ = 0;
  std::vector<char> on_accelerator_;  // [flat expert]
};

}  // namespace

std::vector<PolicyOptionSpec> FiddlerOptions() { return {kStagingBuffersOption}; }

std::unique_ptr<OffloadPolicy> MakeFiddlerPolicy(const PolicyOptions& options,
                                                 const OffloadSetup& setup) {
  return std::make_unique<FiddlerPolicy>(options, setup);
}

}  // namespace moelab::policies::impl
