#include "fit/storage_tier_hardware.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/limits.h"
#include "fit/cost_calibration.h"
#include "report/format.h"

namespace moelab::fit {

namespace {

// The arguments and the profile's storage times, bounded before any work (docs/limits.md).
void CheckInputs(const Profile& profile, double memory_bytes, double storage_read_bytes_per_s,
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
  // 1e300 s storage read was written on as a hardware file.
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
}

// The storage_read samples the tier is priced from: the largest block gives the bandwidth, the
// smallest the per-read latency.
struct StorageReads {
  const ProfileSample* largest = nullptr;
  const ProfileSample* smallest = nullptr;
  double bandwidth_bytes_per_s = 0;  // the largest's bytes over its median
};

StorageReads FindStorageReads(const Profile& profile) {
  StorageReads reads;
  for (const ProfileSample& s : profile.samples) {
    if (s.op != "storage_read" || !(s.bytes > 0)) continue;
    if (!reads.largest || s.bytes > reads.largest->bytes) reads.largest = &s;
    if (!reads.smallest || s.bytes < reads.smallest->bytes) reads.smallest = &s;
  }
  if (!reads.largest) {
    throw base::Error(profile.origin +
                      ": no storage_read samples: profile with the storage_read operator "
                      "(moelab profile) to measure the storage tier");
  }
  reads.bandwidth_bytes_per_s = reads.largest->bytes / reads.largest->median_s;
  return reads;
}

// The executor's reader as the profile timed it at `reads_in_flight` (expert_reader), the largest
// block of each: alone, and beside computation (either may be missing).
struct ReaderSamples {
  const ProfileSample* alone = nullptr;
  const ProfileSample* beside_compute = nullptr;
};

ReaderSamples FindReaderSamples(const Profile& profile, int64_t reads_in_flight) {
  ReaderSamples reader;
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
    const ProfileSample*& slot = beside_compute.get<bool>() ? reader.beside_compute : reader.alone;
    if (!slot || s.bytes > slot->bytes) slot = &s;
  }
  return reader;
}

// Sets the host's storage read bandwidths (alone and beside computation) from the caller's
// measurement, else the executor's reader, else storage_read's single stream, and says which.
void PriceStorageReads(const Profile& profile, double storage_read_bytes_per_s,
                       int64_t reads_in_flight, const StorageReads& storage,
                       const ReaderSamples& reader, model::HardwareSpec& hardware) {
  const auto rate = [](const ProfileSample* s) { return s ? s->bytes / s->median_s : 0.0; };
  model::HostSpec& host = *hardware.host;
  if (storage_read_bytes_per_s > 0) {
    host.storage_read_bandwidth_bytes_per_s = storage_read_bytes_per_s;
    // Built in place: moving a temporary string of this literal into the vector made g++ 12.2
    // with the precompiled header warn (-Warray-bounds: memcpy past the 32-byte string object,
    // reading the move's short-string branch for a 52-character literal; a false positive).
    hardware.sources.emplace_back("storage tier: read bandwidth measured by the caller");
  } else if (reader.alone) {
    host.storage_read_bandwidth_bytes_per_s = rate(reader.alone);
    host.storage_read_bandwidth_beside_compute_bytes_per_s = rate(reader.beside_compute);
    hardware.sources.push_back(
        "storage tier: the executor's reader at " + std::to_string(reads_in_flight) +
        " reads in flight, expert_reader samples of " + profile.origin + " (alone" +
        (reader.beside_compute ? ", and beside computation" : "; none beside computation") + ")");
  } else {
    host.storage_read_bandwidth_bytes_per_s = storage.bandwidth_bytes_per_s;
    hardware.sources.push_back(
        "storage tier: " + profile.origin + " has no expert_reader sample at " +
        std::to_string(reads_in_flight) +
        " reads in flight; reads priced at storage_read's single stream, which can be well above "
        "what the executor's reader gets (profile again to measure it)");
  }
  host.storage_reads_in_flight = reads_in_flight;
}

// The link carries each read expert from the read buffer into its cache buffer: the reader
// checksums the payload and copies it, once per read, at the speed the profile's expert_load
// samples measured (the largest block: expert-sized), so the per-read latency of storage is
// charged here too. Profiles from before expert_load existed get 3 bytes of DRAM traffic per
// byte (read, read, write): 5.5-9.1 GB/s on the Xeon of results/offload-runtime.md, whose reader
// measured 4.3-4.8 GB/s. `load`: the expert_load sample used (null: DRAM bandwidth / 3).
struct ReaderLink {
  model::LinkSpec link;
  const ProfileSample* load = nullptr;
};

ReaderLink ReaderLinkFromProfile(const Profile& profile, double dram_bytes_per_s,
                                 const StorageReads& storage) {
  ReaderLink reader;
  for (const ProfileSample& s : profile.samples) {
    if (s.op == "expert_load" && s.bytes > 0 && s.median_s > 0 &&
        (!reader.load || s.bytes > reader.load->bytes))
      reader.load = &s;
  }
  if (!(dram_bytes_per_s > 0))
    throw base::Error(profile.origin +
                      ": field 'machine.limits.dram_read_bytes_per_s' must be positive");
  double link_bytes_per_s = dram_bytes_per_s / 3;
  if (reader.load) {
    link_bytes_per_s = reader.load->bytes / reader.load->median_s;
    reader.link.name = "read buffer to expert cache (the reader's checksum and copy, expert_load)";
  } else {
    reader.link.name = "read buffer to expert cache (checksum and copy at DRAM bandwidth / 3)";
  }
  reader.link.host_to_device_bandwidth_bytes_per_s = link_bytes_per_s;
  reader.link.device_to_host_bandwidth_bytes_per_s = link_bytes_per_s;  // nothing is written back
  reader.link.latency_s = std::max(
      0.0, storage.smallest->median_s - storage.smallest->bytes / storage.bandwidth_bytes_per_s);
  return reader;
}

// The profiled CPU as the simulator's compute device, with `memory_bytes` of memory (bf16 weights
// are multiplied with fp32 FMAs on AVX2: a profile without a bf16 peak gets the fp32 one).
model::AcceleratorSpec HostAsComputeDevice(const model::HostSpec& host, double memory_bytes) {
  model::AcceleratorSpec cpu;
  cpu.display_name = host.cpu_name + " as the compute device";
  cpu.peak_flops = host.peak_flops;
  if (!cpu.peak_flops.count("bf16") && cpu.peak_flops.count("fp32"))
    cpu.peak_flops["bf16"] = cpu.peak_flops["fp32"];
  cpu.memory_bytes = memory_bytes;
  cpu.memory_bandwidth_bytes_per_s = host.dram_bandwidth_bytes_per_s;
  return cpu;
}

// The computation's rate while reads are in flight, from the reader sample beside computation
// (ComputeRateWhileReading), and the source line saying so; 1 (left alone) without one.
void CoupleComputeToReads(const Profile& profile, const ProfileSample& beside,
                          double link_bytes_per_s, model::HardwareSpec& hardware) {
  if (!(beside.compute_rate > 0)) {
    hardware.sources.push_back(
        "storage tier: the expert_reader sample beside computation of " + profile.origin +
        " recorded no compute_rate (no pass outlasted two of the computation's steps); the "
        "computation is priced at its full rate while reads are in flight");
    return;
  }
  const double copy_s = beside.bytes / link_bytes_per_s;
  hardware.host->compute_rate_while_storage_reads =
      ComputeRateWhileReading(beside.compute_rate, copy_s, beside.median_s);
  hardware.sources.push_back(
      "storage tier: the computation beside the reader ran at x" +
      report::FormatNumber(beside.compute_rate, 3) + " of its rate alone (expert_reader of " +
      profile.origin + "); past the link's checksum and copy, x" +
      report::FormatNumber(hardware.host->compute_rate_while_storage_reads, 3) +
      " while reads are in flight");
}

}  // namespace

