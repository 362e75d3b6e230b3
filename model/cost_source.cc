#include "model/cost_source.h"

#include <utility>

#include "base/error.h"
#include "model/parameter_count.h"

namespace moelab::model {

RooflineCostSource::RooflineCostSource(RooflineTarget target, CostParameters params,
                                       std::string name, nlohmann::json details)
    : target_(std::move(target)),
      params_(std::move(params)),
      name_(std::move(name)),
      details_(std::move(details)) {
  params_.Validate();
}

std::unique_ptr<RooflineCostSource> RooflineCostSource::ForHardware(const HardwareSpec& hardware,
                                                                    const CostParameters& params,
                                                                    std::string name,
                                                                    nlohmann::json details) {
  params.Validate();
  return std::make_unique<RooflineCostSource>(ComputeTargetOf(hardware, params.compute_dtype),
                                              params, std::move(name), std::move(details));
}

ForwardCost RooflineCostSource::Forward(const MoeModelSpec& model,
                                        const ForwardShape& shape) const {
  return EstimateForwardCost(model, target_, shape, params_);
}

double RooflineCostSource::ExpertSeconds(
    const MoeModelSpec& model, int64_t tokens,
    double /*working_set_bytes: no cache in a roofline*/) const {
  if (!model.moe)
    throw base::Error("model '" + model.name + "' is dense: it has no routed experts");
  if (tokens < 1)
    throw base::Error("an expert runs for at least one token, got " + std::to_string(tokens));
  // One expert's weights are read once whatever its tokens; each token's hidden state goes in and
  // its output comes out (formulas.md, the routed_experts operator with one expert).
  const double t = static_cast<double>(tokens);
  const double activation_bytes = params_.activation_bits / 8.0;
  const double flops = 2.0 * t * static_cast<double>(CountParameters(model).params_per_expert);
  const double bytes = CountWeightBytes(model).expert +
                       t * static_cast<double>(model.hidden_size) * 2.0 * activation_bytes;
  return RooflineSeconds(target_, params_, flops, bytes, 1);
}

double RooflineCostSource::RejectSeconds(const MoeModelSpec& target, int64_t batch,
                                         int64_t gamma) const {
  // Reads target and draft probabilities over the vocabulary for every verified position and
  // writes the residual distribution: memory-bound, three launches.
  const double positions = static_cast<double>(batch * (gamma + 1));
  const double bytes = 3.0 * positions * static_cast<double>(target.vocab_size) * 4.0;
  return RooflineSeconds(target_, params_, 0.0, bytes, 3);
}

MemoryFootprint RooflineCostSource::Memory(const MoeModelSpec& model, double kv_tokens) const {
  return EstimateMemory(model, target_, kv_tokens, params_);
}

nlohmann::json RooflineCostSource::Describe() const {
  nlohmann::json json = {{"cost_source", name_},
                         {"device", target_.name},
                         {"cost_parameters",
                          {{"compute_dtype", params_.compute_dtype},
                           {"compute_efficiency", params_.compute_efficiency},
                           {"memory_efficiency", params_.memory_efficiency},
                           {"kernel_launch_s", params_.kernel_launch_s}}}};
  json.update(details_);
  return json;
}

}  // namespace moelab::model
