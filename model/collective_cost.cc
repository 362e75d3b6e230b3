#include "model/collective_cost.h"

#include <algorithm>

#include "base/error.h"

namespace moelab::model {

const std::vector<std::string>& CollectiveOperatorNames() {
  static const std::vector<std::string> kNames = {"all_to_all", "all_reduce"};
  return kNames;
}

bool IsCollectiveOperator(const std::string& op) {
  const std::vector<std::string>& names = CollectiveOperatorNames();
  return std::find(names.begin(), names.end(), op) != names.end();
}

namespace {

void RequireBytes(double bytes, const char* what) {
  if (!(bytes >= 0)) {
    throw base::Error(std::string(what) + ": bytes per device must be >= 0, got " +
                      std::to_string(bytes));
  }
}

nlohmann::json LinkJson(const InterconnectSpec& link) {
  return {{"kind", link.kind},
          {"bandwidth_bytes_per_s", link.bandwidth_bytes_per_s},
          {"latency_s", link.latency_s}};
}

}  // namespace

void CollectiveGroup::Validate() const {
  if (devices < 1 || devices_per_machine < 1) {
    throw base::Error("collective group: devices and devices_per_machine must be >= 1, got " +
                      std::to_string(devices) + " and " + std::to_string(devices_per_machine));
  }
}

LinkCollectiveCost::LinkCollectiveCost(InterconnectSpec intra,
                                       std::optional<InterconnectSpec> scale_out)
    : intra_(std::move(intra)), scale_out_(std::move(scale_out)) {
  if (!(intra_.bandwidth_bytes_per_s > 0) || !(intra_.latency_s >= 0))
    throw base::Error("link model: the interconnect needs bandwidth > 0 and latency >= 0");
  if (scale_out_ && (!(scale_out_->bandwidth_bytes_per_s > 0) || !(scale_out_->latency_s >= 0)))
    throw base::Error("link model: the scale-out network needs bandwidth > 0 and latency >= 0");
}

std::unique_ptr<LinkCollectiveCost> LinkCollectiveCost::ForNode(const HardwareSpec& node) {
  if (!node.has_accelerator())
    throw base::Error("hardware '" + node.name + "' has no accelerators to communicate between");
  if (!node.interconnect) {
    if (node.accelerator_count > 1) {
      throw base::Error("hardware '" + node.name + "' has " +
                        std::to_string(node.accelerator_count) +
                        " accelerators but no interconnect");
    }
    // One accelerator: a group of one never uses the link; any positive bandwidth will do.
    return std::make_unique<LinkCollectiveCost>(InterconnectSpec{"none", 1.0, 0.0}, std::nullopt);
  }
  return std::make_unique<LinkCollectiveCost>(*node.interconnect, node.scale_out);
}

const InterconnectSpec& LinkCollectiveCost::SlowestLink(const CollectiveGroup& group) const {
  if (group.devices > group.devices_per_machine) {
    if (!scale_out_) {
      throw base::Error("a group of " + std::to_string(group.devices) +
                        " devices spans machines (" + std::to_string(group.devices_per_machine) +
                        " per machine) but the hardware has no scale-out network");
    }
    return scale_out_->bandwidth_bytes_per_s < intra_.bandwidth_bytes_per_s ? *scale_out_ : intra_;
  }
  return intra_;
}

double LinkCollectiveCost::AllToAllSeconds(double bytes_per_device,
                                           const CollectiveGroup& group) const {
  RequireBytes(bytes_per_device, "all-to-all");
  group.Validate();
  if (group.devices == 1 || bytes_per_device == 0) return 0.0;
  const double peers = static_cast<double>(group.devices - 1);
  const double same_machine_peers =
      static_cast<double>(std::min(group.devices, group.devices_per_machine) - 1);
  const double intra_bytes = bytes_per_device * same_machine_peers / peers;
  const double remote_bytes = bytes_per_device - intra_bytes;
  double seconds = 0;
  if (intra_bytes > 0) seconds = intra_.latency_s + intra_bytes / intra_.bandwidth_bytes_per_s;
  if (remote_bytes > 0) {
    const InterconnectSpec& network = SlowestLink(group);
    seconds = std::max(seconds, network.latency_s + remote_bytes / network.bandwidth_bytes_per_s);
  }
  return seconds;
}

double LinkCollectiveCost::RingSeconds(double bytes, const CollectiveGroup& group,
                                       int64_t passes) const {
  group.Validate();
  if (group.devices == 1 || bytes == 0) return 0.0;
  const InterconnectSpec& link = SlowestLink(group);
  const double steps = static_cast<double>(passes * (group.devices - 1));
  const double bytes_per_step = bytes / static_cast<double>(group.devices);
  return steps * (link.latency_s + bytes_per_step / link.bandwidth_bytes_per_s);
}

double LinkCollectiveCost::AllReduceSeconds(double bytes, const CollectiveGroup& group) const {
  RequireBytes(bytes, "all-reduce");
  return RingSeconds(bytes, group, 2);
}

double LinkCollectiveCost::ReduceScatterSeconds(double bytes, const CollectiveGroup& group) const {
  RequireBytes(bytes, "reduce-scatter");
  return RingSeconds(bytes, group, 1);
}

double LinkCollectiveCost::AllGatherSeconds(double bytes, const CollectiveGroup& group) const {
  RequireBytes(bytes, "all-gather");
  return RingSeconds(bytes, group, 1);
}

nlohmann::json LinkCollectiveCost::Describe() const {
  nlohmann::json json = {{"collective_cost", name()}, {"interconnect", LinkJson(intra_)}};
  if (scale_out_) json["scale_out"] = LinkJson(*scale_out_);
  return json;
}

}  // namespace moelab::model
