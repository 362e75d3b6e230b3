#include "sim/offload_simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "model/forward_cost.h"
#include "model/parameter_count.h"
#include "policies/calibration.h"
#include "routing/routing_source.h"
#include "sim/engine.h"
#include "tests/sim/sim_test_util.h"

namespace moelab::sim {
namespace {

using testing::MixtralPopularity;
using testing::SimConfigFor;

const std::vector<std::string> kPolicies = {"resident",     "on-demand", "static-split",
                                            "lru-prefetch", "fiddler",   "fmoe"};

std::string Describe(const SimConfig& c) {
  return c.model.name + " on " + c.hardware.name + ", " + c.policy + ", " +
         ToString(c.workload.kind) + ", routing " + c.routing.text +
         (c.accelerator_bytes ? ", memory " + std::to_string(*c.accelerator_bytes / 1e9) + " GB"
                              : "");
}

// Workloads small enough to run many of.
std::vector<Workload> SmallWorkloads() {
  std::vector<Workload> list;
  Workload decode;
  decode.prompt_tokens = 16;
  decode.output_tokens = 6;
  list.push_back(decode);
  Workload prefill = decode;
  prefill.kind = WorkloadKind::kPrefill;
  prefill.prompt_tokens = 96;
  list.push_back(prefill);
  Workload beam = decode;
  beam.kind = WorkloadKind::kBeam;
  beam.beam_width = 4;
  beam.output_tokens = 4;
  list.push_back(beam);
  Workload batch = decode;
  batch.kind = WorkloadKind::kBatch;
  batch.batch = 4;
  batch.output_tokens = 4;
  list.push_back(batch);
  Workload verify = decode;
  verify.kind = WorkloadKind::kVerify;
  verify.batch = 2;
  verify.gamma = 3;
  list.push_back(verify);
  return list;
}

// Accelerators whose memory bandwidth is at least 7x their host's DRAM bandwidth: an expert run
// on the CPU takes longer than several on the accelerator, so moving work to the host cannot
// beat keeping everything on the accelerator (see the counterexample below).
const char* const kFastAccelerators[] = {"rtx-3090", "a100-40gb-pcie"};

TEST(OffloadSimulator, ResidentIsNeverSlowerThanAnyPolicy) {
  int compared = 0, skipped = 0;
  for (const char* model : {"mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2-lite"}) {
    for (const char* hardware : kFastAccelerators) {
      for (const Workload& workload : SmallWorkloads()) {
        for (const char* routing : {"uniform", "correlated:locality=0.3,layer=0.5"}) {
          SimConfig config = SimConfigFor(model, hardware, "resident");
          config.workload = workload;
          config.routing = routing::ParseRoutingSpec(routing);
          if (std::string(model) == "mixtral-8x7b")
            config.model.bits.experts = 4;  // quantized transfers
          const SimResult ideal = testing::Simulate(config);
          for (const std::string& policy : kPolicies) {
            config.policy = policy;
            SimResult result;
            try {
              result = testing::Simulate(config);
            } catch (const base::Error&) {
              // A policy that cannot run in this memory (e.g. lru-prefetch without one expert per
              // layer) is not a counterexample.
              ++skipped;
              continue;
            }
            ++compared;
            const double slack = 1e-12 * ideal.total_s;
            EXPECT_LE(ideal.total_s, result.total_s + slack) << Describe(config);
            EXPECT_LE(ideal.ttft_s, result.ttft_s + slack) << Describe(config);
            if (ideal.tpot_s && result.tpot_s) {
              EXPECT_LE(*ideal.tpot_s, *result.tpot_s + slack) << Describe(config);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 300);  // 360 runs, a few policies refused for lack of memory
  EXPECT_LT(skipped, compared / 5);
}

// The property above is not a law of the model: when the host's DRAM bandwidth rivals the
// accelerator's (T4 320 GB/s vs Xeon 6248 141 GB/s), Fiddler running the unplaced experts on the
// CPU *at the same time* as the placed ones on the GPU adds the two bandwidths, and a prefill
// that activates many experts per layer finishes sooner than with everything on the GPU. For the
// same reason more memory (more experts placed, fewer on the CPU) can make fiddler slower there.
TEST(OffloadSimulator, HybridExecutionBeatsResidentWhenTheHostRivalsTheAccelerator) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "t4", "resident");
  config.model.bits.experts = 4;
  config.workload.prompt_tokens = 16;
  const SimResult resident = testing::Simulate(config);
  config.policy = "fiddler";
  const SimResult fiddler = testing::Simulate(config);
  EXPECT_LT(fiddler.ttft_s, resident.ttft_s);
  EXPECT_GT(fiddler.cpu_runs, 0);
  EXPECT_GT(*fiddler.tpot_s, *resident.tpot_s);  // one token per step: no such gain
}

// More accelerator memory never makes lru-prefetch or fiddler slower on the same routing (fiddler
// on accelerators much faster than their host; see the counterexample above).
TEST(OffloadSimulator, MoreAcceleratorMemoryIsNeverSlower) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"lru-prefetch", "rtx-3090"},
                                                                  {"lru-prefetch", "t4"},
                                                                  {"fiddler", "rtx-3090"},
                                                                  {"fiddler", "a100-40gb-pcie"}};
  for (const auto& [policy, hardware] : cases) {
    {
      for (const Workload& workload : SmallWorkloads()) {
        for (const std::string& routing :
             {std::string("uniform"), std::string("correlated:locality=0.4,layer=0.6"),
              "popularity:" + MixtralPopularity()}) {
          if (routing.starts_with("popularity:") && !std::filesystem::exists(MixtralPopularity()))
            continue;
          SimConfig config = SimConfigFor("mixtral-8x7b", hardware, policy);
          config.workload = workload;
          config.routing = routing::ParseRoutingSpec(routing);
          config.model.bits.experts = 4;  // 88 MB experts: 14 to 256 slots across the sweep
          double previous_total = 0, previous_ttft = 0, previous_tpot = 0;
          bool first = true;
          for (double gigabytes = 6; gigabytes <= 30; gigabytes += 2) {
            config.accelerator_bytes = gigabytes * 1e9;
            SimResult result;
            try {
              result = testing::Simulate(config);
            } catch (const base::Error&) {
              EXPECT_TRUE(first) << "a larger memory failed after a smaller one ran: "
                                 << Describe(config);
              continue;
            }
            if (!first) {
              EXPECT_LE(result.total_s, previous_total * (1 + 1e-12)) << Describe(config);
              EXPECT_LE(result.ttft_s, previous_ttft * (1 + 1e-12)) << Describe(config);
              if (result.tpot_s) {
                EXPECT_LE(*result.tpot_s, previous_tpot * (1 + 1e-12)) << Describe(config);
              }
            }
            first = false;
            previous_total = result.total_s;
            previous_ttft = result.ttft_s;
            previous_tpot = result.tpot_s.value_or(0);
          }
          EXPECT_FALSE(first) << "no memory size ran: " << Describe(config);
        }
      }
    }
  }
}

// Per-layer LRU of k experts out of E, K experts per token, independent uniform routing: a
// requested expert is cached with probability exactly k / E in the stationary regime (derivation
// in tests/policies/lru_prefetch_test.cc and sim/README.md). lru-prefetch without prefetching
// is that cache.
TEST(OffloadSimulator, LruHitRateOnUniformRoutingMatchesTheClosedForm) {
  for (int64_t k = 1; k <= 7; ++k) {
    SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "lru-prefetch");
    config.accelerator_bytes = 400e9;
    config.policy_options.cache_per_layer = k;
    config.policy_options.prefetch = 0;
    config.workload.prompt_tokens = 32;
    config.workload.output_tokens = 600;
    const SimResult result = testing::Simulate(config);
    EXPECT_NEAR(result.hit_rate(), static_cast<double>(k) / 8.0, 0.012) << "k " << k;
    EXPECT_EQ(result.prefetches, 0);
  }
}

TEST(OffloadSimulator, BytesMovedAreFetchesTimesExpertBytes) {
  for (const std::string& policy : kPolicies) {
    for (const Workload& workload : SmallWorkloads()) {
      SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", policy);
      config.workload = workload;
      config.routing = routing::ParseRoutingSpec("correlated:locality=0.3,layer=0.7");
      const SimResult r = testing::Simulate(config);
      const double expert_bytes = static_cast<double>(model::ExpertBytes(config.model));
      EXPECT_EQ(r.expert_bytes, model::ExpertBytes(config.model));
      EXPECT_EQ(
          r.bytes_h2d_expert_weights,
          static_cast<double>(r.demand_fetches + r.transient_fetches + r.prefetches) * expert_bytes)
          << policy;
      EXPECT_EQ(r.expert_activations,
                r.hits + r.inflight_hits + r.demand_fetches + r.transient_fetches + r.cpu_runs)
          << policy;
      const double reads = r.bytes_storage_read / expert_bytes;
      EXPECT_EQ(reads, std::floor(reads)) << policy;
      const double h2d = config.hardware.host_link->host_to_device_bandwidth_bytes_per_s;
      EXPECT_GE(r.busy_s[static_cast<int>(Resource::kHostToDevice)] * (1 + 1e-12),
                (r.bytes_h2d_expert_weights + r.bytes_h2d_activations) / h2d)
          << policy;
      if (policy == "on-demand") {
        const int64_t misses = r.expert_activations - r.hits - r.inflight_hits;
        EXPECT_EQ(r.bytes_h2d_expert_weights, static_cast<double>(misses) * expert_bytes);
      }
      if (policy == "resident") {
        EXPECT_EQ(r.bytes_h2d_expert_weights, 0.0);
      }
    }
  }
}

TEST(OffloadSimulator, SameSeedSameBytesOtherSeedOtherRouting) {
  for (const std::string& policy : kPolicies) {
    SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", policy);
    config.routing = routing::ParseRoutingSpec("correlated:locality=0.3,layer=0.5");
    config.record_timeline = true;
    const SimResult a = testing::Simulate(config), b = testing::Simulate(config);
    EXPECT_EQ(a.ToJson().dump(), b.ToJson().dump()) << policy;
    EXPECT_EQ(a.TimelineJson(), b.TimelineJson()) << policy;
    config.seed = 6;
    EXPECT_NE(testing::Simulate(config).ToJson().dump(), a.ToJson().dump()) << policy;
  }
}

TEST(OffloadSimulator, TimelineIsChromeTraceEventsMatchingTheBusyTimes) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "fiddler");
  config.record_timeline = true;
  const SimResult r = testing::Simulate(config);
  const nlohmann::json trace = nlohmann::json::parse(r.TimelineJson());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::map<std::pair<int, int>, double> busy_us;
  int complete = 0;
  for (const auto& event : trace["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph") && event.contains("pid") && event.contains("tid") &&
                event.contains("name"));
    if (event["ph"] == "M") continue;
    ASSERT_EQ(event["ph"], "X");
    ++complete;
    EXPECT_GE(event["dur"].get<double>(), 0);
    EXPECT_GE(event["ts"].get<double>(), 0);
    EXPECT_LE(event["ts"].get<double>() + event["dur"].get<double>(), r.total_s * 1e6 + 1);
    busy_us[{event["pid"].get<int>(), event["tid"].get<int>()}] += event["dur"].get<double>();
  }
  EXPECT_EQ(complete, static_cast<int>(r.timeline.size()));
  const std::pair<int, int> accelerator{1, 1}, cpu{2, 1};
  EXPECT_NEAR(busy_us[accelerator], r.busy_s[static_cast<int>(Resource::kAcceleratorCompute)] * 1e6,
              1.0);
  EXPECT_NEAR(busy_us[cpu], r.busy_s[static_cast<int>(Resource::kCpuCompute)] * 1e6, 1.0);
  EXPECT_GT(busy_us[cpu], 0);  // fiddler ran experts on the CPU
}

