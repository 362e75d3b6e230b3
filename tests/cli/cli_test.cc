// Runs the moelab binary as a user would and checks its output, exit status and files.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;
using testing::Slurp;

TEST(Cli, ModelShowJsonHasIntegerCounts) {
  const CliRun r = RunMoelab("model show --model mixtral-8x7b --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_TRUE(json["total_params"].is_number_integer());
  ASSERT_TRUE(json["active_params"].is_number_integer());
  EXPECT_NEAR(json["total_params"].get<double>(), 46.7e9, 0.02 * 46.7e9);
  EXPECT_NEAR(json["active_params"].get<double>(), 12.9e9, 0.02 * 12.9e9);
  EXPECT_EQ(json["expert_bytes"].get<int64_t>(), 3LL * 4096 * 14336 * 2);
  EXPECT_EQ(json["t_thres"].get<int64_t>(), 11);
  EXPECT_TRUE(json.contains("provenance"));
}

TEST(Cli, ModelShowAcceptsAHuggingFaceConfigPath) {
  const auto config = testing::TestDataDir() / "hf_configs/qwen2-57b-a14b.json";
  const CliRun r = RunMoelab("model show --model " + config.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["t_thres"].get<int64_t>(), 23);
}

TEST(Cli, ModelShowScalesAModelAndWritesItsSpec) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-spec");
  const std::string spec = (dir / "scaled.json").string();
  const CliRun r = RunMoelab(
      "model show --model mixtral-8x7b --layers 2 --hidden 256 --intermediate 512 --heads 4 "
      "--kv-heads 2 --head-dim 64 --vocab 1000 --json --spec-out " +
      spec);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json scaled = nlohmann::json::parse(r.out);
  EXPECT_EQ(scaled["spec"]["num_layers"], 2);
  EXPECT_EQ(scaled["spec"]["moe"]["num_experts"], 8);  // not overridden: the preset's
  // 2 layers x (attention 256 x (256 + 2 x 128 + 256) + router 8 x 256 + 8 experts x 3 x 256 x 512)
  // + embeddings and LM head 2 x 1000 x 256 + norms (2 per layer + final) x 256
  const int64_t expected =
      2 * (256 * (256 + 2 * 128 + 256) + 8 * 256 + 8 * 3 * 256 * 512) + 2 * 1000 * 256 + 5 * 256;
  EXPECT_EQ(scaled["total_params"].get<int64_t>(), expected);
  const CliRun reloaded = RunMoelab("model show --json --model " + spec);
  ASSERT_EQ(reloaded.status, 0) << reloaded.err;
  EXPECT_EQ(nlohmann::json::parse(reloaded.out)["total_params"], scaled["total_params"]);
  const CliRun bad = RunMoelab("model show --model mixtral-8x7b --layers 0 --spec-out " +
                               (dir / "bad.json").string());
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--layers"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.json"));
  // An error found while describing (--tau) leaves no --spec-out either; one file named by both
  // outputs is refused.
  const CliRun bad_tau = RunMoelab("model show --model mixtral-8x7b --tau 2 --spec-out " +
                                   (dir / "bad.json").string());
  EXPECT_EQ(bad_tau.status, 1);
  EXPECT_NE(bad_tau.err.find("tau"), std::string::npos) << bad_tau.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.json"));
  const CliRun same =
      RunMoelab("model show --model mixtral-8x7b --spec-out " + (dir / "bad.json").string() +
                " --out " + (dir / "." / "bad.json").string());
  EXPECT_EQ(same.status, 1);
  EXPECT_NE(same.err.find("name the same file"), std::string::npos) << same.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.json"));
  std::filesystem::remove_all(dir);
}

