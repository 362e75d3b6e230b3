#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "executor/executor_config.h"
#include "base/atomic_file.h"
#include "model/moe_math.h"
#include "model/parameter_count.h"
#include "model/preset_store.h"

namespace moelab::cli {
namespace {

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
        {"total_deviation", static_cast<double>(counts.total) / static_cast<double>(spec.published->total_params) - 1.0},
        {"active_deviation", static_cast<double>(counts.active) / static_cast<double>(spec.published->active_params) - 1.0},
        {"source", spec.published->source}};
  }
  json["spec"] = ModelSpecToJson(spec);
  return json;
}

void PrintModel(const MoeModelSpec& spec, const nlohmann::json& d) {
  std::cout << spec.display_name << " (" << spec.name << ", family " << spec.family << ")\n";
  Table table({"quantity", "value"});
  table.AddRow({"layers", std::to_string(spec.num_layers)});
  table.AddRow({"hidden size", std::to_string(spec.hidden_size)});
  table.AddRow({"attention", ToString(spec.attention.kind) + ", " + std::to_string(spec.attention.num_heads) + " heads" +
                                 (spec.attention.kind == AttentionKind::kGroupedQuery
                                      ? ", " + std::to_string(spec.attention.num_kv_heads) + " KV heads x " + std::to_string(spec.attention.head_dim)
                                      : ", kv_lora_rank " + std::to_string(spec.attention.kv_lora_rank))});
  if (spec.moe) {
    table.AddRow({"experts (E, K)", std::to_string(spec.moe->num_experts) + ", top-" + std::to_string(spec.moe->top_k)});
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
    table.AddRow({"published total / active", FormatCount(static_cast<double>(spec.published->total_params)) + " / " +
                                                 FormatCount(static_cast<double>(spec.published->active_params))});
  }
  table.AddRow({"weight bytes", FormatBytes(d["weight_bytes"].get<double>())});
  if (spec.moe) table.AddRow({"bytes per expert", FormatBytes(d["expert_bytes"].get<double>())});
  table.AddRow({"T_thres (tau " + FormatNumber(d["tau"].get<double>(), 2) + ")", std::to_string(d["t_thres"].get<int64_t>()) + " tokens"});
  table.AddRow({"KV cache per token", FormatBytes(d["kv_bytes_per_token"].get<double>())});
  std::cout << table.Render();
}

int ModelShow(const std::vector<std::string>& args) {
  po::options_description options("moelab model show");
  options.add_options()
      ("model", po::value<std::string>()->required(), "model preset name or path (moelab.model/1 file or Hugging Face config.json)")
      ("tau", po::value<std::string>()->default_value("0.95"), "fraction of experts counted as 'all' for T_thres")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON to this file (atomically)")
      ("spec-out", po::value<std::string>()->default_value(""), "write the (scaled) model as a moelab.model/1 file, atomically: a --model for every other command");
  AddShapeOptions(options, "", ShapeOverrides{});
  po::variables_map values;
  if (!ParseOptions("usage: moelab model show --model NAME|PATH [shape overrides] [--spec-out FILE] [--json]", options, args, values)) return 0;
  const double tau = ParseNumber(values["tau"].as<std::string>(), "tau");
  MoeModelSpec spec = PresetStore::Default().LoadModel(values["model"].as<std::string>());
  const ShapeOverrides shape = ShapeFrom(values, "", ShapeOverrides{});
  // Scaling goes through the executor's shape, so the spec is exactly what `moelab run` with the
  // same overrides executes (and architectures it cannot run are refused by name).
  if (shape.layers || shape.hidden || shape.intermediate || shape.dense_intermediate || shape.experts || shape.top_k ||
      shape.heads || shape.kv_heads || shape.head_dim || shape.vocab || shape.shared_experts ||
      shape.shared_intermediate || shape.max_positions) {
    spec = SpecFromExecutorConfig(ExecutorConfigFromSpec(spec, shape));
  }
  if (const std::string spec_out = values["spec-out"].as<std::string>(); !spec_out.empty()) {
    WriteFileAtomically(spec_out, ModelSpecToJson(spec).dump(2) + "\n");
  }
  nlohmann::json description = DescribeModel(spec, tau);
  if (values["json"].as<bool>() || !values["out"].as<std::string>().empty()) {
    description["schema"] = "moelab.model_show/1";
    description["provenance"] = Provenance();
    EmitJson(description, values["out"].as<std::string>());
  } else {
    PrintModel(spec, description);
  }
  return 0;
}

int ModelList(const std::vector<std::string>& args) {
  po::options_description options("moelab model list");
  options.add_options()("json", po::bool_switch(), "print JSON");
  po::variables_map values;
  if (!ParseOptions("usage: moelab model list [--json]", options, args, values)) return 0;
  const PresetStore store = PresetStore::Default();
  nlohmann::json list = nlohmann::json::array();
  Table table({"name", "display name", "E", "K", "total", "active"});
  for (const PresetEntry& entry : store.ListModels()) {
    const MoeModelSpec spec = store.LoadModel(entry.file.string());
    const ParameterCounts counts = CountParameters(spec);
    list.push_back({{"name", entry.name}, {"display_name", spec.display_name}, {"total_params", counts.total},
                    {"active_params", counts.active}, {"file", entry.file.string()}});
    table.AddRow({entry.name, spec.display_name, spec.moe ? std::to_string(spec.moe->num_experts) : "-",
                  spec.moe ? std::to_string(spec.moe->top_k) : "-", FormatCount(static_cast<double>(counts.total)),
                  FormatCount(static_cast<double>(counts.active))});
  }
  if (values["json"].as<bool>()) {
    EmitJson({{"schema", "moelab.model_list/1"}, {"models", list}}, "");
  } else {
    std::cout << table.Render();
  }
  return 0;
}

}  // namespace

void RegisterModelCommands(std::vector<Command>& commands) {
  commands.push_back({{"model", "show"}, "a model's spec and derived quantities", ModelShow});
  commands.push_back({{"model", "list"}, "the model presets", ModelList});
}

}  // namespace moelab::cli