// Where simulator and closed form must agree: everything resident, one token, the roofline of
// the whole forward pass (model/forward_cost.h) -- the simulator launches each of the K experts
// separately (K - 1 extra launches per layer) and otherwise adds the same operators.
TEST(OffloadSimulator, ResidentDecodeStepMatchesTheAnalyticForwardCost) {
  for (const char* model : {"mixtral-8x7b", "qwen1.5-moe-a2.7b"}) {
    SimConfig config = SimConfigFor(model, "h100-sxm", "resident");
    config.workload.prompt_tokens = 100;
    config.workload.output_tokens = 2;  // one decode step at context 100
    const SimResult r = testing::Simulate(config);
    model::ForwardShape shape;
    shape.context_length = 100;
    const double analytic =
        model::EstimateForwardCost(config.model, config.hardware, shape, model::CostParameters{})
            .time_s;
    const double extra_launches =
        static_cast<double>(config.model.num_moe_layers() * (config.model.moe->top_k - 1)) *
        model::CostParameters{}.kernel_launch_s;
    EXPECT_NEAR(*r.tpot_s, analytic + extra_launches, 1e-3 * analytic) << model;
  }
}

TEST(OffloadSimulator, FullMemoryMakesEveryPolicyTheIdeal) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "resident");
  config.accelerator_bytes = 200e9;
  const double ideal = testing::Simulate(config).total_s;
  for (const char* policy : {"static-split", "fiddler", "on-demand", "fmoe"}) {
    config.policy = policy;
    const SimResult r = testing::Simulate(config);
    EXPECT_NEAR(r.total_s, ideal, 1e-12 * ideal) << policy;
    EXPECT_EQ(r.hit_rate(), 1.0) << policy;
  }
}

