// SimResult's printers: the JSON report and the Chrome trace-event timeline.
#include <string>

#include "report/chrome_trace.h"
#include "sim/offload_simulator.h"

namespace moelab::sim {
namespace {

template <typename Number>
nlohmann::json OptionalNumber(const std::optional<Number>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

const char* KindName(uint8_t kind) {
  // Mirrors OpKind in offload_simulator.cc.
  static const char* const kNames[] = {"pass", "embedding", "dense",      "hidden",  "expert",
                                       "copy", "storage",   "activation", "lm_head", "join"};
  return kind < sizeof(kNames) / sizeof(kNames[0]) ? kNames[kind] : "op";
}

// pid/tid of a resource: pid 1 = accelerator, pid 2 = host.
std::pair<int, int> Lane(Resource resource) {
  switch (resource) {
    case Resource::kAcceleratorCompute:
      return {1, 1};
    case Resource::kHostToDevice:
      return {1, 2};
    case Resource::kDeviceToHost:
      return {1, 3};
    case Resource::kCpuCompute:
      return {2, 1};
    case Resource::kStorageRead:
      return {2, 2};
    case Resource::kNone:
      break;
  }
  return {0, 0};
}

}  // namespace

nlohmann::json SimResult::ToJson() const {
  nlohmann::json json;
  json["schema"] = "moelab.sim_offload/1";
  json["model"] = model;
  json["hardware"] = hardware;
  json["accelerator"] = accelerator_name;
  json["cpu"] = cpu_name;
  json["cpu_threads"] = cpu_threads;
  if (layer_overhead_s > 0) json["layer_overhead_s"] = layer_overhead_s;
  json["policy"] = policy;
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, value] : policy_options) options[name] = value;
  json["policy_options"] = options;
  json["workload"] = {{"kind", ToString(workload.kind)},
                      {"prompt_tokens", workload.prompt_tokens},
                      {"output_tokens", workload.output_tokens},
                      {"batch", workload.batch}};
  if (workload.kind == WorkloadKind::kBeam) json["workload"]["beam_width"] = workload.beam_width;
  if (workload.kind == WorkloadKind::kVerify) {
    json["workload"]["gamma"] = workload.gamma;
    json["workload"]["alpha"] = workload.alpha;
  }
  json["routing"] = routing;
  json["calibration"] = {{"source", calibration_source}, {"in_sample", calibration_in_sample}};
  json["seed"] = seed;
  json["cost_source"] = cost_source;
  json["compute_dtype"] = compute_dtype;

  json["ttft_s"] = ttft_s;
  json["tpot_s"] = OptionalNumber(tpot_s);
  json["tokens_per_s"] = OptionalNumber(tokens_per_s);
  json["total_s"] = total_s;
  json["passes"] = passes;

  json["hit_rate"] = hit_rate();
  json["token_hit_rate"] = token_hit_rate();
  json["experts"] = {{"activations", expert_activations},
                     {"hits", hits},
                     {"inflight_hits", inflight_hits},
                     {"demand_fetches", demand_fetches},
                     {"transient_fetches", transient_fetches},
                     {"cpu_runs", cpu_runs},
                     {"prefetches", prefetches},
                     {"prefetches_used", prefetches_used},
                     {"prefetches_wasted", prefetches_wasted},
                     {"routed_tokens", routed_tokens},
                     {"hit_tokens", hit_tokens}};

  json["bytes_h2d"] = bytes_h2d_expert_weights + bytes_h2d_activations;
  json["bytes_d2h"] = bytes_d2h_activations;
  json["bytes_storage_read"] = bytes_storage_read;
  json["bytes_per_tier"] = {{"host_to_accelerator_expert_weights", bytes_h2d_expert_weights},
                            {"host_to_accelerator_activations", bytes_h2d_activations},
                            {"accelerator_to_host_activations", bytes_d2h_activations},
                            {"storage_to_host", bytes_storage_read},
                            {"initial_load_untimed", bytes_initial_load}};
  json["expert_bytes"] = expert_bytes;

  nlohmann::json busy = nlohmann::json::object(), utilization = nlohmann::json::object();
  for (int i = 0; i < kResourceCount; ++i) {
    const std::string name = ResourceName(static_cast<Resource>(i));
    busy[name] = busy_s[i];
    utilization[name] = total_s > 0 ? busy_s[i] / total_s : 0.0;
  }
  json["busy_s"] = busy;
  json["utilization"] = utilization;

  json["memory"] = {
      {"accelerator_bytes", accelerator_bytes},
      {"fixed_bytes", fixed_bytes},
      {"dense_bytes_on_accelerator", dense_bytes_on_accelerator},
      {"kv_bytes", kv_bytes},
      {"expert_slots", expert_slots},
      {"staging_buffers", staging_buffers},
      {"experts_total", experts_total},
      {"experts_on_storage", experts_on_storage},
      {"fits_accelerator", fits_accelerator},
      {"compute_working_set_bytes", compute_working_set_bytes},
      {"compute_from_dram_from_pass", OptionalNumber(compute_from_dram_from_pass)},
      {"compute_in_working_set_from_pass", OptionalNumber(compute_in_working_set_from_pass)}};
  json["fiddler_latency_model"] = {{"cpu_base_s", latency.cpu_base_s},
                                   {"cpu_per_token_s", latency.cpu_per_token_s},
                                   {"gpu_s", latency.gpu_s},
                                   {"transfer_s", latency.transfer_s}};
  json["policy_stats"] = {{"prefetches_issued", policy_stats.prefetches_issued},
                          {"searches", policy_stats.searches},
                          {"map_store_size", policy_stats.map_store_size}};
  json["simulator"] = {{"events", events}, {"expert_events", expert_events}};
  return json;
}

std::string SimResult::TimelineJson() const {
  report::ChromeTrace trace;
  trace.ProcessName(1, "accelerator: " + accelerator_name);
  trace.ProcessName(2, "host: " + cpu_name);
  for (Resource resource :
       {Resource::kAcceleratorCompute, Resource::kHostToDevice, Resource::kDeviceToHost,
        Resource::kCpuCompute, Resource::kStorageRead}) {
    const auto [pid, tid] = Lane(resource);
    trace.ThreadName(pid, tid, ResourceName(resource));
  }
  for (size_t i = 0; i < timeline.size(); ++i) {
    const TimelineEntry& e = timeline[i];
    const auto [pid, tid] = Lane(e.resource);
    std::string name = KindName(e.kind);
    if (e.expert >= 0) {
      name = (e.prefetch ? "prefetch" : name) + " L" + std::to_string(e.layer) + " E" +
             std::to_string(e.expert);
    } else if (e.layer >= 0) {
      name += " layer " + std::to_string(e.layer);
    }
    trace.Complete(name, KindName(e.kind), e.start_s, e.duration_s, pid, tid, e.pass);
  }
  return trace.Finish();
}

}  // namespace moelab::sim
