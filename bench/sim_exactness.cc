// The offload simulator's outputs, hashed: 855 SimulateOffload cases (7 policies x decode,
// prefill, beam, batch and verify workloads x uniform and two correlated routings x Mixtral-8x7B
// on an RTX 3090, Qwen1.5-MoE on a T4 held to 6 GB and DeepSeek-V2-Lite on an L4 held to 12 GB x
// a GPU host, a storage-tier host, and one whose reads share the disk and slow the computation),
// each with its timeline and decision log recorded. One line per case: the case and a hash of its
// JSON (provenance aside), timeline, decisions and event counts, or of its error. A speed-up of
// sim/, policies/ or routing/ must leave the file identical (results/sim-bench.md):
//   moelab_sim_exactness before.txt   (a build of the baseline)
//   moelab_sim_exactness after.txt    (the change)  &&  cmp before.txt after.txt
// std::hash of a string: compare files written by builds on the same machine and library.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "policies/decision_log.h"
#include "routing/routing_spec.h"
#include "sim/offload_simulator.h"

namespace moelab::bench {
namespace {

struct ModelOnHardware {
  const char* model;
  const char* hardware;
  double accelerator_bytes;  // 0: the preset's memory
};

// A storage-tier host (the CPU computes, experts on storage); `coupled` adds two reads in flight
// sharing the disk, reads slowed beside computation and computation slowed beside reads.
void OnStorageTierHost(sim::SimConfig& config, bool coupled) {
  config.model.num_layers = std::min<int64_t>(config.model.num_layers, 6);
  config.hardware.host->dram_bytes = 0;
  config.hardware.compute_device_is_host = true;
  config.hardware.accelerator->memory_bytes = 3e9;
  config.cpu_threads = config.hardware.host->cores;
  if (!coupled) return;
  model::HostSpec& host = *config.hardware.host;
  host.storage_reads_in_flight = 2;
  host.storage_read_bandwidth_beside_compute_bytes_per_s =
      host.storage_read_bandwidth_bytes_per_s * 0.7;
  host.compute_rate_while_storage_reads = 0.8;
}

std::string Outputs(sim::SimConfig config) {
  try {
    // The analytic rooflines of the case's hardware (what --hardware alone prices).
    const fit::OffloadSources rooflines =
        fit::AnalyticOffloadSources(config.model, config.hardware, config.cpu_threads, {});
    config.accelerator_costs = rooflines.accelerator;
    config.host_costs = rooflines.host;
    const sim::SimResult result = sim::SimulateOffload(config);
    nlohmann::json json = result.ToJson();
    json.erase("provenance");
    std::string text = json.dump() + result.TimelineJson();
    for (const policies::DecisionEvent& d : result.decisions) text += policies::ToString(d);
    return text + std::to_string(result.events) + "/" + std::to_string(result.expert_events);
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

int Main(int argc, char** argv) {
  // An option is no output path (`--help` wrote the hashes to a file named --help).
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: moelab_sim_exactness OUT.txt (one line per case: its outputs hashed; "
                 "compare two builds' files with cmp)\n");
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  const model::PresetStore store = model::PresetStore::Default();
  const char* const policies[] = {"resident", "on-demand", "static-split", "lru-prefetch",
                                  "fiddler",  "fmoe",      "stream-all"};
  const char* const routings[] = {"uniform", "correlated:locality=0.3,layer=0.5",
                                  "correlated:locality=0.8,layer=0.2"};
  const ModelOnHardware models[] = {{"mixtral-8x7b", "rtx-3090", 0},
                                    {"qwen1.5-moe-a2.7b", "t4", 6e9},
                                    {"deepseek-v2-lite", "l4", 12e9}};
  const sim::WorkloadKind kinds[] = {sim::WorkloadKind::kDecode, sim::WorkloadKind::kPrefill,
                                     sim::WorkloadKind::kBeam, sim::WorkloadKind::kBatch,
                                     sim::WorkloadKind::kVerify};
  std::FILE* out = std::fopen(argv[1], "w");
  if (!out) {
    std::fprintf(stderr, "moelab_sim_exactness: cannot write %s\n", argv[1]);
    return 1;
  }
  int cases = 0;
  for (const ModelOnHardware& m : models) {
    for (const char* policy : policies) {
      for (const char* routing : routings) {
        for (const sim::WorkloadKind kind : kinds) {
          for (int host = 0; host < 3; ++host) {
            // Fiddler is refused where the CPU is the compute device.
            if (host > 0 && std::string(policy) == "fiddler") continue;
            sim::SimConfig config;
            config.model = store.LoadModel(m.model);
            config.hardware = store.LoadHardware(m.hardware);
            if (m.accelerator_bytes > 0) config.accelerator_bytes = m.accelerator_bytes;
            config.policy = policy;
            config.workload.kind = kind;
            config.workload.batch = kind == sim::WorkloadKind::kBatch     ? 4
                                    : kind == sim::WorkloadKind::kPrefill ? 2
                                                                          : 1;
            config.workload.prompt_tokens = 24;
            config.workload.output_tokens = 40;
            config.routing = routing::ParseRoutingSpec(routing);
            config.seed = 7 + static_cast<uint64_t>(cases % 3);
            config.record_timeline = true;
            config.record_decisions = true;
            if (host > 0) OnStorageTierHost(config, host == 2);
            const std::string text = Outputs(config);
            std::fprintf(out, "%s %s %s %s %d %zx %zu\n", m.model, policy, routing,
                         sim::ToString(kind).c_str(), host, std::hash<std::string>{}(text),
                         text.size());
            ++cases;
          }
        }
      }
    }
  }
  std::fclose(out);
  std::printf("%d cases\n", cases);
  return 0;
}

}  // namespace
}  // namespace moelab::bench

int main(int argc, char** argv) { return moelab::bench::Main(argc, argv); }
