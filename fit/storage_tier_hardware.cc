#include "fit/storage_tier_hardware.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/limits.h"
#include "fit/cost_calibration.h"
#include "report/format.h"

namespace moelab::fit {

model::HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes,
                                                   double storage_read_bytes_per_s,
                                                   int64_t reads_in_flight) {
  if (reads_in_flight < 1)
    throw base::Error("storage tier: reads in flight must be at least 1, got " +
                      std::to_string(reads_in_flight));
  base::CheckCount(reads_in_flight, 1, base::kMaxReadsInFlight, "--reads-in-flight",
                   "the reads moelab run --offload-readers may keep in flight");
  if (!(memory_bytes > 0 && std::isfinite(memory_bytes)))
    throw base::Error("--memory must be a positive size");
  if (!(storage_read_bytes_per_s >= 0 && std::isfinite(storage_read_bytes_per_s))) {
    throw base::Error("storage tier: a measured storage read bandwidth must be >= 0 bytes/s");
  }
  // The times this hardware is built from are bounded as a hardware file's (docs/limits.md): a
  // 1e300 s storage read was written on as a hardware file. (fit latency takes any finite time:
  // a form whose residuals overflow is left out with a note.)
  for (size_t i = 0; i < profile.samples.size(); ++i) {
    const ProfileSample& s = profile.samples[i];
    if ((s.op == "storage_read" || s.op == "expert_reader" || s.op == "expert_load") &&
        s.median_s > base::kMaxSeconds) {
      throw base::Error(profile.origin + ": field 'samples[" + std::to_string(i) +
                        "].median_s': expected a time of at most 1e+06 seconds (docs/limits.md), "
                        "got " +
                        report::ShortestText(s.median_s));
    }
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
  // The executor's reader as the profile timed it at this many reads in flight (expert_reader):
  // alone, and beside computation.
  const ProfileSample* reader_alone = nullptr;
  const ProfileSample* reader_beside = nullptr;
  for (const ProfileSample& s : profile.samples) {
    if (s.op != "expert_reader" || !(s.bytes > 0) || !(s.median_s > 0)) continue;
    const nlohmann::json in_flight = s.shape.value("reads_in_flight", nlohmann::json());
    const nlohmann::json beside_compute = s.shape.value("beside_compute", nlohmann::json());
    if (!in_flight.is_number_integer() || in_flight.get<int64_t>() < 1 ||
        !beside_compute.is_boolean()) {
      throw base::Error(profile.origin + ": samples[" + std::to_string(s.index) +
                        "] (expert_reader): shape.reads_in_flight must be an integer >= 1 and "
                        "shape.beside_compute true or false (in " +
                        s.shape.dump() + ")");
    }
    if (in_flight.get<int64_t>() != reads_in_flight) continue;
    const bool beside = beside_compute.get<bool>();
    const ProfileSample*& slot = beside ? reader_beside : reader_alone;
    if (!slot || s.bytes > slot->bytes) slot = &s;
  }
  const auto rate = [](const ProfileSample* s) { return s ? s->bytes / s->median_s : 0.0; };
  if (storage_read_bytes_per_s > 0) {
    hardware.host->storage_read_bandwidth_bytes_per_s = storage_read_bytes_per_s;
    hardware.sources.push_back("storage tier: read bandwidth measured by the caller");
  } else if (reader_alone) {
    hardware.host->storage_read_bandwidth_bytes_per_s = rate(reader_alone);
    hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s = rate(reader_beside);
    hardware.sources.push_back(
        "storage tier: the executor's reader at " + std::to_string(reads_in_flight) +
        " reads in flight, expert_reader samples of " + profile.origin + " (alone" +
        (reader_beside ? ", and beside computation" : "; none beside computation") + ")");
  } else {
    hardware.host->storage_read_bandwidth_bytes_per_s = bandwidth;
    hardware.sources.push_back(
        "storage tier: " + profile.origin + " has no expert_reader sample at " +
        std::to_string(reads_in_flight) +
        " reads in flight; reads priced at storage_read's single stream, which can be well above "
        "what the executor's reader gets (profile again to measure it)");
  }
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
  if (storage_read_bytes_per_s <= 0 && reader_beside) {
    if (reader_beside->compute_rate > 0) {
      const double copy_s = reader_beside->bytes / link_bytes_per_s;
      hardware.host->compute_rate_while_storage_reads =
          ComputeRateWhileReading(reader_beside->compute_rate, copy_s, reader_beside->median_s);
      hardware.sources.push_back(
          "storage tier: the computation beside the reader ran at x" +
          report::FormatNumber(reader_beside->compute_rate, 3) +
          " of its rate alone (expert_reader of " + profile.origin +
          "); past the link's checksum and copy, x" +
          report::FormatNumber(hardware.host->compute_rate_while_storage_reads, 3) +
          " while reads are in flight");
    } else {
      hardware.sources.push_back(
          "storage tier: the expert_reader sample beside computation of " + profile.origin +
          " recorded no compute_rate (no pass outlasted two of the computation's steps); the "
          "computation is priced at its full rate while reads are in flight");
    }
  }
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

double ComputeRateWhileReading(double measured_compute_rate, double copy_seconds,
                               double read_seconds) {
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"measured compute rate", measured_compute_rate},
        {"copy seconds", copy_seconds},
        {"read seconds", read_seconds}}) {
    if (!(value > 0) || !std::isfinite(value)) {
      throw base::Error(std::string("compute rate while reading: the ") + name +
                        " must be > 0, got " + std::to_string(value));
    }
  }
  return std::min(1.0, measured_compute_rate + copy_seconds / read_seconds);
}

}  // namespace moelab::fit
