#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::model {

// Hardware as the cost models see it, schema "moelab.hardware/1" (docs/schemas.md). A preset is
// one of four kinds: an accelerator (with its usual host and host link), a host CPU alone, a link,
// or a node of several identical accelerators. All quantities in SI units.

// Peak FLOP/s by data type name ("fp32", "tf32", "fp16", "bf16", "fp8", "int8").
using PeakFlops = std::map<std::string, double>;

struct AcceleratorSpec {
  std::string display_name;
  PeakFlops peak_flops;
  double memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  int64_t sm_count = 0;  // 0 = unknown
  // A public on-demand cloud price of one accelerator per hour (plan capacity's cost), with where
  // it was quoted; unset where no public on-demand price was found.
  std::optional<double> price_usd_per_hour;
  std::string price_source;
};

struct HostSpec {
  std::string name;
  std::string cpu_name;
  int64_t cores = 0;
  PeakFlops peak_flops;
  double dram_bytes =
      0;  // 0: none for experts (a storage-tier machine: fit/storage_tier_hardware.h)
  double dram_bandwidth_bytes_per_s = 0;
  double storage_read_bandwidth_bytes_per_s = 0;
  // Reads the host keeps in flight at once; they share the read bandwidth (the simulator serves
  // them by processor sharing): the executor's offload reader keeps two
  // (fit/storage_tier_hardware.h), presets one (one read at a time at the full bandwidth).
  int64_t storage_reads_in_flight = 1;
  // The read bandwidth while the host computes beside the reads (a storage-tier machine, where
  // the reader shares the cores and the memory with the computation: validate measures both);
  // 0: reads run at storage_read_bandwidth_bytes_per_s whatever the host does.
  double storage_read_bandwidth_beside_compute_bytes_per_s = 0;
  // The rate the host computes at while storage reads are in flight, as a fraction of its rate
  // alone, beyond the checksum and copy the link charges (a storage-tier machine: the reader's
  // system calls, interrupts and memory traffic take from the cores the computation runs on;
  // fit/storage_tier_hardware.h derives it from the reader measured beside computation); 1: the
  // computation does not notice the reads.
  double compute_rate_while_storage_reads = 1;
};

struct LinkSpec {
  std::string name;
  double host_to_device_bandwidth_bytes_per_s = 0;
  double device_to_host_bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

struct InterconnectSpec {
  std::string kind;                  // "nvlink4", "pcie", ...
  double bandwidth_bytes_per_s = 0;  // per accelerator, per direction
  double latency_s = 0;
};

enum class HardwareKind { kAccelerator, kHost, kLink, kNode };

struct HardwareSpec {
  std::string name;
  std::string display_name;
  HardwareKind kind = HardwareKind::kAccelerator;
  std::optional<AcceleratorSpec> accelerator;
  int64_t accelerator_count = 0;
  std::optional<HostSpec> host;
  std::optional<LinkSpec> host_link;
  std::optional<InterconnectSpec> interconnect;  // between the accelerators of a node
  // A node preset spanning several machines ("nodes" > 1): accelerator_count counts every
  // accelerator, accelerators_per_node those one `interconnect` joins, and `scale_out` (InfiniBand,
  // RoCE: per accelerator, per direction, one NIC per accelerator) joins the machines. 0: one
  // machine holds them all.
  int64_t accelerators_per_node = 0;
  std::optional<InterconnectSpec> scale_out;
  // The "accelerator" is the host's own CPU (a storage-tier machine, fit/storage_tier_hardware.h):
  // an expert the policy runs "on the CPU" runs on the same cores after a read like any fetch, and
  // the link's work (the reader's checksum and copy) is done by those cores too.
  bool compute_device_is_host = false;
  std::vector<std::string> sources;

  bool has_accelerator() const { return accelerator.has_value() && accelerator_count > 0; }
  // Accelerators sharing one machine's interconnect (all of them on a single machine).
  int64_t AcceleratorsPerMachine() const {
    return accelerators_per_node > 0 ? accelerators_per_node : accelerator_count;
  }
};

std::string ToString(HardwareKind kind);

// Component parsers: `origin` names the file, `path` the field, in error messages.
AcceleratorSpec AcceleratorSpecFromJson(const nlohmann::json& json, const std::string& origin,
                                        const std::string& path);
HostSpec HostSpecFromJson(const nlohmann::json& json, const std::string& origin,
                          const std::string& path);
LinkSpec LinkSpecFromJson(const nlohmann::json& json, const std::string& origin,
                          const std::string& path);
InterconnectSpec InterconnectSpecFromJson(const nlohmann::json& json, const std::string& origin,
                                          const std::string& path);

nlohmann::json HardwareSpecToJson(const HardwareSpec& spec);

// Peak FLOP/s of the accelerator (or the host when there is none) for `dtype`; when the device
// lacks that type, the fallback order is bf16 -> fp16 -> fp32 and `used_dtype` says which.
double PeakFlopsFor(const PeakFlops& peak, const std::string& dtype, std::string* used_dtype);

}  // namespace moelab::model
