// RunWorkload's typed result and RunResultToJson, the report `moelab run --json` prints
// ("moelab.run/1"): every key of each workload present, and its numbers the typed fields'.
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/run_report.h"
#include "executor/run_workload.h"
#include "tests/support/test_paths.h"

namespace moelab::executor {
namespace {

// cli_test's small shape: 2 layers of 4 experts top-2, hidden 64, a 1-layer draft.
RunRequest SmallRequest(Workload workload) {
  RunRequest request;
  request.workload = workload;
  request.shape.layers = 2;
  request.shape.hidden = 64;
  request.shape.intermediate = 96;
  request.shape.experts = 4;
  request.shape.top_k = 2;
  request.shape.heads = 4;
  request.shape.kv_heads = 2;
  request.shape.head_dim = 16;
  request.shape.vocab = 101;
  request.draft_shape.layers = 1;
  request.draft_shape.hidden = 32;
  request.draft_shape.dense_intermediate = 64;
  request.draft_shape.heads = 2;
  request.draft_shape.kv_heads = 1;
  request.draft_shape.head_dim = 16;
  request.threads = 2;
  request.batch = 2;
  request.prompt_tokens = 6;
  request.output_tokens = 5;
  request.seed = 3;
  return request;
}

std::set<std::string> Keys(const nlohmann::json& json) {
  std::set<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.insert(key);
  return keys;
}

// Every run's keys; each workload adds its own.
std::set<std::string> CommonKeys(std::set<std::string> extra) {
  std::set<std::string> keys = {"schema",
                                "workload",
                                "machine",
                                "device",
                                "model",
                                "batch",
                                "prompt_tokens",
                                "output_tokens",
                                "seed",
                                "routing",
                                "weight_bytes_per_token",
                                "ttft_s",
                                "tpot_s",
                                "tokens_per_s",
                                "step_times",
                                "operator_times_s",
                                "expert_token_counts"};
  keys.insert(extra.begin(), extra.end());
  return keys;
}

TEST(RunResultToJson, DecodeHasEveryKeyWithTheTypedValues) {
  const RunResult result =
      RunWorkload(SmallRequest(Workload::kDecode), model::PresetStore::Default());
  const nlohmann::json json = RunResultToJson(result);
  EXPECT_EQ(Keys(json), CommonKeys({"decode_weight_bandwidth_bytes_per_s", "outputs"}));
  EXPECT_EQ(json["schema"], "moelab.run/1");
  EXPECT_EQ(json["workload"], "decode");
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_EQ(Keys(json["machine"]),
            (std::set<std::string>{"cpu", "isa", "quantized_kernel", "threads"}));
  EXPECT_EQ(json["machine"]["threads"], 2);
  EXPECT_EQ(Keys(json["model"]),
            (std::set<std::string>{"name", "family", "layers", "hidden", "heads", "kv_heads",
                                   "head_dim", "vocab", "weights_source", "weight_bytes",
                                   "expert_format", "attention_format", "experts", "top_k",
                                   "expert_intermediate", "expert_bytes", "shared_experts"}));
  EXPECT_EQ(json["model"]["experts"], 4);
  EXPECT_EQ(json["model"]["expert_bytes"].get<double>(), 3.0 * 64 * 96 * 2);
  EXPECT_EQ(json["batch"], 2);
  EXPECT_EQ(json["seed"], 3u);
  EXPECT_EQ(json["routing"], "model gate");
  EXPECT_EQ(json["ttft_s"].get<double>(), result.ttft_s);
  ASSERT_TRUE(result.tpot_s && result.tokens_per_s);
  EXPECT_EQ(json["tpot_s"].get<double>(), *result.tpot_s);
  EXPECT_EQ(json["tokens_per_s"].get<double>(), *result.tokens_per_s);
  EXPECT_EQ(json["outputs"], nlohmann::json(*result.outputs));
  ASSERT_EQ(json["step_times"].size(), 5u);  // the prefill and four decode steps
  EXPECT_EQ(Keys(json["step_times"][0]),
            (std::set<std::string>{"kind", "tokens", "positions", "seconds"}));
  EXPECT_EQ(json["step_times"][0]["kind"], "prefill");
  EXPECT_EQ(Keys(json["operator_times_s"]),
            (std::set<std::string>{"attention", "router", "experts", "lm_head", "other", "total"}));
  EXPECT_EQ(json["operator_times_s"]["total"].get<double>(), result.operator_times.total());
  ASSERT_EQ(json["expert_token_counts"].size(), 5u);
  EXPECT_TRUE(result.timeline_json.empty());
}

TEST(RunResultToJson, PrefillAndBeamKeys) {
  const RunResult prefill =
      RunWorkload(SmallRequest(Workload::kPrefill), model::PresetStore::Default());
  const nlohmann::json json = RunResultToJson(prefill);
  EXPECT_EQ(Keys(json), CommonKeys({}));
  EXPECT_TRUE(json["tpot_s"].is_null());
  EXPECT_GT(json["tokens_per_s"].get<double>(), 0);

  RunRequest request = SmallRequest(Workload::kBeam);
  request.batch = 1;
  request.beam_width = 3;
  request.record_timeline = true;
  const RunResult beam = RunWorkload(request, model::PresetStore::Default());
  const nlohmann::json beam_json = RunResultToJson(beam);
  EXPECT_EQ(Keys(beam_json), CommonKeys({"beam_width", "beams", "beam_selection_s"}));
  EXPECT_EQ(beam_json["beam_width"], 3);
  // The steps' time beside the forward passes: part of the decode time, not more.
  const double selection_s = beam_json["beam_selection_s"].get<double>();
  EXPECT_GT(selection_s, 0);
  EXPECT_LT(selection_s,
            beam_json["tpot_s"].get<double>() * static_cast<double>(request.output_tokens - 1));
  ASSERT_EQ(beam_json["beams"].size(), 3u);
  EXPECT_EQ(Keys(beam_json["beams"][0]), (std::set<std::string>{"tokens", "log_probability"}));
  // --timeline-out: the library renders it, the caller writes it.
  EXPECT_EQ(nlohmann::json::parse(beam.timeline_json).contains("traceEvents"), true);
}

TEST(RunResultToJson, SpeculativeHasTheSdObjectAndTheDraft) {
  RunRequest request = SmallRequest(Workload::kSpeculative);
  request.output_tokens = 9;
  request.gamma = 3;
  request.alpha = 0.7;
  const RunResult result = RunWorkload(request, model::PresetStore::Default());
  const nlohmann::json json = RunResultToJson(result);
  EXPECT_EQ(Keys(json),
            CommonKeys({"decode_weight_bandwidth_bytes_per_s", "outputs", "draft", "sd"}));
  EXPECT_EQ(Keys(json["sd"]),
            (std::set<std::string>{"gamma", "acceptance", "rounds", "accepted_histogram", "sigma",
                                   "speedup", "target_efficiency", "draft_s", "verify_s",
                                   "baseline", "draft_operator_times_s", "reference_mismatches",
                                   "alpha", "sigma_expected"}));
  EXPECT_EQ(Keys(json["sd"]["baseline"]),
            (std::set<std::string>{"decode_s", "tpot_s", "operator_times_s"}));
  EXPECT_EQ(json["sd"]["accepted_histogram"].size(), 4u);  // 0..gamma accepted
  EXPECT_EQ(json["sd"]["rounds"], result.sd->rounds);
  EXPECT_EQ(json["sd"]["speedup"].get<double>(), result.sd->speedup);
  EXPECT_EQ(json["sd"]["alpha"].get<double>(), 0.7);
  EXPECT_EQ(json["draft"]["vocab"], 101);  // the target's vocabulary
  EXPECT_TRUE(json["draft"].contains("intermediate"));
  EXPECT_FALSE(json["draft"].contains("experts"));

  request.acceptance = Acceptance::kGreedy;
  const nlohmann::json greedy =
      RunResultToJson(RunWorkload(request, model::PresetStore::Default()));
  for (const char* key : {"reference_mismatches", "alpha", "sigma_expected"})
    EXPECT_FALSE(greedy["sd"].contains(key)) << key;
}

// --offload on the CPU: the report's "offload" object, and its figures in the text report.
TEST(RunResultToJson, OffloadedRunHasTheOffloadObjectAndText) {
  const std::filesystem::path dir = testing::MakeTempDir("run-result");
  RunRequest request = SmallRequest(Workload::kDecode);
  offload::OffloadOptions options;
  options.policy = "lru-prefetch";
  options.offload_dir = dir;
  // Less than the non-expert weights and the 8 experts of 36 KB: experts are read as it runs.
  options.expert_memory_bytes = 300'000;
  request.offload = options;
  const RunResult result = RunWorkload(request, model::PresetStore::Default());
  const nlohmann::json json = RunResultToJson(result);
  EXPECT_EQ(Keys(json), CommonKeys({"decode_weight_bandwidth_bytes_per_s", "outputs", "offload"}));
  ASSERT_TRUE(result.offload);
  EXPECT_EQ(json["offload"], result.offload->ToJson());
  EXPECT_EQ(json["offload"]["policy"], "lru-prefetch");
  EXPECT_GT(result.offload->reads, 0);
  const std::string text = RunReportText(result);
  for (const char* row : {"offload policy", "expert cache hit rate", "expert reads", "stall"})
    EXPECT_NE(text.find(row), std::string::npos) << row << "\n" << text;
  std::filesystem::remove_all(dir);
}

TEST(RunWorkload, RefusesATraceOfADenseModel) {
  RunRequest request = SmallRequest(Workload::kDecode);
  request.model = "llama-3.2-1b";
  request.shape.experts.reset();
  request.shape.top_k.reset();
  request.shape.intermediate.reset();
  request.shape.dense_intermediate = 96;
  request.trace_requested = true;
  try {
    RunWorkload(request, model::PresetStore::Default());
    FAIL() << "a dense model's trace was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--trace-out records expert routing"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moelab::executor
