#include "fit/storage_tier_hardware.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "fit/cost_calibration.h"

namespace moelab::fit {

model::HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes,
                                                   double storage_read_bytes_per_s,
                                                   int64_t reads_in_flight) {
  if (reads_in_flight < 1)
    throw base::Error("storage tier: reads in flight must be at least 1, got " +
                      std::to_string(reads_in_flight));
  if (!(memory_bytes > 0 && std::isfinite(memory_bytes)))
    throw base::Error("--memory must be a positive size");
  if (!(storage_read_bytes_per_s >= 0 && std::isfinite(storage_read_bytes_per_s))) {
    throw base::Error("storage tier: a measured storage read bandwidth must be >= 0 bytes/s");
  }
  model::HardwareSpec hardware =
      HardwareFromProfile(profile);  // the host; Error without machine.limits
  const ProfileSample* largest = nullptr;
  const ProfileSample* smallest = nullptr;
  for (const ProfileSample& s : profile.samples) {
    if (s.op != "storage_read" || !(s.bytes > 0)) continue;
    if (!largest || s.bytes > largest->bytes) largest = &s;
    if (!smallest || s.bytes < smallest->bytes) smallest = &s;
  }
  if (!largest) {
    throw base::Error(profile.origin +
                      ": no storage_read samples: profile with the storage_read operator "
                      "(moelab profile) to measure the storage tier");
  }
  const double bandwidth = largest->bytes / largest->median_s;
  // No second memory tier: every byte of RAM the run may use is the compute device's memory
  // (--memory), so an expert that is not cached lives on storage -- fetched, or read to run from
  // its home copy (static-split's CPU layers) -- and pays a storage read.
  hardware.host->dram_bytes = 0;
  hardware.host->storage_read_bandwidth_bytes_per_s =
      storage_read_bytes_per_s > 0 ? storage_read_bytes_per_s : bandwidth;
  hardware.host->storage_reads_in_flight = reads_in_flight;
  // The link carries each read expert from the read buffer into its cache buffer: the reader
  // checksums the payload and copies it, once per read, at the speed the profile's expert_load
  // samples measured (the largest block: expert-sized), so the per-read latency of storage is
  // charged here too. Profiles from before expert_load existed get 3 bytes of DRAM traffic per
  // byte (read, read, write): 5.5-9.1 GB/s on the Xeon of results/offload-runtime.md, whose reader
  // measured 4.3-4.8 GB/s.
  const ProfileSample* load = nullptr;
  for (const ProfileSample& s : profile.samples) {
    if (s.op == "expert_load" && s.bytes > 0 && s.median_s > 0 && (!load || s.bytes > load->bytes))
      load = &s;
  }
  const double dram = hardware.host->dram_bandwidth_bytes_per_s;
  if (!(dram > 0))
    throw base::Error(profile.origin +
                      ": field 'machine.limits.dram_read_bytes_per_s' must be positive");
  model::LinkSpec link;
  double link_bytes_per_s = dram / 3;
  if (load) {
    link_bytes_per_s = load->bytes / load->median_s;
    link.name = "read buffer to expert cache (the reader's checksum and copy, expert_load)";
  } else {
    link.name = "read buffer to expert cache (checksum and copy at DRAM bandwidth / 3)";
  }
  link.host_to_device_bandwidth_bytes_per_s = link_bytes_per_s;
  link.device_to_host_bandwidth_bytes_per_s = link_bytes_per_s;  // nothing is written back
  link.latency_s = std::max(0.0, smallest->median_s - smallest->bytes / bandwidth);

  model::AcceleratorSpec cpu;
  cpu.display_name = hardware.host->cpu_name + " as the compute device";
  cpu.peak_flops = hardware.host->peak_flops;
  if (!cpu.peak_flops.count("bf16") && cpu.peak_flops.count("fp32"))
    cpu.peak_flops["bf16"] = cpu.peak_flops["fp32"];
  cpu.memory_bytes = memory_bytes;
  cpu.memory_bandwidth_bytes_per_s = hardware.host->dram_bandwidth_bytes_per_s;

  hardware.name = "storage-tier:" + profile.origin;
  hardware.display_name = cpu.display_name + ", experts on storage, no second memory tier";
  hardware.kind = model::HardwareKind::kAccelerator;
  hardware.accelerator = cpu;
  hardware.accelerator_count = 1;
  hardware.host_link = link;
  hardware.compute_device_is_host = true;
  hardware.sources.push_back("storage tier: storage_read samples of " + profile.origin + " (" +
                             std::to_string(static_cast<int64_t>(largest->bytes)) + " and " +
                             std::to_string(static_cast<int64_t>(smallest->bytes)) + " bytes)");
  hardware.sources.push_back(load ? "storage tier link: expert_load sample of " + profile.origin +
                                        " (" + std::to_string(static_cast<int64_t>(load->bytes)) +
                                        " bytes)"
                                  : "storage tier link: " + profile.origin +
                                        " has no expert_load samples; DRAM bandwidth / 3 assumed");
  return hardware;
}

}  // namespace moelab::fit