TEST(OffloadSimulator, MemoryTiersAndDevices) {
  // Mixtral in 16 bits (93 GB) does not fit a 64 GB host: the least popular experts are read
  // from storage whenever used.
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "on-demand");
  SimResult r = testing::Simulate(config);
  EXPECT_GT(r.experts_on_storage, 0);
  EXPECT_GT(r.bytes_storage_read, 0);
  config.model.bits.experts = 4;  // 23 GB of experts: all in host RAM
  r = testing::Simulate(config);
  EXPECT_EQ(r.experts_on_storage, 0);
  EXPECT_EQ(r.bytes_storage_read, 0);
  // static-split: hidden states cross to the CPU once per pass and back for the LM head... on
  // the CPU side no transfer is needed for CPU experts.
  config.policy = "static-split";
  config.policy_options.gpu_layers = 8;
  r = testing::Simulate(config);
  EXPECT_EQ(r.policy_options[0].second, 8);
  EXPECT_GT(r.bytes_d2h_activations, 0);
  EXPECT_GT(r.busy_s[static_cast<int>(Resource::kCpuCompute)], 0);
  EXPECT_EQ(r.bytes_h2d_expert_weights, 0);
  EXPECT_EQ(r.cpu_runs + r.hits, r.expert_activations);
  // resident on a model larger than the memory: runs (the ideal) but says it does not fit.
  config.policy = "resident";
  config.policy_options = {};
  config.model.bits.experts = 16;
  r = testing::Simulate(config);
  EXPECT_FALSE(r.fits_accelerator);
}

