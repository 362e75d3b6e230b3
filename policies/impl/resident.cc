// resident: every expert on the accelerator, the ideal every other policy is measured against.
// The memory limit is ignored on purpose; the engine reports whether the model actually fits.
#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

class ResidentPolicy : public OffloadPolicy {
 public:
  explicit ResidentPolicy(const OffloadSetup& setup) : setup_(setup) {}

  std::string Name() const override { return "resident"; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override { return {}; }
  int64_t ExpertSlots() const override { return setup_.num_moe_layers * setup_.num_experts; }
  bool IgnoresMemoryLimit() const override { return true; }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<ExpertRef> all;
    for (int64_t flat = 0; flat < ExpertSlots(); ++flat) all.push_back(RefOf(setup_, flat));
    return all;
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    for (const ExpertDemand& d : demand.experts) {
      AddDecision(plan, d.expert, ExpertAction::kResident);
    }
  }

 private:
  OffloadSetup setup_;
};

}  // namespace

std::unique_ptr<OffloadPolicy> MakeResidentPolicy(const PolicyOptions& /*options*/,
                                                  const OffloadSetup& setup) {
  return std::make_unique<ResidentPolicy>(setup);
}

}  // namespace moelab::policies::impl
