#include "policies/offload_policy.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace moelab::policies {

std::string ToString(Device device) {
  return device == Device::kAccelerator ? "accelerator" : "cpu";
}

std::string ToString(ExpertAction action) {
  switch (action) {
    case ExpertAction::kResident:
      return "resident";
    case ExpertAction::kFetch:
      return "fetch";
    case ExpertAction::kCpu:
      return "cpu";
  }
  return "?";
}

std::string ToString(FetchTarget target) {
  switch (target) {
    case FetchTarget::kCache:
      return "cache";
    case FetchTarget::kTransient:
      return "transient";
    case FetchTarget::kStaged:
      return "staged";
  }
  return "?";
}

double OffloadSetup::ExpertBudgetBytes(int64_t dense_layers_on_accelerator,
                                       int64_t staging_buffers) const {
  const int64_t layers = std::clamp<int64_t>(dense_layers_on_accelerator, 0,
                                             static_cast<int64_t>(dense_layer_bytes.size()));
  double used =
      fixed_bytes + static_cast<double>(staging_buffers) * static_cast<double>(expert_bytes);
  for (int64_t layer = 0; layer < layers; ++layer) used += dense_layer_bytes[layer];
  return accelerator_bytes - used;
}

int64_t OffloadSetup::ExpertSlots(int64_t dense_layers_on_accelerator,
                                  int64_t staging_buffers) const {
  const double budget = ExpertBudgetBytes(dense_layers_on_accelerator, staging_buffers);
  if (budget <= 0 || expert_bytes <= 0) return 0;
  return static_cast<int64_t>(std::floor(budget / static_cast<double>(expert_bytes)));
}

void OffloadSetup::Validate() const {
  auto fail = [](const std::string& field, const std::string& what) {
    throw base::Error("offload setup: field '" + field + "': " + what);
  };
  if (num_layers < 1) fail("num_layers", "must be >= 1");
  if (first_dense_layers < 0 || first_dense_layers >= num_layers) {
    fail("first_dense_layers", "must be in [0, num_layers)");
  }
  if (num_moe_layers != num_layers - first_dense_layers) {
    fail("num_moe_layers", "must equal num_layers - first_dense_layers");
  }
  if (num_experts < 1) fail("num_experts", "must be >= 1");
  if (top_k < 1 || top_k > num_experts) fail("top_k", "must be in [1, num_experts]");
  if (expert_bytes < 1) fail("expert_bytes", "must be >= 1");
  if (!(accelerator_bytes >= 0)) fail("accelerator_bytes", "must be >= 0");
  if (dense_layer_bytes.size() != static_cast<size_t>(num_layers)) {
    fail("dense_layer_bytes", "must have one entry per layer");
  }
  latency.Validate();
  if (!popularity.empty()) {
    if (popularity.size() != static_cast<size_t>(num_moe_layers)) {
      fail("popularity", "must have one row per MoE layer");
    }
    for (const auto& row : popularity) {
      if (row.size() != static_cast<size_t>(num_experts)) {
        fail("popularity", "must have one count per expert");
      }
    }
  }
  const size_t map_size = static_cast<size_t>(num_moe_layers * num_experts);
  for (const ExpertMap& map : history) {
    if (map.probabilities.size() != map_size) {
      fail("history", "every expert map must have num_moe_layers x num_experts probabilities");
    }
  }
}

Device OffloadPolicy::DenseDevice(int64_t /*layer*/) const { return Device::kAccelerator; }

}  // namespace moelab::policies