// A storage-tier machine (fit/storage_tier_hardware.h): the "accelerator" is the host CPU, no host
// RAM for experts, every core computing; 4 layers of Mixtral.
SimConfig StorageTierConfig(const std::string& policy) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", policy);
  config.model.num_layers = 4;
  config.hardware.host->dram_bytes = 0;
  config.hardware.compute_device_is_host = true;
  config.hardware.accelerator->memory_bytes = 30e9;
  config.cpu_threads = config.hardware.host->cores;
  return config;
}

TEST(OffloadSimulator, OnAHostComputeDeviceEveryExpertRunsOnTheSameCores) {
  // static-split's "CPU" experts are read, checked and run on the same cores, and with no core to
  // spare for the reader its checksum and copy take compute time.
  SimConfig config = StorageTierConfig("static-split");
  config.policy_options.gpu_layers = 2;
  SimResult shared = testing::Simulate(config);
  EXPECT_GT(shared.cpu_runs, 0);
  EXPECT_EQ(shared.busy_s[static_cast<int>(Resource::kCpuCompute)], 0);
  EXPECT_EQ(shared.bytes_d2h_activations + shared.bytes_h2d_activations, 0);
  EXPECT_DOUBLE_EQ(shared.bytes_h2d_expert_weights, shared.bytes_storage_read);
  EXPECT_EQ(shared.busy_s[static_cast<int>(Resource::kHostToDevice)], 0);
  // A spare core: the reader's work runs beside the computation, on the link.
  config.cpu_threads = config.hardware.host->cores - 1;
  SimResult spare = testing::Simulate(config);
  EXPECT_GT(spare.busy_s[static_cast<int>(Resource::kHostToDevice)], 0);
  const auto busy = [](const SimResult& r, Resource resource) {
    return r.busy_s[static_cast<int>(resource)];
  };
  EXPECT_NEAR(
      busy(shared, Resource::kAcceleratorCompute) - busy(spare, Resource::kAcceleratorCompute),
      busy(spare, Resource::kHostToDevice), 1e-9 * busy(shared, Resource::kAcceleratorCompute))
      << "the copies move from the link to the compute resource, no more, no less";
}

TEST(OffloadSimulator, OnAHostComputeDeviceThePassesCycleThroughThePlannedRam) {
  // The working set that decides the CPU's cache regime: the weights beside the routed experts,
  // the expert slots (all experts at most), the staging buffers and the KV cache.
  for (const char* policy : {"static-split", "on-demand", "stream-all"}) {
    SimConfig config = StorageTierConfig(policy);
    if (std::string(policy) == "static-split") config.policy_options.gpu_layers = 2;
    const SimResult r = testing::Simulate(config);
    const double resident =
        static_cast<double>(std::min(r.expert_slots, r.experts_total) + r.staging_buffers);
    EXPECT_GT(resident, 0) << policy;
    EXPECT_DOUBLE_EQ(r.compute_working_set_bytes,
                     model::PassWorkingSetBytes(config.model, resident, r.kv_bytes))
        << policy;
    if (std::string(policy) == "static-split") {
      EXPECT_LT(r.compute_working_set_bytes, model::PassWorkingSetBytes(config.model, 4 * 8, 0))
          << "two of four layers' experts in RAM";
    }
  }
  // The latency model reported is priced in that working set (which passes are is
  // OnAHostComputeDeviceTheCacheRegimeEndsWithTheFirstRead's).
  SimConfig probed = StorageTierConfig("on-demand");
  probed.accelerator_costs = std::make_shared<testing::WorkingSetProbe>();
  probed.host_costs = std::make_shared<testing::WorkingSetProbe>();
  const SimResult r = testing::Simulate(probed);
  ASSERT_GT(r.compute_working_set_bytes, 0);
  EXPECT_EQ(r.latency.gpu_s, 1.0 + r.compute_working_set_bytes);
  EXPECT_EQ(r.latency.cpu_base_s + r.latency.cpu_per_token_s, 1.0 + r.compute_working_set_bytes);
  // An accelerator's memory is no CPU cache: left to the source's default.
  EXPECT_EQ(testing::Simulate(SimConfigFor("mixtral-8x7b", "rtx-3090", "on-demand"))
                .compute_working_set_bytes,
            0.0);
}

