#include "fit/storage_tier_hardware.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "base/error.h"
#include "base/json_reader.h"

#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::fit {
namespace {

TEST(StorageTierHardware, TheCpuComputesAndExpertsLiveOnStorage) {
  const Profile profile = LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  const model::HardwareSpec hw = StorageTierHardwareFromProfile(profile, 3e9);
  ASSERT_TRUE(hw.has_accelerator());
  EXPECT_EQ(hw.kind, model::HardwareKind::kAccelerator);
  EXPECT_DOUBLE_EQ(hw.accelerator->memory_bytes, 3e9);
  EXPECT_DOUBLE_EQ(hw.accelerator->memory_bandwidth_bytes_per_s,
                   profile.limits->dram_read_bytes_per_s);
  EXPECT_DOUBLE_EQ(hw.accelerator->peak_flops.at("bf16"), hw.host->peak_flops.at("bf16"));
  double largest_bytes = 0, largest_s = 0, smallest_bytes = 1e30, smallest_s = 0;
  for (const ProfileSample& s : profile.samples) {
    if (s.op != "storage_read") continue;
    if (s.bytes > largest_bytes) largest_bytes = s.bytes, largest_s = s.median_s;
    if (s.bytes < smallest_bytes) smallest_bytes = s.bytes, smallest_s = s.median_s;
  }
  ASSERT_GT(largest_bytes, smallest_bytes);
  const double bandwidth = largest_bytes / largest_s;
  EXPECT_DOUBLE_EQ(hw.host_link->host_to_device_bandwidth_bytes_per_s,
                   profile.limits->dram_read_bytes_per_s / 3);
  EXPECT_DOUBLE_EQ(hw.host_link->latency_s, std::max(0.0, smallest_s - smallest_bytes / bandwidth));
  EXPECT_DOUBLE_EQ(hw.host->storage_read_bandwidth_bytes_per_s, bandwidth);
  // No second memory tier: experts outside the cache are on storage, and the CPU computes.
  EXPECT_EQ(hw.host->dram_bytes, 0);
  EXPECT_TRUE(hw.compute_device_is_host);
  // A probe at the executor's reader concurrency replaces the single-stream bandwidth.
  EXPECT_DOUBLE_EQ(
      StorageTierHardwareFromProfile(profile, 3e9, 1.5e9).host->storage_read_bandwidth_bytes_per_s,
      1.5e9);
  // One read in flight unless the executor's reader keeps more, and the file says so.
  EXPECT_EQ(hw.host->storage_reads_in_flight, 1);
  const model::HardwareSpec two = StorageTierHardwareFromProfile(profile, 3e9, 0, 2);
  EXPECT_EQ(two.host->storage_reads_in_flight, 2);
  EXPECT_EQ(model::HardwareSpecToJson(two)["host"]["storage_reads_in_flight"], 2);
  EXPECT_NE(testing::ErrorOf([&] {
              StorageTierHardwareFromProfile(profile, 3e9, 0, 0);
            }).find("reads in flight must be at least 1"),
            std::string::npos);
}

TEST(StorageTierHardware, TheLinkIsTheReadersMeasuredChecksumAndCopy) {
  Profile profile = LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  std::erase_if(profile.samples, [](const ProfileSample& s) { return s.op == "expert_load"; });
  ProfileSample small, large;
  small.op = large.op = "expert_load";
  small.device = large.device = "cpu";
  small.bytes = 1e6;
  small.median_s = 1e-4;  // 10 GB/s at 1 MB
  large.bytes = 4e6;
  large.median_s = 1e-3;  // 4 GB/s at the largest block: the one an expert read uses
  profile.samples.push_back(small);
  profile.samples.push_back(large);
  const model::HardwareSpec hw = StorageTierHardwareFromProfile(profile, 3e9);
  EXPECT_DOUBLE_EQ(hw.host_link->host_to_device_bandwidth_bytes_per_s, 4e9);
  EXPECT_NE(hw.host_link->name.find("expert_load"), std::string::npos);
  // The hardware file says so, and reads back.
  EXPECT_EQ(model::HardwareSpecToJson(hw).value("compute_device_is_host", false), true);
}

ProfileSample ReaderSample(double bytes, double seconds_per_expert, bool beside,
                           int64_t reads_in_flight) {
  ProfileSample s;
  s.op = "expert_reader";
  s.device = "cpu";
  s.tokens = 1;
  s.bytes = bytes;
  s.median_s = seconds_per_expert;
  s.shape = {{"bytes", bytes},
             {"beside_compute", beside},
             {"reads_in_flight", reads_in_flight},
             {"reader", "threads"}};
  return s;
}

// The executor's reader as the profile timed it prices the reads: alone, and beside computation
// (the simulator's rate while the host computes); only at the run's reads in flight.
TEST(StorageTierHardware, ReadsArePricedAtTheProfiledReaderAloneAndBesideComputation) {
  Profile profile = LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  profile.samples.push_back(ReaderSample(3e6, 3e-3, false, 2));  // 1 GB/s alone
  profile.samples.push_back(ReaderSample(3e6, 4e-3, true, 2));   // 0.75 GB/s beside
  profile.samples.push_back(ReaderSample(3e6, 1e-3, false, 1));  // another concurrency
  const model::HardwareSpec two = StorageTierHardwareFromProfile(profile, 3e9, 0, 2);
  EXPECT_DOUBLE_EQ(two.host->storage_read_bandwidth_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(two.host->storage_read_bandwidth_beside_compute_bytes_per_s, 0.75e9);
  const auto says = [](const model::HardwareSpec& hw, const std::string& text) {
    for (const std::string& source : hw.sources) {
      if (source.find(text) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(says(two, "expert_reader samples")) << model::HardwareSpecToJson(two).dump(1);
  // The hardware file carries both, and reads back.
  const nlohmann::json json = model::HardwareSpecToJson(two);
  EXPECT_DOUBLE_EQ(json["host"]["storage_read_bandwidth_beside_compute_bytes_per_s"].get<double>(),
                   0.75e9);

  // At one read in flight only the alone sample was taken: no rate beside computation.
  const model::HardwareSpec one = StorageTierHardwareFromProfile(profile, 3e9, 0, 1);
  EXPECT_DOUBLE_EQ(one.host->storage_read_bandwidth_bytes_per_s, 3e9);
  EXPECT_EQ(one.host->storage_read_bandwidth_beside_compute_bytes_per_s, 0);
  EXPECT_TRUE(says(one, "none beside computation"));

  // At a concurrency the profile did not time: storage_read's single stream, and it says so.
  double largest_bytes = 0, largest_s = 0;
  for (const ProfileSample& s : profile.samples) {
    if (s.op == "storage_read" && s.bytes > largest_bytes)
      largest_bytes = s.bytes, largest_s = s.median_s;
  }
  const model::HardwareSpec three = StorageTierHardwareFromProfile(profile, 3e9, 0, 3);
  EXPECT_DOUBLE_EQ(three.host->storage_read_bandwidth_bytes_per_s, largest_bytes / largest_s);
  EXPECT_EQ(three.host->storage_read_bandwidth_beside_compute_bytes_per_s, 0);
  EXPECT_TRUE(says(three, "no expert_reader sample at 3 reads in flight"));

  // A malformed sample is an error naming it, not a sample silently left out.
  Profile bad = profile;
  bad.samples.back().shape["reads_in_flight"] = "two";
  EXPECT_NE(testing::ErrorOf([&] {
              StorageTierHardwareFromProfile(bad, 3e9, 0, 2);
            }).find("(expert_reader): shape.reads_in_flight must be an integer >= 1"),
            std::string::npos);
  bad = profile;
  bad.samples.back().shape.erase("beside_compute");
  EXPECT_NE(testing::ErrorOf([&] {
              StorageTierHardwareFromProfile(bad, 3e9, 0, 2);
            }).find("shape.beside_compute true or false"),
            std::string::npos);

  // A bandwidth the caller measured replaces both (it sets the second itself).
  const model::HardwareSpec measured = StorageTierHardwareFromProfile(profile, 3e9, 2e9, 2);
  EXPECT_DOUBLE_EQ(measured.host->storage_read_bandwidth_bytes_per_s, 2e9);
  EXPECT_EQ(measured.host->storage_read_bandwidth_beside_compute_bytes_per_s, 0);
}

// The computation beside the reader ran at compute_rate of its rate alone; the simulator charges
// each read's checksum and copy (the link) to the cores itself, so the rest is the coupled rate:
// measured + copy / read seconds, at most 1.
TEST(StorageTierHardware, TheComputationBesideTheReaderGivesItsRateWhileReading) {
  EXPECT_DOUBLE_EQ(ComputeRateWhileReading(0.6, 1e-3, 4e-3), 0.85);
  EXPECT_DOUBLE_EQ(ComputeRateWhileReading(0.9, 1e-3, 4e-3), 1.0) << "never above its rate alone";
  for (const auto& [rate, copy_s, read_s] :
       {std::tuple{0.0, 1e-3, 4e-3}, {0.6, 0.0, 4e-3}, {0.6, 1e-3, -1.0}, {0.6, 1e-3, 1.0 / 0.0}}) {
    EXPECT_THROW(ComputeRateWhileReading(rate, copy_s, read_s), base::Error);
  }

  Profile profile = LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  profile.samples.push_back(ReaderSample(3e6, 3e-3, false, 2));
  ProfileSample beside = ReaderSample(3e6, 4e-3, true, 2);  // a read every 4 ms beside compute
  const model::HardwareSpec without = StorageTierHardwareFromProfile(profile, 3e9, 0, 2);
  EXPECT_EQ(without.host->compute_rate_while_storage_reads, 1) << "no sample recorded it";
  profile.samples.push_back(beside);
  const model::HardwareSpec unmeasured = StorageTierHardwareFromProfile(profile, 3e9, 0, 2);
  EXPECT_EQ(unmeasured.host->compute_rate_while_storage_reads, 1);
  bool said_unmeasured = false;
  for (const std::string& source : unmeasured.sources)
    said_unmeasured =
        said_unmeasured || source.find("recorded no compute_rate") != std::string::npos;
  EXPECT_TRUE(said_unmeasured) << "a beside sample without the rate says so";
  profile.samples.back().compute_rate = 0.6;
  const model::HardwareSpec hw = StorageTierHardwareFromProfile(profile, 3e9, 0, 2);
  const double copy_s = 3e6 / hw.host_link->host_to_device_bandwidth_bytes_per_s;
  EXPECT_DOUBLE_EQ(hw.host->compute_rate_while_storage_reads, std::min(1.0, 0.6 + copy_s / 4e-3));
  EXPECT_LT(hw.host->compute_rate_while_storage_reads, 1);
  bool said = false;
  for (const std::string& source : hw.sources)
    said = said || source.find("while reads are in flight") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(model::HardwareSpecToJson(hw)["host"]["compute_rate_while_storage_reads"],
            hw.host->compute_rate_while_storage_reads);
  // A caller's bandwidth comes without a rate of the computation: not coupled.
  EXPECT_EQ(
      StorageTierHardwareFromProfile(profile, 3e9, 2e9, 2).host->compute_rate_while_storage_reads,
      1);

  // The profile field is read from the file, and refused when not > 0.
  nlohmann::json json =
      base::JsonReader::ParseFile(testing::TestDataDir() / "profiles/quick-cpu.json");
  nlohmann::json sample = json["samples"][0];
  sample["compute_rate"] = 0.7;
  json["samples"].push_back(sample);
  EXPECT_DOUBLE_EQ(ProfileFromJson(json, "p.json").samples.back().compute_rate, 0.7);
  json["samples"].back()["compute_rate"] = 0;
  EXPECT_NE(testing::ErrorOf([&] { ProfileFromJson(json, "p.json"); }).find("compute_rate"),
            std::string::npos);
}

TEST(StorageTierHardware, RefusesAProfileWithoutStorageReads) {
  Profile profile = LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  std::erase_if(profile.samples, [](const ProfileSample& s) { return s.op == "storage_read"; });
  EXPECT_NE(testing::ErrorOf([&] {
              StorageTierHardwareFromProfile(profile, 3e9);
            }).find("no storage_read samples"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              StorageTierHardwareFromProfile(
                  LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json"), 0);
            }).find("--memory must be a positive size"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::fit
