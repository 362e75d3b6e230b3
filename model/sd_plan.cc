#include "model/sd_plan.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "model/moe_math.h"

namespace moelab {
namespace {

std::string Gigabytes(double bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << bytes / 1e9 << " GB";
  return out.str();
}

double RejectionSamplingTime(const MoeModelSpec& target, const HardwareSpec& hardware,
                             const CostParameters& params, int64_t batch, int64_t gamma) {
  // Reads target and draft probabilities over the vocabulary for every verified position and
  // writes the residual distribution: memory-bound, three launches.
  const double positions = static_cast<double>(batch * (gamma + 1));
  const double bytes = 3.0 * positions * static_cast<double>(target.vocab_size) * 4.0;
  const double bandwidth = hardware.has_accelerator()
                               ? hardware.accelerator->memory_bandwidth_bytes_per_s *
                                     static_cast<double>(hardware.accelerator_count)
                               : hardware.host->dram_bandwidth_bytes_per_s;
  return 3.0 * params.kernel_launch_s + bytes / (bandwidth * params.memory_efficiency);
}

}  // namespace

std::string ToString(VerifyPositions positions) {
  return positions == VerifyPositions::kGammaPlusOne ? "gamma+1" : "gamma";
}

VerifyPositions VerifyPositionsFromString(const std::string& name) {
  if (name == "gamma+1") return VerifyPositions::kGammaPlusOne;
  if (name == "gamma") return VerifyPositions::kGamma;
  throw Error("unknown verify positions '" + name + "': expected \"gamma+1\" or \"gamma\"");
}

void SdPlanOptions::Validate() const {
  if (batches.empty()) throw Error("batch list is empty");
  if (gammas.empty()) throw Error("gamma list is empty");
  for (int64_t batch : batches) {
    if (batch < 1) throw Error("batch must be at least 1, got " + std::to_string(batch));
  }
  for (int64_t gamma : gammas) {
    if (gamma < 1) throw Error("gamma must be at least 1, got " + std::to_string(gamma));
  }
  if (!(alpha >= 0 && alpha < 1)) {
    throw Error("alpha must be in [0, 1), got " + std::to_string(alpha));
  }
  if (context_length < 0) throw Error("context length must be >= 0, got " + std::to_string(context_length));
  if (sigma && !(*sigma > 0 && *sigma <= 1)) {
    throw Error("sigma must be in (0, 1], got " + std::to_string(*sigma));
  }
}

AnalyticSdStepCosts::AnalyticSdStepCosts(const MoeModelSpec& target, const MoeModelSpec& draft,
                                         const HardwareSpec& hardware, const CostParameters& params,
                                         int64_t context_length, std::string source)
    : target_(target), draft_(draft), hardware_(hardware), params_(params), context_length_(context_length),
      source_(std::move(source)) {
  params_.Validate();
  if (context_length < 0) throw Error("context length must be >= 0, got " + std::to_string(context_length));
  const MemoryFootprint target_weights = EstimateMemory(target, hardware, 0, params_);
  const MemoryFootprint draft_weights = EstimateMemory(draft, hardware, 0, params_);
  weights_per_device_ = target_weights.weight_bytes_per_device + draft_weights.weight_bytes_per_device;
  capacity_per_device_ = target_weights.capacity_bytes_per_device;
  if (weights_per_device_ > capacity_per_device_) {
    throw Error("the weights of '" + target.name + "' and '" + draft.name + "' need " +
                Gigabytes(weights_per_device_) + " per device but '" + hardware.name + "' has " +
                Gigabytes(capacity_per_device_) + " per device; choose a node with more devices (e.g. 2x" +
                hardware.name + ", 4x...) or a quantized model");
  }
  const ForwardCost probe = EstimateForwardCost(target, hardware, {1, 1, context_length, true}, params_);
  device_ = probe.device;
  compute_dtype_ = probe.compute_dtype;
}

double AnalyticSdStepCosts::TargetStep(int64_t batch, int64_t positions) {
  auto [it, inserted] = target_steps_.try_emplace({batch, positions}, 0.0);
  if (inserted) {
    it->second = EstimateForwardCost(target_, hardware_, {batch, positions, context_length_, true}, params_).time_s;
  }
  return it->second;
}

double AnalyticSdStepCosts::DraftStep(int64_t batch) {
  auto [it, inserted] = draft_steps_.try_emplace(batch, 0.0);
  if (inserted) it->second = EstimateForwardCost(draft_, hardware_, {batch, 1, context_length_, true}, params_).time_s;
  return it->second;
}

double AnalyticSdStepCosts::Reject(int64_t batch, int64_t gamma) {
  return RejectionSamplingTime(target_, hardware_, params_, batch, gamma);
}

bool AnalyticSdStepCosts::Fits(int64_t batch, int64_t gamma) {
  const double kv_tokens = static_cast<double>(batch) * static_cast<double>(context_length_ + gamma + 1);
  const double kv_per_device = EstimateMemory(target_, hardware_, kv_tokens, params_).kv_bytes_per_device +
                               EstimateMemory(draft_, hardware_, kv_tokens, params_).kv_bytes_per_device;
  return weights_per_device_ + kv_per_device <= capacity_per_device_;
}

SdPlan PlanSpeculativeDecoding(SdStepCosts& costs, const SdPlanOptions& options) {
  options.Validate();
  SdPlan plan;
  plan.cost_source = costs.source();
  plan.device = costs.device();
  plan.compute_dtype = costs.compute_dtype();
  for (int64_t batch : options.batches) {
    const double target_step_s = costs.TargetStep(batch, 1);
    const double draft_step_s = costs.DraftStep(batch);
    SdBestGamma best{batch, 0, 0};
    for (int64_t gamma : options.gammas) {
      const int64_t verify_positions = options.verify == VerifyPositions::kGammaPlusOne ? gamma + 1 : gamma;
      SdPlanRow row;
      row.batch = batch;
      row.gamma = gamma;
      row.alpha = options.sigma ? std::nan("") : options.alpha;
      row.sigma = options.sigma ? *options.sigma : AcceptedLengthFraction(options.alpha, gamma);
      row.target_step_s = target_step_s;
      row.draft_step_s = draft_step_s;
      row.verify_s = costs.TargetStep(batch, verify_positions);
      row.reject_s = costs.Reject(batch, gamma);
      const double round_s = static_cast<double>(gamma) * row.draft_step_s + row.verify_s + row.reject_s;
      row.speedup = row.sigma * static_cast<double>(gamma + 1) * row.target_step_s / round_s;
      row.target_efficiency = row.target_step_s / row.verify_s;
      row.draft_share = static_cast<double>(gamma) * row.draft_step_s / round_s;
      row.verify_share = row.verify_s / round_s;
      row.fits_memory = costs.Fits(batch, gamma);
      if (row.speedup > best.speedup) best = {batch, gamma, row.speedup};
      plan.rows.push_back(row);
    }
    plan.best_gamma.push_back(best);
    if (best.speedup > 1.0) {
      if (!plan.pays_batch_range) {
        plan.pays_batch_range = std::pair{batch, batch};
      } else {
        plan.pays_batch_range->first = std::min(plan.pays_batch_range->first, batch);
        plan.pays_batch_range->second = std::max(plan.pays_batch_range->second, batch);
      }
    }
  }
  return plan;
}

SdPlan PlanSpeculativeDecoding(const MoeModelSpec& target, const MoeModelSpec& draft,
                               const HardwareSpec& hardware, const CostParameters& params,
                               const SdPlanOptions& options) {
  options.Validate();
  AnalyticSdStepCosts costs(target, draft, hardware, params, options.context_length);
  return PlanSpeculativeDecoding(costs, options);
}

}  // namespace moelab