// Records the working sets it was asked to price in, in order.
class WorkingSetRecorder : public testing::WorkingSetProbe {
 public:
  model::ForwardCost Forward(const model::MoeModelSpec&,
                             const model::ForwardShape& shape) const override {
    asked.push_back(shape.working_set_bytes);
    model::ForwardCost cost;
    cost.Add(model::Operator::kAttention, 0, 0, std::isinf(shape.working_set_bytes) ? 2e-3 : 1e-3);
    cost.Total();
    return cost;
  }
  double ExpertSeconds(const model::MoeModelSpec&, int64_t tokens,
                       double working_set_bytes) const override {
    asked.push_back(working_set_bytes);
    return static_cast<double>(tokens) * (std::isinf(working_set_bytes) ? 2e-3 : 1e-3);
  }
  mutable std::vector<double> asked;
};

TEST(OffloadSimulator, OnAHostComputeDeviceTheCacheRegimeEndsWithTheFirstRead) {
  // The first pass is priced from DRAM: no earlier pass brought the weights into the cache. The
  // passes after it, in the planned RAM's working set while no expert has been read from storage;
  // from the pass after the first read on, beyond every cache again (the executor's passes ran at
  // DRAM speed once reads went through), and the report says from which passes.
  for (const double ram_bytes : {30e9, 5e9}) {
    SimConfig config = StorageTierConfig("on-demand");
    config.hardware.accelerator->memory_bytes = ram_bytes;
    auto recorder = std::make_shared<WorkingSetRecorder>();
    config.accelerator_costs = recorder;
    config.host_costs = recorder;
    const SimResult r = testing::Simulate(config);
    const bool reads = r.bytes_storage_read > 0;
    EXPECT_EQ(reads, ram_bytes < 10e9) << "every expert fits in 30 GB; not in 5 GB";
    const double working_set = r.compute_working_set_bytes;
    ASSERT_GT(working_set, 0);
    const std::vector<double>& asked = recorder->asked;
    const auto unbounded = [](double bytes) { return std::isinf(bytes); };
    // Before the first pass: the latency model, priced at the default (0), then in the working set.
    const auto first_pass = std::find_if(asked.begin(), asked.end(), unbounded);
    ASSERT_NE(first_pass, asked.end()) << "the first pass is priced from DRAM";
    EXPECT_TRUE(std::all_of(asked.begin(), first_pass,
                            [&](double bytes) { return bytes == 0 || bytes == working_set; }));
    EXPECT_NE(std::find(asked.begin(), first_pass, working_set), first_pass);
    const auto after_first_pass = std::find_if_not(first_pass, asked.end(), unbounded);
    const nlohmann::json memory = r.ToJson()["memory"];
    if (!reads) {
      EXPECT_FALSE(r.compute_from_dram_from_pass.has_value());
      ASSERT_TRUE(r.compute_in_working_set_from_pass.has_value());
      EXPECT_EQ(*r.compute_in_working_set_from_pass, 1);
      ASSERT_NE(after_first_pass, asked.end()) << "the decode passes in the working set";
      EXPECT_TRUE(std::all_of(after_first_pass, asked.end(),
                              [&](double bytes) { return bytes == working_set; }));
      EXPECT_EQ(memory["compute_in_working_set_from_pass"], 1);
      EXPECT_TRUE(memory["compute_from_dram_from_pass"].is_null());
      continue;
    }
    ASSERT_TRUE(r.compute_from_dram_from_pass.has_value());
    EXPECT_EQ(*r.compute_from_dram_from_pass, 1)
        << "the prefill reads; the first decode pass is after it";
    EXPECT_FALSE(r.compute_in_working_set_from_pass.has_value());
    EXPECT_EQ(after_first_pass, asked.end())
        << "the first pass read, so no pass of the run is priced in the working set";
    EXPECT_EQ(memory["compute_from_dram_from_pass"], 1);
    EXPECT_TRUE(memory["compute_in_working_set_from_pass"].is_null());
  }
}