TEST(Cli, PlanSdJsonHasRowsAndBestGamma) {
  const CliRun r = RunMoelab(
      "plan sd --model qwen2-57b-a14b --draft qwen2-0.5b --hardware 2xa100-80gb-sxm --alpha 0.8 "
      "--batch 1,4,16 --gamma 1-4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["rows"].size(), 12u);
  for (const auto& row : json["rows"]) {
    for (const char* field : {"batch", "gamma", "speedup", "target_efficiency"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
  }
  ASSERT_EQ(json["best_gamma"].size(), 3u);
  for (const auto& best : json["best_gamma"]) {
    EXPECT_TRUE(best.contains("batch") && best.contains("gamma") && best.contains("speedup"));
  }
  EXPECT_EQ(json["cost_source"], "analytic-roofline");
}

TEST(Cli, PlanSdDefaultsRunAndPrintATable) {
  const CliRun r = RunMoelab("plan sd");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Best gamma per batch"), std::string::npos);
}

TEST(Cli, ListsAndShowsPresets) {
  CliRun r = RunMoelab("hw list");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("h100-sxm"), std::string::npos);
  r = RunMoelab("hw show 8xh800 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["accelerator_count"], 8);
  r = RunMoelab("model list");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("deepseek-v3"), std::string::npos);
  r = RunMoelab("devices");
  EXPECT_EQ(r.status, 0) << r.err;  // no GPU is a message, not a failure
  EXPECT_FALSE(r.out.empty());
}

// hw from-profile describes the executor's storage tier: its reader's two reads in flight by
// default, another count on request, and a count below 1 refused.
TEST(Cli, HardwareFromProfileSaysHowManyReadsShareTheDisk) {
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  CliRun r = RunMoelab("hw from-profile " + profile + " --memory 3GB --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["host"]["storage_reads_in_flight"], 2);
  r = RunMoelab("hw from-profile " + profile + " --memory 3GB --reads-in-flight 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["host"]["storage_reads_in_flight"], 1);
  r = RunMoelab("hw from-profile " + profile + " --memory 3GB --reads-in-flight 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("reads in flight must be at least 1"), std::string::npos) << r.err;
}

// --storage-read-bandwidth prices the reads at a bandwidth measured when the priced runs ran
// (alone and beside computation alike), and refuses one beyond every disk.
TEST(Cli, HardwareFromProfileTakesAMeasuredReadBandwidth) {
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  CliRun r = RunMoelab("hw from-profile " + profile +
                       " --memory 3GB --storage-read-bandwidth 2.5e9 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json host = nlohmann::json::parse(r.out)["host"];
  EXPECT_EQ(host["storage_read_bandwidth_bytes_per_s"], 2.5e9);
  for (const char* bad : {"0", "-1", "1e300", "fast"}) {
    r = RunMoelab("hw from-profile " + profile + " --memory 3GB --storage-read-bandwidth " + bad);
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_NE(r.err.find("--storage-read-bandwidth"), std::string::npos) << bad << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad;
  }
}

// This machine with its experts on storage, priced by a profile taken at a scaled shape (moelab
// profile --layers 4): sim offload simulates the shape the profile recorded, prices the CPU that
// computes with its curves, and refuses another model's name.
TEST(Cli, SimOffloadOnAStorageTierTakesTheProfilesShape) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-storage-tier");
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  nlohmann::json fit;
  std::ifstream(testing::TestDataDir() / "fits/latency-quick-cpu.json") >> fit;
  fit["model"]["shape"]["layers"] = 4;
  const std::string fit_path = (dir / "fit-4-layers.json").string();
  std::ofstream(fit_path) << fit.dump();
  const std::string hw = (dir / "hw.json").string();
  CliRun r = RunMoelab("hw from-profile " + profile + " --memory 3GB --out " + hw);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string sim = "sim offload --hardware " + hw + " --profile " + fit_path +
                          " --policy on-demand --workload decode --prompt 16 --tokens 4 --json";
  r = RunMoelab(sim + " --model mixtral-8x7b");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["cost_source"], "fitted-profile");
  EXPECT_EQ(json["memory"]["experts_total"], 4 * 8);  // the profile's 4 layers, not the preset's
  r = RunMoelab(sim + " --model qwen1.5-moe-a2.7b");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("the profile measured 'mixtral-8x7b', not 'qwen1.5-moe-a2.7b'"),
            std::string::npos)
      << r.err;
  // A fit that does not say what it measured prices no model (it priced any with another's
  // curves).
  fit.erase("model");
  std::ofstream(fit_path) << fit.dump();
  r = RunMoelab("plan sd --model qwen2-57b-a14b --profile " + fit_path);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("the fit does not record which model its profile measured"),
            std::string::npos)
      << r.err;
  std::filesystem::remove_all(dir);
}

// A batch whose KV cache does not fit is never where "SD pays", nor a best gamma beside ones
// that fit.
TEST(Cli, PlanSdPaysOnlyWhereTheBatchFits) {
  const CliRun r = RunMoelab(
      "plan sd --model mixtral-8x7b --draft qwen2-0.5b --hardware 2xh100-sxm --batch 1,64,512 "
      "--gamma 4 --alpha 0.9 --context 30000 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["best_gamma"].size(), 3u);
  EXPECT_TRUE(json["best_gamma"][0]["fits_memory"].get<bool>());
  EXPECT_FALSE(json["best_gamma"][2]["fits_memory"].get<bool>());
  EXPECT_GT(json["best_gamma"][2]["speedup"].get<double>(), 1.0);  // would "pay", but cannot run
  ASSERT_TRUE(json["pays_batch_range"].is_object());
  EXPECT_LT(json["pays_batch_range"]["max_batch"].get<int64_t>(), 512);
  const CliRun text = RunMoelab(
      "plan sd --model mixtral-8x7b --draft qwen2-0.5b --hardware 2xh100-sxm --batch 1,64,512 "
      "--gamma 4 --alpha 0.9 --context 30000");
  EXPECT_NE(text.out.find("among those listed that fit in memory"), std::string::npos) << text.out;
}

struct BadInput {
  std::string args;
  std::string expected_message;
};

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ClearErrorNonZeroExitNoOutputFile) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-bad");
  const std::filesystem::path out = dir / "result.json";
  const CliRun r = RunMoelab(GetParam().args + " --out " + out.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(GetParam().expected_message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "no temporary files left behind";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, CliBadInput,
    ::testing::Values(BadInput{"plan sd --model mixtral-8x8b", "did you mean 'mixtral-8x7b'"},
                      BadInput{"plan sd --hardware h100-sxn", "did you mean 'h100-sxm'"},
                      BadInput{"plan sd --alpha 1.0", "--alpha 1.0: expected a number in [0, 1)"},
                      BadInput{"plan sd --alpha -0.2", "expected a number in [0, 1)"},
                      BadInput{"plan sd --alpha abc", "--alpha 'abc': expected a finite number"},
                      BadInput{"plan sd --gamma 0", "0 is below 1"},
                      BadInput{"plan sd --batch -4", "--batch '-4'"},
                      BadInput{"plan sd --batch 1,,2", "empty item"},
                      BadInput{"plan sd --hardware a100-80gb-sxm", "per device"},
                      BadInput{"plan sd --hardware pcie4-x16", "not something that computes"},
                      BadInput{"plan sd --memory-efficiency 0", "memory_efficiency"},
                      BadInput{"plan sd --verify all", "expected \"gamma+1\" or \"gamma\""},
                      BadInput{"sim sd --sigma 0.1 --gamma 1-4",
                               "accepts fewer than the 1 token every round yields"},
                      BadInput{"plan sd --no-such-option 3", "unrecognised option"},
                      BadInput{"model show --model /nonexistent/model.json",
                               "model file not found"},
                      BadInput{"model show --model qwen3-30b", "did you mean 'qwen3-30b-a3b'"}));

TEST(Cli, MalformedAndImpossibleModelFilesAreNamed) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-model");
  const std::filesystem::path broken = dir / "broken.json";
  std::ofstream(broken) << "{\"schema\": \"moelab.model/1\",";
  CliRun r = RunMoelab("model show --model " + broken.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("broken.json: malformed JSON"), std::string::npos) << r.err;

  nlohmann::json spec =
      nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  spec["moe"]["top_k"] = 12;
  const std::filesystem::path impossible = dir / "impossible.json";
  std::ofstream(impossible) << spec.dump();
  r = RunMoelab("model show --model " + impossible.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("impossible.json: field 'moe.top_k'"), std::string::npos) << r.err;

  spec = nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  spec["num_layers"] = 0;
  std::ofstream(impossible) << spec.dump();
  r = RunMoelab("model show --model " + impossible.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("field 'num_layers'"), std::string::npos) << r.err;

  // A misspelt field was ignored and its default taken: first_dense_layer ran as no dense layer.
  spec = nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  spec["moe"]["first_dense_layer"] = 4;
  std::ofstream(impossible) << spec.dump();
  r = RunMoelab("model show --model " + impossible.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("impossible.json: field 'moe.first_dense_layer': unknown (not a field of "
                       "moelab.model/1"),
            std::string::npos)
      << r.err;
  // A field of the other attention kind does nothing here, and is refused the same way.
  spec = nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  spec["attention"]["kv_lora_rank"] = 512;
  spec["extra"] = true;
  std::ofstream(impossible) << spec.dump();
  r = RunMoelab("model show --model " + impossible.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("field 'attention.kv_lora_rank': unknown"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

const char* kSmallShape =
    "--layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 "
    "--vocab 101 --draft-layers 1 --draft-hidden 32 --draft-dense-intermediate 64 --draft-heads 2 "
    "--draft-kv-heads 1 "
    "--draft-head-dim 16 --threads 2";

TEST(Cli, RunDecodeReportsTheInterfaceFields) {
  const CliRun r = RunMoelab(std::string("run ") + kSmallShape +
                             " --workload decode --batch 2 --prompt 6 --tokens 5 --seed 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  for (const char* field : {"ttft_s", "tpot_s", "tokens_per_s", "weight_bytes_per_token"}) {
    ASSERT_TRUE(json[field].is_number()) << field;
    EXPECT_GT(json[field].get<double>(), 0) << field;
  }
  EXPECT_EQ(json["outputs"].size(), 2u);
  EXPECT_EQ(json["outputs"][0].size(), 5u);
  // One prefill and four decode steps, each with [layer][expert] token counts summing to K per
  // token.
  ASSERT_EQ(json["expert_token_counts"].size(), 5u);
  int64_t routed = 0;
  for (const auto& layer : json["expert_token_counts"][1]) {
    for (const auto& count : layer) routed += count.get<int64_t>();
  }
  EXPECT_EQ(routed, 2 /*layers*/ * 2 /*tokens*/ * 2 /*top-k*/);
  // Same seed, same tokens.
  const CliRun again =
      RunMoelab(std::string("run ") + kSmallShape +
                " --workload decode --batch 2 --prompt 6 --tokens 5 --seed 3 --json");
  EXPECT_EQ(nlohmann::json::parse(again.out)["outputs"], json["outputs"]);
}

TEST(Cli, RunSpeculativeReportsSdStatistics) {
  const CliRun r =
      RunMoelab(std::string("run ") + kSmallShape +
                " --workload sd --batch 2 --prompt 4 --tokens 12 --gamma 3 --alpha 0.7 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  for (const char* field : {"speedup", "sigma", "target_efficiency"}) {
    ASSERT_TRUE(json["sd"][field].is_number()) << field;
    EXPECT_GT(json["sd"][field].get<double>(), 0) << field;
  }
  EXPECT_LE(json["sd"]["sigma"].get<double>(), 1.0);
  EXPECT_EQ(json["draft"]["vocab"], 101);  // the draft shares the target's vocabulary
}

TEST(Cli, RunPrefillAndBeamAndTraceOut) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-run");
  CliRun r = RunMoelab(std::string("run ") + kSmallShape +
                       " --workload prefill --prompt 16 --routing uniform --json --trace-out " +
                       (dir / "trace.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["tpot_s"].is_null());
  EXPECT_EQ(nlohmann::json::parse(Slurp(dir / "trace.json"))["schema"], "moelab.routing_trace/1");
  // Replaying the recorded trace routes the same way.
  r = RunMoelab(
      std::string("run ") + kSmallShape +
      " --workload prefill --prompt 16 --json --routing trace:" + (dir / "trace.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  r = RunMoelab(std::string("run ") + kSmallShape +
                " --workload beam --beam 3 --tokens 4 --json --timeline-out " +
                (dir / "timeline.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["beams"].size(), 3u);
  // The execution timeline: one "pass N" per forward pass, the operators in the simulator's names.
  const nlohmann::json timeline = nlohmann::json::parse(Slurp(dir / "timeline.json"));
  std::map<std::string, int> names;
  for (const nlohmann::json& e : timeline["traceEvents"]) {
    if (e["ph"] == "X") ++names[e["cat"].get<std::string>()];
  }
  EXPECT_EQ(names["pass"], 4) << "the prompt's pass and three beam steps";
  EXPECT_EQ(names["lm_head"], 4);
  EXPECT_GT(names["dense"], 0);
  EXPECT_GT(names["expert"], 0);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    RunErrors, CliBadInput,
    ::testing::Values(
        BadInput{"run --workload stream", "unknown workload 'stream'"},
        BadInput{"run --batch 0", "--batch must be at least 1"},
        BadInput{"run --layers 0", "--layers must be at least 1"},
        BadInput{"run --experts 8 --top-k 9", "top_k: must be between 1 and experts (8), got 9"},
        BadInput{"run --workload sd --alpha 1", "alpha must be in [0, 1)"},
        BadInput{"run --workload sd --acceptance greedy --alpha 0.5",
                 "--alpha applies to --acceptance alpha or alpha-coin only"},
        BadInput{"run --offload-calibration trace:x.json",
                 "--offload-calibration applies with --offload POLICY only"},
        BadInput{"run --offload fmoe --expert-memory 1GB --offload-calibration "
                 "trace:/nonexistent/trace.json",
                 "/nonexistent/trace.json"},
        BadInput{"run --offload-reader io_uring",
                 "--offload-reader applies with --offload POLICY only"},
        BadInput{"run --offload-readers 4", "--offload-readers applies with --offload POLICY only"},
        BadInput{"run --offload on-demand --expert-memory 1GB --offload-reader aio",
                 "--offload-reader: expected threads or io_uring, got 'aio'"},
        BadInput{"run --device tpu", "--device must be cpu or gpu"},
        // Options of another workload or device changed nothing (a decode without a draft).
        BadInput{"run --gamma 3", "--gamma applies with --workload sd only"},
        BadInput{"run --workload prefill --draft qwen2-0.5b",
                 "--draft applies with --workload sd only"},
        BadInput{"run --beam 3", "--beam applies with --workload beam only"},
        BadInput{"run --gpu 3", "--gpu applies with --device gpu only"},
        BadInput{"run --device gpu --attention-bits 8", "--device gpu runs bf16 attention"},
        BadInput{"run --device gpu --expert-bits 4 --offload on-demand --expert-memory 1GB",
                 "--device gpu --offload moves bf16 experts"},
        BadInput{"run --device gpu --timeline-out timeline.json",
                 "--timeline-out records the CPU executor's threads"},
        BadInput{"run --device gpu --offload on-demand --expert-memory 1GB --offload-dir /tmp",
                 "--offload-dir applies to --device cpu"},
        BadInput{"run --device gpu --offload on-demand --expert-memory 1GB --offload-readers 3",
                 "--offload-readers applies to --device cpu"},
        BadInput{"run --model deepseek-v2", "multi-head latent attention"},
        BadInput{"run --routing trace:/nonexistent/trace.json", "/nonexistent/trace.json"},
        BadInput{"run --workload beam --batch 2", "--batch must be 1"},
        BadInput{"run --weights /nonexistent/model.safetensors", "/nonexistent/model.safetensors"},
        BadInput{"run --layers 32 --hidden 4096 --intermediate 14336",
                 "GB of weights but this machine has"},
        BadInput{"run --tokens 5000 --layers 1 --hidden 64 --intermediate 64 --heads 4 --kv-heads "
                 "2 --head-dim 16 --vocab 50",
                 "max_positions"}));

// The refusal of the storage tier's flags on --device gpu looks at what was given, not at the
// defaults every run has (it refused every GPU offload run while --offload-readers had a default).
TEST(Cli, GpuOffloadWithoutStorageFlagsIsNotRefusedForThem) {
  const CliRun r = RunMoelab(
      "run --device gpu --offload fiddler --expert-memory 200MB --layers 2 --hidden 64 "
      "--intermediate 128 --heads 4 --kv-heads 2 --head-dim 16 --vocab 64 --prompt 4 --tokens 4");
  EXPECT_EQ(r.err.find("applies to --device cpu"), std::string::npos) << r.err;
  // Without a GPU (or without CUDA in the build) the refusal is about the device itself.
  if (r.status != 0) {
    EXPECT_NE(r.err.find("--device gpu: "), std::string::npos) << r.err;
  }
}

TEST(Cli, SimSdSweepsAlphaWithPlanSdRows) {
  const CliRun r = RunMoelab(
      "sim sd --model mixtral-8x7b --draft qwen2-0.5b --hardware 2xh100-sxm --alpha 0.6,0.8 "
      "--batch 1,16 --gamma 1-3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["rows"].size(), 2u * 2u * 3u);
  for (const auto& row : json["rows"]) {
    for (const char* field : {"batch", "gamma", "speedup", "target_efficiency", "alpha", "sigma"})
      EXPECT_TRUE(row.contains(field)) << field;
  }
  EXPECT_EQ(json["best_gamma"].size(), 4u);
  EXPECT_EQ(json["cost_source"], "analytic-roofline");
  // The same point through plan sd gives the same speedup.
  const CliRun plan = RunMoelab(
      "plan sd --model mixtral-8x7b --draft qwen2-0.5b --hardware 2xh100-sxm --alpha 0.8 "
      "--batch 16 --gamma 2 --json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const double planned = nlohmann::json::parse(plan.out)["rows"][0]["speedup"].get<double>();
  bool found = false;
  for (const auto& row : json["rows"]) {
    if (row["alpha"] == 0.8 && row["batch"] == 16 && row["gamma"] == 2) {
      EXPECT_DOUBLE_EQ(row["speedup"].get<double>(), planned);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(Cli, PlanHardwareFindsTheSmallestThatMeetsTheTarget) {
  const CliRun r =
      RunMoelab("plan hardware --model mixtral-8x7b --tpot-max 0.02 --devices 1,2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_TRUE(json["smallest"].is_string());
  double smallest_memory = 0;
  for (const auto& row : json["rows"]) {
    if (row["hardware"] == json["smallest"]) {
      EXPECT_TRUE(row["meets"].get<bool>());
      EXPECT_LE(row["tpot_s"].get<double>(), 0.02);
      smallest_memory = row["memory_bytes"].get<double>();
    }
  }
  for (const auto& row : json["rows"]) {
    if (row["meets"].get<bool>()) {
      EXPECT_GE(row["memory_bytes"].get<double>(), smallest_memory);
    }
    if (!row["fits_memory"].get<bool>()) {
      EXPECT_FALSE(row["meets"].get<bool>());
    }
  }
  EXPECT_TRUE(
      nlohmann::json::parse(
          RunMoelab("plan hardware --model mixtral-8x7b --tpot-max 1e-9 --json").out)["smallest"]
          .is_null());
}

TEST(Cli, PlanOffloadTabulatesPoliciesAcrossMemory) {
  const CliRun r = RunMoelab(
      "plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 16,48 "
      "--policies on-demand,fiddler --tokens 8 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["rows"].size(), 4u);
  // More accelerator memory never makes Fiddler slower on the same routing.
  double fiddler_16 = 0, fiddler_48 = 0;
  for (const auto& row : json["rows"]) {
    if (row["policy"] == "fiddler")
      (row["memory_bytes"].get<double>() < 20e9 ? fiddler_16 : fiddler_48) =
          row["tpot_s"].get<double>();
  }
  EXPECT_GT(fiddler_16, 0);
  EXPECT_LE(fiddler_48, fiddler_16);
}

INSTANTIATE_TEST_SUITE_P(
    SimPlanErrors, CliBadInput,
    ::testing::Values(
        BadInput{"sim sd --alpha 1.2", "--alpha value 1.2000: expected a number in [0, 1)"},
        BadInput{"sim sd --sigma 0", "--sigma value 0.0000: expected a number in (0, 1]"},
        BadInput{"sim sd --alpha 0.5 --sigma 0.5", "give --alpha or --sigma, not both"},
        BadInput{"sim sd --alpha 0.9:0.1:0.1", "expected start:stop:step"},
        // A context past the model's positions: refused, as sim offload and plan hardware do.
        BadInput{"sim sd --context 200000",
                 "--context 200000 plus the largest --gamma + 1 (200009 positions) exceed model "
                 "'qwen2-57b-a14b''s 131072 positions"},
        BadInput{"plan sd --model mixtral-8x7b --draft qwen2-0.5b --context 32765 --gamma 1-3",
                 "(32769 positions) exceed model 'mixtral-8x7b''s 32768 positions"},
        BadInput{"plan hardware --model mixtral-8x7b", "give --tpot-max and/or --ttft-max"},
        BadInput{"plan hardware --tpot-max -1", "must be > 0 seconds"},
        BadInput{"plan offload --policies lru,fiddler", "lru"},
        BadInput{"plan offload --memory 0", "--memory values must be > 0 GB"},
        BadInput{"plan offload --policies ''", "--policies '': expected one or more policy names"},
        // Too little memory for even no layer on the accelerator: said as such, not as a
        // plan checker's "policy bug".
        BadInput{"sim offload --model mixtral-8x7b --hardware rtx-3090 --policy static-split "
                 "--accelerator-memory 0.5GB",
                 "static-split: the accelerator's 0.50 GB cannot hold what stays on it"}));

TEST(Cli, UnknownCommandIsAnError) {
  const CliRun r = RunMoelab("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
  EXPECT_NE(RunMoelab("fit frobnicate").err.find("unknown command 'fit frobnicate'"),
            std::string::npos);
}

// A command group lists its subcommands: on --help (status 0, stdout), alone (status 2, stderr).
TEST(Cli, CommandGroupListsItsSubcommands) {
  const CliRun help = RunMoelab("fit --help");
  EXPECT_EQ(help.status, 0) << help.err;
  for (const char* subcommand : {"fit calibrate", "fit latency", "fit sd", "fit predict"})
    EXPECT_NE(help.out.find(subcommand), std::string::npos) << subcommand;
  EXPECT_EQ(help.out.find("sim offload"), std::string::npos) << "another group's command";
  const CliRun alone = RunMoelab("sim");
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("sim offload"), std::string::npos);
}

TEST(Cli, VersionNamesTheBuildsCommit) {
  const CliRun version = RunMoelab("--version");
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out.rfind("moelab ", 0), 0u) << version.out;
  EXPECT_NE(version.out.find("(git "), std::string::npos) << version.out;
}

}  // namespace
}  // namespace moelab::cli
