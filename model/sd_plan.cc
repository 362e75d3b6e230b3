#include "model/sd_plan.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "model/moe_math.h"
#include "report/format.h"

namespace moelab::model {
namespace {}  // namespace

std::string ToString(VerifyPositions positions) {
  return positions == VerifyPositions::kGammaPlusOne ? "gamma+1" : "gamma";
}

VerifyPositions VerifyPositionsFromString(const std::string& name) {
  if (name == "gamma+1") return VerifyPositions::kGammaPlusOne;
  if (name == "gamma") return VerifyPositions::kGamma;
  throw base::Error("unknown verify positions '" + name + "': expected \"gamma+1\" or \"gamma\"");
}

void SdPlanOptions::Validate() const {
  if (batches.empty()) throw base::Error("batch list is empty");
  if (gammas.empty()) throw base::Error("gamma list is empty");
  for (int64_t batch : batches) {
    if (batch < 1) throw base::Error("batch must be at least 1, got " + std::to_string(batch));
  }
  for (int64_t gamma : gammas) {
    if (gamma < 1) throw base::Error("gamma must be at least 1, got " + std::to_string(gamma));
  }
  if (!(alpha >= 0 && alpha < 1)) {
    throw base::Error("alpha must be in [0, 1), got " + std::to_string(alpha));
  }
  if (context_length < 0)
    throw base::Error("context length must be >= 0, got " + std::to_string(context_length));
  if (sigma && !(*sigma > 0 && *sigma <= 1)) {
    throw base::Error("sigma must be in (0, 1], got " + std::to_string(*sigma));
  }
  // Every round yields at least the target's own token: sigma (gamma + 1) >= 1 (within 0.1 %,
  // so that 0.333 passes for 1/3 at gamma 2).
  for (int64_t gamma : gammas) {
    if (sigma && !SigmaYieldsAToken(*sigma, gamma)) {
      std::ostringstream message;
      message << "sigma " << *sigma << " at gamma " << gamma
              << " accepts fewer than the 1 token every round yields: expected sigma >= 1 / "
                 "(gamma + 1) = "
              << 1.0 / static_cast<double>(gamma + 1);
      throw base::Error(message.str());
    }
  }
}

namespace {

// How many times the memory per device the weights need, as a power of two ("4x"), or "more" for
// what no node of up to 4,096 devices holds. Not a preset's name: a host, a node or a file path
// composed with "Nx" would name no preset.
std::string MemoryFactor(double factor) {
  if (!(factor <= 4096)) return "far more";  // NaN and inf too
  int64_t wanted = 1;
  while (static_cast<double>(wanted) < factor) wanted *= 2;
  return std::to_string(wanted) + "x the";
}

}  // namespace

SdStepCosts::SdStepCosts(const CostSource& source, const MoeModelSpec& target,
                         const MoeModelSpec& draft, int64_t context_length,
                         const std::string& hardware_name)
    : source_(source), target_(target), draft_(draft), context_length_(context_length) {
  if (context_length < 0)
    throw base::Error("context length must be >= 0, got " + std::to_string(context_length));
  const MemoryFootprint target_weights = source.Memory(target, 0);
  const MemoryFootprint draft_weights = source.Memory(draft, 0);
  weights_per_device_ =
      target_weights.weight_bytes_per_device + draft_weights.weight_bytes_per_device;
  capacity_per_device_ = target_weights.capacity_bytes_per_device;
  if (weights_per_device_ > capacity_per_device_) {
    const std::string who = hardware_name.empty() ? source.device() : hardware_name;
    throw base::Error("the weights of '" + target.name + "' and '" + draft.name + "' need " +
                      report::FormatGigabytes(weights_per_device_, 1) + " per device but '" + who +
                      "' has " + report::FormatGigabytes(capacity_per_device_, 1) +
                      " per device; choose hardware with " +
                      MemoryFactor(weights_per_device_ / capacity_per_device_) +
                      " memory per device (more accelerators of a node: moelab hw list, or any "
                      "accelerator as <N>x<name>) or a quantized model");
  }
}

void SdStepCosts::RouteTargetBy(const ExpertActivation* activation) {
  target_activation_ = activation;
  target_steps_.clear();
}

double SdStepCosts::TargetStep(int64_t batch, int64_t positions) {
  auto [it, inserted] = target_steps_.try_emplace({batch, positions}, 0.0);
  if (inserted) {
    it->second =
        source_.Forward(target_, {batch, positions, context_length_, true, target_activation_})
            .time_s;
  }
  return it->second;
}

double SdStepCosts::DraftStep(int64_t batch) {
  auto [it, inserted] = draft_steps_.try_emplace(batch, 0.0);
  if (inserted) it->second = source_.Forward(draft_, {batch, 1, context_length_, true}).time_s;
  return it->second;
}

double SdStepCosts::DraftFollowingStep(int64_t batch) {
  auto [it, inserted] = draft_following_steps_.try_emplace(batch, 0.0);
  if (inserted) {
    model::ForwardShape shape{batch, 1, context_length_, true};
    shape.after_own_pass = true;
    it->second = source_.Forward(draft_, shape).time_s;
  }
  return it->second;
}

double SdStepCosts::DraftPasses(int64_t batch, int64_t gamma) {
  return DraftStep(batch) + static_cast<double>(gamma - 1) * DraftFollowingStep(batch);
}

double SdStepCosts::DraftCatchUpStep(int64_t batch) {
  auto [it, inserted] = draft_catch_up_steps_.try_emplace(batch, 0.0);
  if (inserted) it->second = source_.Forward(draft_, {batch, 2, context_length_, false}).time_s;
  return it->second;
}

double SdStepCosts::Reject(int64_t batch, int64_t gamma) {
  return source_.RejectSeconds(target_, batch, gamma);
}

bool SdStepCosts::Fits(int64_t batch, int64_t gamma) {
  const double kv_tokens =
      static_cast<double>(batch) * static_cast<double>(context_length_ + gamma + 1);
  const double kv_per_device = source_.Memory(target_, kv_tokens).kv_bytes_per_device +
                               source_.Memory(draft_, kv_tokens).kv_bytes_per_device;
  return weights_per_device_ + kv_per_device <= capacity_per_device_;
}

SdPlan PlanSpeculativeDecoding(SdStepCosts& costs, const SdPlanOptions& options) {
  options.Validate();
  SdPlan plan;
  plan.cost_source = costs.source();
  plan.device = costs.device();
  plan.compute_dtype = costs.compute_dtype();
  plan.routing = costs.routing();
  for (int64_t batch : options.batches) {
    const double target_step_s = costs.TargetStep(batch, 1);
    const double draft_step_s = costs.DraftStep(batch);
    SdBestGamma best{batch, 0, 0, false};
    for (int64_t gamma : options.gammas) {
      const int64_t verify_positions =
          options.verify == VerifyPositions::kGammaPlusOne ? gamma + 1 : gamma;
      SdPlanRow row;
      row.batch = batch;
      row.gamma = gamma;
      row.alpha = options.sigma ? std::nan("") : options.alpha;
      row.sigma = options.sigma ? *options.sigma : AcceptedLengthFraction(options.alpha, gamma);
      row.target_step_s = target_step_s;
      row.draft_step_s = draft_step_s;
      row.draft_following_step_s = costs.DraftFollowingStep(batch);
      row.verify_s = costs.TargetStep(batch, verify_positions);
      row.reject_s = costs.Reject(batch, gamma);
      if (!options.sigma && options.verify == VerifyPositions::kGammaPlusOne) {
        row.catch_up_s = std::pow(options.alpha, static_cast<double>(gamma)) *
                         (costs.DraftCatchUpStep(batch) - draft_step_s);
      }
      const double draft_s = costs.DraftPasses(batch, gamma) + row.catch_up_s;
      const double round_s = draft_s + row.verify_s + row.reject_s;
      row.speedup = row.sigma * static_cast<double>(gamma + 1) * row.target_step_s / round_s;
      row.target_efficiency = row.target_step_s / row.verify_s;
      row.draft_share = draft_s / round_s;
      row.verify_share = row.verify_s / round_s;
      row.fits_memory = costs.Fits(batch, gamma);
      // A fitting row beats any that does not fit; among equals the higher speedup.
      if ((row.fits_memory && !best.fits_memory) ||
          (row.fits_memory == best.fits_memory && row.speedup > best.speedup))
        best = {batch, gamma, row.speedup, row.fits_memory};
      plan.rows.push_back(row);
    }
    plan.best_gamma.push_back(best);
    if (best.fits_memory && best.speedup > 1.0) {
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

}  // namespace moelab::model