model::HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes,
                                                   double storage_read_bytes_per_s,
                                                   int64_t reads_in_flight) {
  CheckInputs(profile, memory_bytes, storage_read_bytes_per_s, reads_in_flight);
  model::HardwareSpec hardware =
      HardwareFromProfile(profile);  // the host; Error without machine.limits
  const StorageReads storage = FindStorageReads(profile);
  // No second memory tier: every byte of RAM the run may use is the compute device's memory
  // (--memory), so an expert that is not cached lives on storage -- fetched, or read to run from
  // its home copy (static-split's CPU layers) -- and pays a storage read.
  hardware.host->dram_bytes = 0;
  const ReaderSamples reader = FindReaderSamples(profile, reads_in_flight);
  PriceStorageReads(profile, storage_read_bytes_per_s, reads_in_flight, storage, reader, hardware);
  const ReaderLink link =
      ReaderLinkFromProfile(profile, hardware.host->dram_bandwidth_bytes_per_s, storage);

  const model::AcceleratorSpec cpu = HostAsComputeDevice(*hardware.host, memory_bytes);
  hardware.name = "storage-tier:" + profile.origin;
  hardware.display_name = cpu.display_name + ", experts on storage, no second memory tier";
  hardware.kind = model::HardwareKind::kAccelerator;
  hardware.accelerator = cpu;
  hardware.accelerator_count = 1;
  hardware.host_link = link.link;
  hardware.compute_device_is_host = true;
  if (storage_read_bytes_per_s <= 0 && reader.beside_compute)
    CoupleComputeToReads(profile, *reader.beside_compute,
                         link.link.host_to_device_bandwidth_bytes_per_s, hardware);
  hardware.sources.push_back(
      "storage tier: storage_read samples of " + profile.origin + " (" +
      std::to_string(static_cast<int64_t>(storage.largest->bytes)) + " and " +
      std::to_string(static_cast<int64_t>(storage.smallest->bytes)) + " bytes)");
  hardware.sources.push_back(
      link.load ? "storage tier link: expert_load sample of " + profile.origin + " (" +
                      std::to_string(static_cast<int64_t>(link.load->bytes)) + " bytes)"
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
