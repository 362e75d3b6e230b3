#include "sim/cost_model.h"

#include <algorithm>

#include "base/error.h"

namespace moelab::sim {
namespace {

constexpr int64_t kFiddlerSecantTokens = 128;

int DeviceIndex(policies::Device device) {
  return device == policies::Device::kAccelerator ? 0 : 1;
}

}  // namespace

CostModel::CostModel(const MoeModelSpec& model, const HardwareSpec& hardware,
                     const CostParameters& params, const CostParameters& host_params,
                     int64_t cpu_threads)
    : model_(model), params_(params), host_params_(host_params) {
  params.Validate();
  host_params.Validate();
  const std::string who = "hardware '" + hardware.name + "'";
  if (!model.is_moe())
    throw Error("model '" + model.name + "' is dense: it has no experts to offload");
  if (!hardware.has_accelerator()) {
    throw Error(who +
                " has no accelerator; sim offload needs an accelerator preset (e.g. rtx-3090)");
  }
  if (hardware.accelerator_count != 1) {
    throw Error(who + " is a node of " + std::to_string(hardware.accelerator_count) +
                " accelerators; sim offload models one accelerator and its host (pick the "
                "accelerator preset, e.g. '" +
                hardware.name.substr(hardware.name.find('x') + 1) + "')");
  }
  if (!hardware.host)
    throw Error(who + " names no host CPU (field 'host'), needed for CPU experts and host memory");
  if (!hardware.host_link)
    throw Error(who + " names no host link (field 'host_link'), needed for transfers");
  if (!(hardware.host->storage_read_bandwidth_bytes_per_s > 0)) {
    throw Error(who + ": host '" + hardware.host->name +
                "' has no storage_read_bandwidth_bytes_per_s");
  }
  if (!(hardware.host_link->host_to_device_bandwidth_bytes_per_s > 0) ||
      !(hardware.host_link->device_to_host_bandwidth_bytes_per_s > 0)) {
    throw Error(who + ": host link '" + hardware.host_link->name + "' needs positive bandwidths");
  }
  if (cpu_threads < 1)
    throw Error("--cpu-threads must be at least 1, got " + std::to_string(cpu_threads));

  accelerator_ = hardware;
  accelerator_.kind = HardwareKind::kAccelerator;
  accelerator_.accelerator_count = 1;
  accelerator_.interconnect.reset();
  accelerator_name_ = hardware.accelerator->display_name.empty()
                          ? hardware.display_name
                          : hardware.accelerator->display_name;

  host_ = HardwareSpec{};
  host_.name = hardware.host->name;
  host_.display_name = hardware.host->cpu_name;
  host_.kind = HardwareKind::kHost;
  host_.host = hardware.host;
  cpu_threads_ = cpu_threads;
  const double cores = static_cast<double>(std::max<int64_t>(hardware.host->cores, 1));
  const double share = std::min(1.0, static_cast<double>(cpu_threads) / cores);
  for (auto& [dtype, flops] : host_.host->peak_flops) flops *= share;
  cpu_name_ = hardware.host->cpu_name;

  link_ = *hardware.host_link;
  storage_bytes_per_s_ = hardware.host->storage_read_bandwidth_bytes_per_s;

  single_expert_model_ = model;
  single_expert_model_.moe->num_experts = 1;
  single_expert_model_.moe->top_k = 1;
  std::string used;
  PeakFlopsFor(hardware.accelerator->peak_flops, params.compute_dtype, &used);
  compute_dtype_ = used;
}

Seconds CostModel::ExpertSeconds(policies::Device device, int64_t tokens) {
  if (tokens < 1)
    throw Error("sim: an expert runs for at least one token, got " + std::to_string(tokens));
  std::vector<Seconds>& cache = expert_s_[DeviceIndex(device)];
  if (static_cast<int64_t>(cache.size()) <= tokens)
    cache.resize(static_cast<size_t>(tokens) + 1, -1.0);
  Seconds& slot = cache[static_cast<size_t>(tokens)];
  if (slot < 0) {
    ForwardShape shape;
    shape.batch = tokens;
    shape.tokens_per_sequence = 1;
    const ForwardCost cost =
        EstimateForwardCost(single_expert_model_, Target(device), shape, ParamsOf(device));
    slot = cost.OperatorTime("routed_experts") / static_cast<double>(model_.num_moe_layers());
  }
  return slot;
}

const CostModel::DenseCost& CostModel::Dense(policies::Device device, const ForwardShape& shape) {
  const auto key = std::make_tuple(DeviceIndex(device), shape.batch, shape.tokens_per_sequence,
                                   shape.context_length, shape.logits_for_all_positions);
  auto found = dense_.find(key);
  if (found != dense_.end()) return found->second;
  const ForwardCost cost = EstimateForwardCost(model_, Target(device), shape, ParamsOf(device));
  const double layers = static_cast<double>(model_.num_layers);
  const double moe_layers = static_cast<double>(model_.num_moe_layers());
  const double dense_layers = static_cast<double>(model_.num_dense_layers());
  const double common =
      (cost.OperatorTime("attention_projections") + cost.OperatorTime("attention_core") +
       cost.OperatorTime("norms_residual") + cost.OperatorTime("communication")) /
      layers;
  const double moe_extra =
      moe_layers > 0
          ? (cost.OperatorTime("router") + cost.OperatorTime("shared_experts")) / moe_layers
          : 0;
  const double dense_extra = dense_layers > 0 ? cost.OperatorTime("dense_ffn") / dense_layers : 0;
  DenseCost dense;
  for (int64_t layer = 0; layer < model_.num_layers; ++layer) {
    const bool moe = layer >= model_.moe->first_dense_layers;
    dense.layer_s.push_back(common + (moe ? moe_extra : dense_extra));
  }
  dense.embedding_s = cost.OperatorTime("embedding");
  dense.lm_head_s = cost.OperatorTime("lm_head");
  return dense_.emplace(key, std::move(dense)).first->second;
}

Seconds CostModel::HostToDeviceSeconds(double bytes) const {
  return bytes / link_.host_to_device_bandwidth_bytes_per_s + link_.latency_s;
}

Seconds CostModel::DeviceToHostSeconds(double bytes) const {
  return bytes / link_.device_to_host_bandwidth_bytes_per_s + link_.latency_s;
}

Seconds CostModel::StorageReadSeconds(double bytes) const { return bytes / storage_bytes_per_s_; }

FiddlerLatencyModel CostModel::FiddlerLatency(int64_t expert_bytes) {
  FiddlerLatencyModel latency;
  const Seconds cpu_one = ExpertSeconds(policies::Device::kCpu, 1);
  const Seconds cpu_many = ExpertSeconds(policies::Device::kCpu, kFiddlerSecantTokens);
  latency.cpu_per_token_s =
      std::max(0.0, (cpu_many - cpu_one) / static_cast<double>(kFiddlerSecantTokens - 1));
  latency.cpu_base_s = std::max(0.0, cpu_one - latency.cpu_per_token_s);
  latency.gpu_s = ExpertSeconds(policies::Device::kAccelerator, 1);
  latency.transfer_s = HostToDeviceSeconds(static_cast<double>(expert_bytes));
  return latency;
}

}  // namespace moelab::sim
