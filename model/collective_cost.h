#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/hardware_spec.h"

namespace moelab::model {

// Where a group of devices sits on a node: `devices` in the group, `devices_per_machine` of them
// sharing one machine's interconnect (the rest reached over the scale-out network). A group of one
// device communicates nothing.
struct CollectiveGroup {
  int64_t devices = 1;
  int64_t devices_per_machine = 1;

  void Validate() const;
};

// The price of a collective on a group of devices: the interface a fitted curve (`profile
// --collectives` + `fit latency`) can replace; the link model below is the analytic one. Byte
// counts are per device, times in seconds; every method refuses negative bytes.
class CollectiveCost {
 public:
  virtual ~CollectiveCost() = default;
  virtual std::string name() const = 0;  // "link-model", ...

  // Every device sends `bytes_per_device` spread evenly over the group's other devices (and
  // receives as much): the MoE dispatch and combine.
  virtual double AllToAllSeconds(double bytes_per_device, const CollectiveGroup& group) const = 0;
  // A buffer of `bytes` on every device, reduced (or gathered, or reduce-scattered) over the group.
  virtual double AllReduceSeconds(double bytes, const CollectiveGroup& group) const = 0;
  virtual double ReduceScatterSeconds(double bytes, const CollectiveGroup& group) const = 0;
  virtual double AllGatherSeconds(double bytes, const CollectiveGroup& group) const = 0;

  virtual nlohmann::json Describe() const = 0;
};

// The operator names of the collectives a profile measures (`profile --collectives`, device "mpi",
// shape {ranks, bytes}) and a latency fit prices: "all_to_all", "all_reduce".
const std::vector<std::string>& CollectiveOperatorNames();
bool IsCollectiveOperator(const std::string& op);

// Latency + bytes / bandwidth on a node's links. Within a machine every device reaches every peer
// at its own per-device, per-direction `intra` bandwidth (NVSwitch; PCIe through a switch), so an
// all-to-all costs latency + (bytes to same-machine peers) / intra bandwidth; bytes to peers on
// other machines go over `scale_out` (one NIC per device) at the same time, and the slower of the
// two finishes the collective. Ring collectives (all-reduce = reduce-scatter + all-gather) take
// (devices - 1) steps, each at the slowest link the ring crosses.
class LinkCollectiveCost : public CollectiveCost {
 public:
  LinkCollectiveCost(InterconnectSpec intra, std::optional<InterconnectSpec> scale_out);
  // The links of `node` (its interconnect and scale-out network). Error: a node of several
  // accelerators without an interconnect, or one that is no node of accelerators.
  static std::unique_ptr<LinkCollectiveCost> ForNode(const HardwareSpec& node);

  std::string name() const override { return "link-model"; }
  double AllToAllSeconds(double bytes_per_device, const CollectiveGroup& group) const override;
  double AllReduceSeconds(double bytes, const CollectiveGroup& group) const override;
  double ReduceScatterSeconds(double bytes, const CollectiveGroup& group) const override;
  double AllGatherSeconds(double bytes, const CollectiveGroup& group) const override;
  nlohmann::json Describe() const override;

 private:
  // One ring pass of `steps` steps moving bytes / devices each, at the slowest link crossed.
  double RingSeconds(double bytes, const CollectiveGroup& group, int64_t passes) const;
  const InterconnectSpec& SlowestLink(const CollectiveGroup& group) const;

  InterconnectSpec intra_;
  std::optional<InterconnectSpec> scale_out_;
};

}  // namespace moelab::model
