#include "model/sd_plan.h"

#include <cmath>
#include <sstream>

#include "model/error.h"
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
}

SdPlan PlanSpeculativeDecoding(const MoeModelSpec& target, const MoeModelSpec& draft,
                               const HardwareSpec& hardware, const CostParameters& params,
                               const SdPlanOptions& options) {
  options.Validate();
  params.Validate();
  const MemoryFootprint target_weights = EstimateMemory(target, hardware, 0, params);
  const MemoryFootprint draft_weights = EstimateMemory(draft, hardware, 0, params);
  const double weights_per_device =
      target_weights.weight_bytes_per_device + draft_weights.weight_bytes_per_device;
  if (weights_per_device > target_weights.capacity_bytes_per_device) {
    throw Error("the weights of '" + target.name + "' and '" + draft.name + "' need " +
                Gigabytes(weights_per_device) + " per device but '" + hardware.name +
                "' has " + Gigabytes(target_weights.capacity_bytes_per_device) +
                " per device; choose a node with more devices (e.g. 2x" + hardware.name +
                ", 4x...) or a quantized model");
  }

  SdPlan plan;
  for (int64_t batch : options.batches) {
    const ForwardShape step{batch, 1, options.context_length, true};
    const ForwardCost target_step = EstimateForwardCost(target, hardware, step, params);
    const ForwardCost draft_step = EstimateForwardCost(draft, hardware, step, params);
    plan.device = target_step.device;
    plan.compute_dtype = target_step.compute_dtype;
    SdBestGamma best{batch, 0, 0};
    for (int64_t gamma : options.gammas) {
      const int64_t verify_positions =
          options.verify == VerifyPositions::kGammaPlusOne ? gamma + 1 : gamma;
      const ForwardShape verify{batch, verify_positions, options.context_length, true};
      SdPlanRow row;
      row.batch = batch;
      row.gamma = gamma;
      row.sigma = AcceptedLengthFraction(options.alpha, gamma);
      row.target_step_s = target_step.time_s;
      row.draft_step_s = draft_step.time_s;
      row.verify_s = EstimateForwardCost(target, hardware, verify, params).time_s;
      row.reject_s = RejectionSamplingTime(target, hardware, params, batch, gamma);
      const double round_s =
          static_cast<double>(gamma) * row.draft_step_s + row.verify_s + row.reject_s;
      row.speedup = row.sigma * static_cast<double>(gamma + 1) * row.target_step_s / round_s;
      row.target_efficiency = row.target_step_s / row.verify_s;
      row.draft_share = static_cast<double>(gamma) * row.draft_step_s / round_s;
      row.verify_share = row.verify_s / round_s;
      const double kv_tokens =
          static_cast<double>(batch) * static_cast<double>(options.context_length + gamma + 1);
      const double kv_per_device = EstimateMemory(target, hardware, kv_tokens, params).kv_bytes_per_device +
                                   EstimateMemory(draft, hardware, kv_tokens, params).kv_bytes_per_device;
      row.fits_memory = weights_per_device + kv_per_device <= target_weights.capacity_bytes_per_device;
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

}  // namespace moelab
