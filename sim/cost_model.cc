#include "sim/cost_model.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace moelab::sim {
namespace {

constexpr int64_t kFiddlerSecantTokens = 128;

int DeviceIndex(policies::Device device) {
  return device == policies::Device::kAccelerator ? 0 : 1;
}

}  // namespace

std::string CostSourceName(const model::CostSource& accelerator, const model::CostSource& host) {
  const std::string a = accelerator.name(), h = host.name();
  if (a == h) return a;
  const std::string analytic = "analytic-roofline", calibrated = "calibrated-roofline";
  if ((a == analytic && h == calibrated) || (a == calibrated && h == analytic)) return calibrated;
  return a == analytic ? h + " (host) + " + a + " (accelerator)"
                       : a + " (accelerator) + " + h + " (host)";
}

CostModel::CostModel(const model::MoeModelSpec& model, const model::HardwareSpec& hardware,
                     int64_t cpu_threads,
                     std::shared_ptr<const model::CostSource> accelerator_source,
                     std::shared_ptr<const model::CostSource> host_source)
    : model_(model),
      accelerator_source_(std::move(accelerator_source)),
      host_source_(std::move(host_source)) {
  const std::string who = "hardware '" + hardware.name + "'";
  if (!model.is_moe())
    throw base::Error("model '" + model.name + "' is dense: it has no experts to offload");
  if (!hardware.has_accelerator()) {
    throw base::Error(
        who + " has no accelerator; sim offload needs an accelerator preset (e.g. rtx-3090)");
  }
  if (hardware.accelerator_count != 1) {
    throw base::Error(who + " is a node of " + std::to_string(hardware.accelerator_count) +
                      " accelerators; sim offload models one accelerator and its host (pick the "
                      "accelerator preset, e.g. '" +
                      hardware.name.substr(hardware.name.find('x') + 1) + "')");
  }
  if (!hardware.host)
    throw base::Error(who +
                      " names no host CPU (field 'host'), needed for CPU experts and host memory");
  if (!hardware.host_link)
    throw base::Error(who + " names no host link (field 'host_link'), needed for transfers");
  if (!(hardware.host->storage_read_bandwidth_bytes_per_s > 0)) {
    throw base::Error(who + ": host '" + hardware.host->name +
                      "' has no storage_read_bandwidth_bytes_per_s");
  }
  if (!(hardware.host_link->host_to_device_bandwidth_bytes_per_s > 0) ||
      !(hardware.host_link->device_to_host_bandwidth_bytes_per_s > 0)) {
    throw base::Error(who + ": host link '" + hardware.host_link->name +
                      "' needs positive bandwidths");
  }
  if (cpu_threads < 1)
    throw base::Error("--cpu-threads must be at least 1, got " + std::to_string(cpu_threads));

  if (!accelerator_source_ || !host_source_) {
    throw base::Error(
        "sim: no cost source for the accelerator or the host (fit/cost_source_options.h chooses "
        "them; a bug)");
  }
  accelerator_name_ = hardware.accelerator->display_name.empty()
                          ? hardware.display_name
                          : hardware.accelerator->display_name;
  cpu_threads_ = cpu_threads;
  cpu_name_ = hardware.host->cpu_name;
  link_ = *hardware.host_link;
  storage_bytes_per_s_ = hardware.host->storage_read_bandwidth_bytes_per_s;
  std::string used;
  model::PeakFlopsFor(hardware.accelerator->peak_flops, accelerator_source_->compute_dtype(),
                      &used);
  compute_dtype_ = used;
}

Seconds CostModel::PriceExpert(policies::Device device, int64_t tokens) {
  if (tokens < 1)
    throw base::Error("sim: an expert runs for at least one token, got " + std::to_string(tokens));
  std::vector<Seconds>& cache = expert_s_[DeviceIndex(device)];
  if (static_cast<int64_t>(cache.size()) <= tokens)
    cache.resize(static_cast<size_t>(tokens) + 1, -1.0);
  Seconds& slot = cache[static_cast<size_t>(tokens)];
  if (slot < 0) {
    slot = Source(device).ExpertSeconds(model_, tokens, working_set_bytes_[DeviceIndex(device)]);
  }
  return slot;
}