// stream-all prefilling 64 tokens on the storage-tier machine, with its timeline.
SimConfig StreamAllPrefillOnStorage() {
  SimConfig config = StorageTierConfig("stream-all");
  config.workload.kind = WorkloadKind::kPrefill;
  config.workload.prompt_tokens = 64;
  config.record_timeline = true;
  return config;
}

TEST(OffloadSimulator, OnAHostComputeDeviceReadsRunAtTheirRateBesideComputation) {
  // A storage-tier machine whose reads run at half their bandwidth while the host computes: each
  // read's time alone is spent at full rate outside the computation and at half rate inside it
  // (one read in flight: its duration minus half its overlap with compute ops equals its time
  // alone); the reader's own checksum and copy do not slow it. Same bytes, longer prefill.
  SimConfig config = StreamAllPrefillOnStorage();
  const SimResult alone = testing::Simulate(config);
  const double bandwidth = config.hardware.host->storage_read_bandwidth_bytes_per_s;
  config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s = bandwidth;
  const SimResult same = testing::Simulate(config);
  EXPECT_DOUBLE_EQ(same.ttft_s, alone.ttft_s) << "the same rate beside computation changes nothing";
  config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s = bandwidth / 2;
  const SimResult slowed = testing::Simulate(config);
  EXPECT_DOUBLE_EQ(slowed.bytes_storage_read, alone.bytes_storage_read);
  EXPECT_GT(slowed.ttft_s, alone.ttft_s);
  const double read_s = static_cast<double>(model::ExpertBytes(config.model)) / bandwidth;
  int overlapped = 0;
  for (const SimResult::TimelineEntry& read : slowed.timeline) {
    if (read.resource != Resource::kStorageRead) continue;
    double overlap_s = 0;
    for (const SimResult::TimelineEntry& op : slowed.timeline) {
      if (op.resource != Resource::kAcceleratorCompute || op.kind == kExpertCopy) continue;
      overlap_s +=
          std::max(0.0, std::min(read.start_s + read.duration_s, op.start_s + op.duration_s) -
                            std::max(read.start_s, op.start_s));
    }
    overlapped += overlap_s > 0;
    EXPECT_NEAR(read.duration_s - overlap_s / 2, read_s, 1e-9 * read_s);
  }
  EXPECT_GT(overlapped, 0) << "some reads run beside computation";
  // Where the compute device is not the host (a GPU), the field changes nothing.
  config.hardware.compute_device_is_host = false;
  config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s = 0;
  const SimResult gpu = testing::Simulate(config);
  config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s = bandwidth / 2;
  EXPECT_DOUBLE_EQ(testing::Simulate(config).ttft_s, gpu.ttft_s);
}

TEST(OffloadSimulator, OnAHostComputeDeviceTheComputationSlowsWhileReadsAreInFlight) {
  // The reader's system calls and interrupts take from the cores: with the computation at half
  // its rate while a read is in flight, every compute op (the reader's checksum and copy too) is
  // its time alone spent at full rate outside the reads and at half rate inside them; the same
  // decisions and bytes, a longer prefill. At 1 nothing changes.
  SimConfig config = StreamAllPrefillOnStorage();
  const SimResult alone = testing::Simulate(config);
  config.hardware.host->compute_rate_while_storage_reads = 1;
  EXPECT_DOUBLE_EQ(testing::Simulate(config).ttft_s, alone.ttft_s);
  config.hardware.host->compute_rate_while_storage_reads = 0.5;
  const SimResult slowed = testing::Simulate(config);
  EXPECT_DOUBLE_EQ(slowed.bytes_storage_read, alone.bytes_storage_read);
  EXPECT_EQ(slowed.prefetches, alone.prefetches);
  EXPECT_GE(slowed.ttft_s, alone.ttft_s);
  {
    // This prefill waits for its reads; with a disk fifty times as fast the computation is what
    // the pass waits for, and its slowdown shows in the TTFT.
    SimConfig fast = config;
    fast.hardware.host->storage_read_bandwidth_bytes_per_s *= 50;
    const SimResult slowed_fast = testing::Simulate(fast);
    fast.hardware.host->compute_rate_while_storage_reads = 1;
    EXPECT_GT(slowed_fast.ttft_s, testing::Simulate(fast).ttft_s);
  }
  const auto key = [](const SimResult::TimelineEntry& e) {
    return std::make_tuple(e.pass, e.kind, e.layer, e.expert);
  };
  std::map<std::tuple<int64_t, uint8_t, int32_t, int32_t>, double> alone_s;
  for (const SimResult::TimelineEntry& e : alone.timeline) {
    if (e.resource == Resource::kAcceleratorCompute) alone_s[key(e)] = e.duration_s;
  }
  int overlapped = 0, compute_ops = 0;
  for (const SimResult::TimelineEntry& op : slowed.timeline) {
    if (op.resource != Resource::kAcceleratorCompute) continue;
    ++compute_ops;
    double overlap_s = 0;  // one read in flight at a time: the reads do not overlap each other
    for (const SimResult::TimelineEntry& read : slowed.timeline) {
      if (read.resource != Resource::kStorageRead) continue;
      overlap_s +=
          std::max(0.0, std::min(read.start_s + read.duration_s, op.start_s + op.duration_s) -
                            std::max(read.start_s, op.start_s));
    }
    overlapped += overlap_s > 0;
    ASSERT_TRUE(alone_s.count(key(op)));
    const double expected = alone_s[key(op)];
    EXPECT_NEAR(op.duration_s - overlap_s / 2, expected, 1e-9 + 1e-9 * expected);
  }
  EXPECT_GT(compute_ops, 0);
  EXPECT_GT(overlapped, 0) << "some compute ops run while a read is in flight";
  // Where the compute device is not the host (a GPU), the field changes nothing.
  config.hardware.compute_device_is_host = false;
  config.hardware.host->compute_rate_while_storage_reads = 1;
  const SimResult gpu = testing::Simulate(config);
  config.hardware.host->compute_rate_while_storage_reads = 0.5;
  EXPECT_DOUBLE_EQ(testing::Simulate(config).ttft_s, gpu.ttft_s);
}

