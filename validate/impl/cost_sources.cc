#include "validate/impl/cost_sources.h"

#include <utility>

#include "fit/cost_source_options.h"
#include "validate/validation_metrics.h"

namespace moelab::validate::impl {
namespace {

// Another source's prices under another name: the same curves judged as a source of their own.
class RenamedCostSource : public model::CostSource {
 public:
  RenamedCostSource(std::shared_ptr<const model::CostSource> priced, std::string name,
                    nlohmann::json details)
      : priced_(std::move(priced)), name_(std::move(name)), details_(std::move(details)) {}

  std::string name() const override { return name_; }
  std::string device() const override { return priced_->device(); }
  std::string compute_dtype() const override { return priced_->compute_dtype(); }
  model::ForwardCost Forward(const model::MoeModelSpec& model,
                             const model::ForwardShape& shape) const override {
    return priced_->Forward(model, shape);
  }
  double ExpertSeconds(const model::MoeModelSpec& model, int64_t tokens,
                       double working_set_bytes) const override {
    return priced_->ExpertSeconds(model, tokens, working_set_bytes);
  }
  double RejectSeconds(const model::MoeModelSpec& target, int64_t batch,
                       int64_t gamma) const override {
    return priced_->RejectSeconds(target, batch, gamma);
  }
  model::MemoryFootprint Memory(const model::MoeModelSpec& model, double kv_tokens) const override {
    return priced_->Memory(model, kv_tokens);
  }
  nlohmann::json Describe() const override {
    nlohmann::json described = priced_->Describe();
    described.merge_patch(details_);
    described["cost_source"] = name_;
    return described;
  }

 private:
  std::shared_ptr<const model::CostSource> priced_;
  std::string name_;
  nlohmann::json details_;
};

}  // namespace

std::shared_ptr<const model::CostSource> FittedCostSource(const fit::LatencyFit& fit,
                                                          const model::MoeModelSpec& target,
                                                          const std::string& device) {
  return fit::CostSources::FittedSource(fit, target, device);
}

std::shared_ptr<const model::CostSource> CalibratedCostSource(const fit::Profile& profile) {
  return fit::CostSources::ProfiledMachineRoofline(profile);
}

std::shared_ptr<const model::CostSource> ReusedProfileCostSource(const fit::LatencyFit& fit,
                                                                 const model::MoeModelSpec& target,
                                                                 const std::string& device) {
  return std::make_shared<RenamedCostSource>(FittedCostSource(fit, target, device),
                                             kReusedProfileSource,
                                             nlohmann::json{{"reused_profile", fit.profile}});
}

CostSources CostSourcesFor(const fit::LatencyFit& fit, const fit::Profile& profile,
                           const model::MoeModelSpec& target, bool on_gpu) {
  CostSources made;
  made.sources.push_back(FittedCostSource(fit, target, on_gpu ? "cuda:0" : "cpu"));
  if (on_gpu) {
    made.notes.push_back(
        "--device gpu: no calibrated-roofline predictions (the profile measures the CPU's limits, "
        "not the GPU's)");
  } else if (profile.limits) {
    made.sources.push_back(CalibratedCostSource(profile));
  } else {
    made.notes.push_back(
        "the profile has no measured machine limits: no calibrated-roofline predictions");
  }
  return made;
}

}  // namespace moelab::validate::impl