void CostModel::SetWorkingSet(policies::Device device, double bytes) {
  if (!(bytes >= 0))
    throw base::Error("sim: a working set must be >= 0 bytes, got " + std::to_string(bytes));
  const int index = DeviceIndex(device);
  working_set_bytes_[index] = bytes;
  expert_s_[index].clear();
  dense_[index].priced = false;
}

double CostModel::working_set_bytes(policies::Device device) const {
  return working_set_bytes_[DeviceIndex(device)];
}

const CostModel::DenseCost& CostModel::Dense(policies::Device device,
                                             const model::ForwardShape& shape) {
  DenseEntry& entry = dense_[DeviceIndex(device)];
  if (entry.priced && entry.batch == shape.batch &&
      entry.tokens_per_sequence == shape.tokens_per_sequence &&
      entry.context_length == shape.context_length &&
      entry.logits_for_all_positions == shape.logits_for_all_positions &&
      entry.ranked_rows == shape.ranked_rows)
    return entry.cost;
  model::ForwardShape priced = shape;
  priced.working_set_bytes = working_set_bytes_[DeviceIndex(device)];
  const model::ForwardCost cost = Source(device).Forward(model_, priced);
  // Each operator's time spread evenly over the layers it covers.
  const double layers_in[] = {static_cast<double>(model_.num_layers),
                              static_cast<double>(model_.num_moe_layers()),
                              static_cast<double>(model_.num_dense_layers())};
  double per_layer[3] = {0, 0, 0};  // [every layer, MoE layers, dense layers]
  for (const model::OperatorCost& op : cost.operators) {
    const model::OperatorScope scope = model::ScopeOf(op.op);
    if (op.op == model::Operator::kRoutedExperts || scope == model::OperatorScope::kOncePerPass)
      continue;
    const int index = scope == model::OperatorScope::kEveryLayer  ? 0
                      : scope == model::OperatorScope::kMoeLayers ? 1
                                                                  : 2;
    if (layers_in[index] > 0) per_layer[index] += op.time_s / layers_in[index];
  }
  entry.priced = false;  // until priced (the source may throw)
  DenseCost& dense = entry.cost;
  dense.layer_s.clear();  // its capacity kept: priced again every pass
  for (int64_t layer = 0; layer < model_.num_layers; ++layer) {
    const bool moe = layer >= model_.moe->first_dense_layers;
    dense.layer_s.push_back(per_layer[0] + (moe ? per_layer[1] : per_layer[2]));
  }
  dense.embedding_s = cost.OperatorTime(model::Operator::kEmbedding);
  // The ranking runs right after the LM head on the same device, before the next pass: its op.
  dense.lm_head_s = cost.OperatorTime(model::Operator::kLmHead) +
                    cost.OperatorTime(model::Operator::kBeamSelection);
  entry.batch = shape.batch;
  entry.tokens_per_sequence = shape.tokens_per_sequence;
  entry.context_length = shape.context_length;
  entry.logits_for_all_positions = shape.logits_for_all_positions;
  entry.ranked_rows = shape.ranked_rows;
  entry.priced = true;
  return dense;
}

Seconds CostModel::HostToDeviceSeconds(double bytes) const {
  return bytes / link_.host_to_device_bandwidth_bytes_per_s + link_.latency_s;
}

Seconds CostModel::DeviceToHostSeconds(double bytes) const {
  return bytes / link_.device_to_host_bandwidth_bytes_per_s + link_.latency_s;
}

Seconds CostModel::StorageReadSeconds(double bytes) const { return bytes / storage_bytes_per_s_; }

model::FiddlerLatencyModel CostModel::FiddlerLatency(int64_t expert_bytes) {
  model::FiddlerLatencyModel latency;
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