TEST(OffloadSimulator, ReadsInFlightShareTheDiskSoTheFirstLandsLater) {
  // Two reads in flight (the executor's reader) at the same total bandwidth: the same bytes and
  // storage busy time, but a layer's first expert lands after two reads' time, not one, so a
  // pass that waits for its reads takes longer; never shorter.
  SimConfig config = StreamAllPrefillOnStorage();
  const SimResult one = testing::Simulate(config);
  config.hardware.host->storage_reads_in_flight = 2;
  const SimResult two = testing::Simulate(config);
  // The timeline shows each read from its start to its end: alone, its time alone; two sharing
  // the disk from start to end, twice that.
  const auto read_durations = [](const SimResult& r) {
    std::vector<double> durations;
    for (const SimResult::TimelineEntry& e : r.timeline) {
      if (e.resource == Resource::kStorageRead) durations.push_back(e.duration_s);
    }
    std::sort(durations.begin(), durations.end());
    return durations;
  };
  const std::vector<double> alone = read_durations(one), shared = read_durations(two);
  ASSERT_FALSE(alone.empty());
  ASSERT_EQ(shared.size(), alone.size());
  EXPECT_NEAR(alone.front(), alone.back(), 1e-12);
  EXPECT_GE(shared.front(), alone.front() * (1 - 1e-9));
  EXPECT_NEAR(shared.back(), 2 * alone.front(), 1e-9 * alone.front());
  EXPECT_DOUBLE_EQ(two.bytes_storage_read, one.bytes_storage_read);
  EXPECT_NEAR(two.busy_s[static_cast<int>(Resource::kStorageRead)],
              one.busy_s[static_cast<int>(Resource::kStorageRead)],
              1e-9 * one.busy_s[static_cast<int>(Resource::kStorageRead)]);
  EXPECT_GT(two.ttft_s, one.ttft_s);
  // The first read of the pass: one expert's read time alone, twice that when two share the disk.
  const double read_s = static_cast<double>(model::ExpertBytes(config.model)) /
                        config.hardware.host->storage_read_bandwidth_bytes_per_s;
  EXPECT_LT(two.ttft_s - one.ttft_s, 4 * config.model.num_layers * read_s);
}

TEST(OffloadSimulator, LayerOverheadAddsToEveryLayerOfEveryPass) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "a100-80gb-pcie", "resident");
  const SimResult base = testing::Simulate(config);
  config.layer_overhead_s = 1e-3;
  const SimResult slower = testing::Simulate(config);
  ASSERT_TRUE(base.tpot_s && slower.tpot_s);
  // resident: one serial chain of ops per pass, so each layer's overhead adds once.
  EXPECT_NEAR(*slower.tpot_s - *base.tpot_s, config.model.num_layers * 1e-3, 1e-9);
  EXPECT_NEAR(slower.ttft_s - base.ttft_s, config.model.num_layers * 1e-3, 1e-9);
  config.layer_overhead_s = -1e-3;
  EXPECT_THROW(testing::Simulate(config), base::Error);
}

