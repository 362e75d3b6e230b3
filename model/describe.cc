#include "model/describe.h"

#include "model/moe_math.h"
#include "model/parameter_count.h"
#include "report/format.h"

namespace moelab::model {
namespace {

using report::FormatBytes;
using report::FormatCount;
using report::FormatNumber;
using report::FormatSeconds;
using report::Table;

std::string Tflops(const PeakFlops& peak, const std::string& dtype) {
  auto it = peak.find(dtype);
  return it == peak.end() ? "-" : FormatNumber(it->second / 1e12, 1);
}

}  // namespace

nlohmann::json DescribeModel(const MoeModelSpec& spec, double tau) {
  const ParameterCounts counts = CountParameters(spec);
  const WeightBytes bytes = CountWeightBytes(spec);
  nlohmann::json json;
  json["name"] = spec.name;
  json["total_params"] = counts.total;
  json["active_params"] = counts.active;
  json["active_params_excluding_input_embedding"] = counts.active_excluding_input_embedding;
  json["params_per_expert"] = counts.params_per_expert;
  json["expert_bytes"] = spec.moe ? ExpertBytes(spec) : 0;
  json["tau"] = tau;
  json["sparsity"] = spec.sparsity();
  json["t_thres"] = FullActivationThreshold(spec.sparsity(), tau);
  json["kv_bytes_per_token"] = KvCacheBytesPerToken(spec);
  json["weight_bytes"] = bytes.total;
  json["breakdown_params"] = {{"embeddings", counts.embeddings},
                              {"positions", counts.positions},
                              {"projections", counts.projections},
                              {"lm_head", counts.lm_head},
                              {"attention", counts.attention},
                              {"norms", counts.norms},
                              {"routers", counts.routers},
                              {"routed_experts", counts.routed_experts},
                              {"shared_experts", counts.shared_experts},
                              {"dense_ffn", counts.dense_ffn}};
  if (spec.published) {
    json["published"] = {
        {"total_params", spec.published->total_params},
        {"active_params", spec.published->active_params},
        {"total_deviation",
         static_cast<double>(counts.total) / static_cast<double>(spec.published->total_params) -
             1.0},
        {"active_deviation",
         static_cast<double>(counts.active) / static_cast<double>(spec.published->active_params) -
             1.0},
        {"source", spec.published->source}};
  }
  json["spec"] = ModelSpecToJson(spec);
  return json;
}

std::string ModelText(const MoeModelSpec& spec, const nlohmann::json& d) {
  Table table({"quantity", "value"});
  table.AddRow({"layers", std::to_string(spec.num_layers)});
  table.AddRow({"hidden size", std::to_string(spec.hidden_size)});
  table.AddRow(
      {"attention", ToString(spec.attention.kind) + ", " +
                        std::to_string(spec.attention.num_heads) + " heads" +
                        (spec.attention.kind == AttentionKind::kGroupedQuery
                             ? ", " + std::to_string(spec.attention.num_kv_heads) + " KV heads x " +
                                   std::to_string(spec.attention.head_dim)
                             : ", kv_lora_rank " + std::to_string(spec.attention.kv_lora_rank))});
  if (spec.moe) {
    table.AddRow({"experts (E, K)", std::to_string(spec.moe->num_experts) + ", top-" +
                                        std::to_string(spec.moe->top_k)});
    table.AddRow({"expert intermediate", std::to_string(spec.moe->expert_intermediate_size)});
    table.AddRow({"shared experts", std::to_string(spec.moe->num_shared_experts)});
    table.AddRow({"dense layers", std::to_string(spec.num_dense_layers())});
  } else {
    table.AddRow({"FFN intermediate (dense)", std::to_string(spec.dense_intermediate_size)});
  }
  table.AddRow({"vocab", std::to_string(spec.vocab_size)});
  table.AddRow({"total parameters", FormatCount(d["total_params"].get<double>())});
  table.AddRow({"active parameters", FormatCount(d["active_params"].get<double>())});
  if (spec.published) {
    table.AddRow({"published total / active",
                  FormatCount(static_cast<double>(spec.published->total_params)) + " / " +
                      FormatCount(static_cast<double>(spec.published->active_params))});
  }
  table.AddRow({"weight bytes", FormatBytes(d["weight_bytes"].get<double>())});
  if (spec.moe) table.AddRow({"bytes per expert", FormatBytes(d["expert_bytes"].get<double>())});
  table.AddRow({"T_thres (tau " + FormatNumber(d["tau"].get<double>(), 2) + ")",
                std::to_string(d["t_thres"].get<int64_t>()) + " tokens"});
  table.AddRow({"KV cache per token", FormatBytes(d["kv_bytes_per_token"].get<double>())});
  return spec.display_name + " (" + spec.name + ", family " + spec.family + ")\n" + table.Render();
}

std::string HardwareText(const HardwareSpec& spec) {
  Table table({"quantity", "value"});
  if (spec.accelerator) {
    const AcceleratorSpec& a = *spec.accelerator;
    table.AddRow({"accelerators", std::to_string(spec.accelerator_count) + " x " + a.display_name});
    for (const auto& [dtype, flops] : a.peak_flops)
      table.AddRow({"peak " + dtype, FormatNumber(flops / 1e12, 1) + " TFLOP/s"});
    table.AddRow({"memory (each)", FormatBytes(a.memory_bytes)});
    table.AddRow({"memory bandwidth (each)", FormatBytes(a.memory_bandwidth_bytes_per_s) + "/s"});
  }
  if (spec.interconnect && spec.accelerator_count > 1) {
    table.AddRow({"interconnect", spec.interconnect->kind + ", " +
                                      FormatBytes(spec.interconnect->bandwidth_bytes_per_s) +
                                      "/s per direction"});
  }
  if (spec.scale_out) {
    table.AddRow(
        {"machines", std::to_string(spec.accelerator_count / spec.AcceleratorsPerMachine()) +
                         " x " + std::to_string(spec.AcceleratorsPerMachine()) + " accelerators"});
    table.AddRow({"scale-out network", spec.scale_out->kind + ", " +
                                           FormatBytes(spec.scale_out->bandwidth_bytes_per_s) +
                                           "/s per accelerator per direction"});
  }
  if (spec.host) {
    const HostSpec& h = *spec.host;
    table.AddRow({"host CPU", h.cpu_name + ", " + std::to_string(h.cores) + " cores"});
    for (const auto& [dtype, flops] : h.peak_flops)
      table.AddRow({"host peak " + dtype, FormatNumber(flops / 1e12, 2) + " TFLOP/s"});
    table.AddRow({"host DRAM", FormatBytes(h.dram_bytes) + " at " +
                                   FormatBytes(h.dram_bandwidth_bytes_per_s) + "/s"});
    table.AddRow({"storage read", FormatBytes(h.storage_read_bandwidth_bytes_per_s) + "/s"});
    if (h.storage_read_bandwidth_beside_compute_bytes_per_s > 0) {
      table.AddRow({"storage read beside compute",
                    FormatBytes(h.storage_read_bandwidth_beside_compute_bytes_per_s) + "/s"});
    }
    if (h.compute_rate_while_storage_reads < 1) {
      // Not "x" + FormatNumber(...): a literal + temporary string trips GCC 12's -Wrestrict
      // false positive (GCC bug 105329).
      std::string rate = "x";
      rate += FormatNumber(h.compute_rate_while_storage_reads, 3);
      rate += " its rate alone";
      table.AddRow({"computation while reads are in flight", rate});
    }
    if (h.storage_reads_in_flight > 1) {
      table.AddRow({"storage reads in flight",
                    std::to_string(h.storage_reads_in_flight) + " (sharing the bandwidth)"});
    }
  }
  if (spec.host_link) {
    const LinkSpec& l = *spec.host_link;
    table.AddRow({"host link", l.name + ": " + FormatBytes(l.host_to_device_bandwidth_bytes_per_s) +
                                   "/s H2D, " +
                                   FormatBytes(l.device_to_host_bandwidth_bytes_per_s) +
                                   "/s D2H, " + FormatSeconds(l.latency_s)});
  }
  std::string text =
      spec.display_name + " (" + spec.name + ", " + ToString(spec.kind) + ")\n" + table.Render();
  for (const std::string& source : spec.sources) text += "source: " + source + "\n";
  return text;
}

PresetListing ListModelPresets(const PresetStore& store) {
  PresetListing listing;
  Table table({"name", "display name", "E", "K", "total", "active"});
  for (const PresetEntry& entry : store.ListModels()) {
    const MoeModelSpec spec = store.LoadModel(entry.file.string());
    const ParameterCounts counts = CountParameters(spec);
    listing.presets.push_back({{"name", entry.name},
                               {"display_name", spec.display_name},
                               {"total_params", counts.total},
                               {"active_params", counts.active},
                               {"file", entry.file.string()}});
    table.AddRow({entry.name, spec.display_name,
                  spec.moe ? std::to_string(spec.moe->num_experts) : "-",
                  spec.moe ? std::to_string(spec.moe->top_k) : "-",
                  FormatCount(static_cast<double>(counts.total)),
                  FormatCount(static_cast<double>(counts.active))});
  }
  listing.text = table.Render();
  return listing;
}

PresetListing ListHardwarePresets(const PresetStore& store) {
  PresetListing listing;
  Table table({"name", "kind", "display name", "bf16/fp16 TFLOP/s", "memory", "bandwidth"});
  for (const PresetEntry& entry : store.ListHardware()) {
    const HardwareSpec spec = store.LoadHardware(entry.file.string());
    listing.presets.push_back({{"name", entry.name},
                               {"kind", entry.kind},
                               {"display_name", spec.display_name},
                               {"file", entry.file.string()}});
    std::string flops = "-", memory = "-", bandwidth = "-";
    if (spec.has_accelerator()) {
      const AcceleratorSpec& a = *spec.accelerator;
      const double count = static_cast<double>(spec.accelerator_count);
      flops = Tflops(a.peak_flops, "bf16") != "-" ? Tflops(a.peak_flops, "bf16")
                                                  : Tflops(a.peak_flops, "fp16");
      if (spec.accelerator_count > 1)
        flops = std::to_string(spec.accelerator_count) + " x " + flops;
      memory = FormatBytes(a.memory_bytes * count);
      bandwidth = FormatBytes(a.memory_bandwidth_bytes_per_s * count) + "/s";
    } else if (spec.host) {
      flops = Tflops(spec.host->peak_flops, "bf16") != "-"
                  ? Tflops(spec.host->peak_flops, "bf16")
                  : Tflops(spec.host->peak_flops, "fp32") + " (fp32)";
      memory = FormatBytes(spec.host->dram_bytes);
      bandwidth = FormatBytes(spec.host->dram_bandwidth_bytes_per_s) + "/s";
    } else if (spec.host_link) {
      bandwidth = FormatBytes(spec.host_link->host_to_device_bandwidth_bytes_per_s) + "/s";
    }
    table.AddRow({entry.name, entry.kind, spec.display_name, flops, memory, bandwidth});
  }
  listing.text = table.Render() +
                 "\nAny accelerator composes into a node as <N>x<name>, e.g. 2xa100-80gb-sxm.\n";
  return listing;
}

}  // namespace moelab::model