TEST(OffloadSimulator, ErrorsNameTheOption) {
  auto message = [](SimConfig config) {
    try {
      testing::Simulate(config);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "lru-prefetch");
  config.policy_options.cache_per_layer = 4;
  EXPECT_NE(message(config).find("--cache-per-layer 4"), std::string::npos) << message(config);
  config = SimConfigFor("mixtral-8x7b", "rtx-3090", "on-demand");
  config.accelerator_bytes = 2e9;
  EXPECT_NE(message(config).find("leaves no room for a single expert"), std::string::npos)
      << message(config);
  config = SimConfigFor("mixtral-8x7b", "rtx-3090", "on-demand");
  config.routing = routing::ParseRoutingSpec("gate");
  EXPECT_NE(message(config).find("--routing gate"), std::string::npos);
  config = SimConfigFor("mixtral-8x7b", "rtx-3090", "on-demand");
  config.accelerator_bytes = -1;
  EXPECT_NE(message(config).find("--accelerator-memory"), std::string::npos);
}

TEST(OffloadSimulator, SpeculativePrefetchPaysOnlyWhenLayersAreCorrelated) {
  // With inter-layer correlation the co-occurrence stand-in predicts the next layer and prefetched
  // experts get used; with independent layers they are mostly wasted. (At a speculative recall,
  // the default, the gate is right at that rate whatever the correlation.)
  auto used_share = [](const std::string& routing) {
    SimConfig config = SimConfigFor("mixtral-8x7b", "t4", "lru-prefetch");
    config.speculative_recall.reset();
    config.model.bits.experts = 2.5;
    config.model.bits.attention = 4;
    config.accelerator_bytes = 12e9;
    config.routing = routing::ParseRoutingSpec(routing);
    config.workload.output_tokens = 64;
    const SimResult r = testing::Simulate(config);
    return static_cast<double>(r.prefetches_used) /
           static_cast<double>(std::max<int64_t>(r.prefetches, 1));
  };
  EXPECT_GT(used_share("correlated:layer=1"), 0.95);
  EXPECT_LT(used_share("uniform"), 0.5);
}

// Counts the Route calls per (step, layer) of the source it wraps.
class CountingRouting : public routing::RoutingSource {
 public:
  explicit CountingRouting(routing::RoutingSource& inner) : inner_(inner) {}
  std::string Describe() const override { return inner_.Describe(); }
  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    ++calls[{step, layer}];
    inner_.Route(step, layer, tokens, out);
  }
  std::map<std::pair<int64_t, int64_t>, int> calls;

 private:
  routing::RoutingSource& inner_;
};

// The speculative gate's recall routes layer + 1 ahead; that layer's own turn reuses those counts
// (a second Route of the correlated source cost as much again), and the run is the same.
TEST(OffloadSimulator, EachLayerIsRoutedOnceWithTheSpeculativeRecall) {
  SimConfig config = SimConfigFor("mixtral-8x7b", "rtx-3090", "lru-prefetch");
  config.routing = routing::ParseRoutingSpec("correlated:locality=0.3,layer=0.5");
  ASSERT_TRUE(config.speculative_recall.has_value());
  const fit::OffloadSources analytic = fit::AnalyticOffloadSources(
      config.model, config.hardware, config.cpu_threads, model::CostParameters{});
  config.accelerator_costs = analytic.accelerator;
  config.host_costs = analytic.host;
  const int64_t layers = config.model.num_moe_layers();
  const policies::RoutingCalibration calibration =
      policies::CalibrateRouting(config.routing, layers, config.model.moe->num_experts,
                                 config.model.moe->top_k, config.seed, config.calibration);
  std::unique_ptr<routing::RoutingSource> source = routing::MakeRoutingSource(
      config.routing, layers, config.model.moe->num_experts, config.model.moe->top_k, config.seed);
  CountingRouting counting(*source);
  const SimResult counted = SimulateOffload(config, counting, calibration);
  const int64_t passes = static_cast<int64_t>(counted.pass_end_s.size());
  ASSERT_GT(passes, 1);
  EXPECT_EQ(static_cast<int64_t>(counting.calls.size()), passes * layers);
  for (const auto& [step_layer, calls] : counting.calls)
    EXPECT_EQ(calls, 1) << "step " << step_layer.first << ", layer " << step_layer.second;
  const SimResult plain = testing::Simulate(config);
  EXPECT_GT(plain.prefetches, 0);
  EXPECT_EQ(counted.total_s, plain.total_s);
  EXPECT_EQ(counted.prefetches, plain.prefetches);
  EXPECT_EQ(counted.prefetches_used, plain.prefetches_used);
  EXPECT_EQ(counted.hits, plain.hits);
}

}  // namespace
}  // namespace moelab::sim
