// moelab sim offload as a user runs it: the interface fields, determinism, the timeline file and
// every error path (one line on stderr, exit status 1, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/cli_runner.h"

namespace moelab::sim {
namespace {

using testing::RunMoelab;
using testing::Slurp;

// "sim offload" with `args`, plus defaults for the options `args` does not set.
std::string Sim(const std::string& args) {
  static const std::pair<const char*, const char*> kDefaults[] = {{"--model", "mixtral-8x7b"},
                                                                  {"--hardware", "rtx-3090"},
                                                                  {"--prompt", "16"},
                                                                  {"--tokens", "8"},
                                                                  {"--seed", "3"}};
  std::string command = "sim offload ";
  command.append(args);
  for (const auto& [name, value] : kDefaults) {
    const std::string option(name);
    if (args.find(option + " ") == std::string::npos &&
        args.find(option + "=") == std::string::npos) {
      command.append(" ").append(option).append(" ").append(value);
    }
  }
  return command;
}

TEST(SimOffloadCli, JsonHasTheInterfaceFields) {
  const auto r =
      RunMoelab(Sim("--policy lru-prefetch --cache-per-layer 1 --prefetch 1 "
                    "--routing correlated:locality=0.3,layer=0.5 --workload decode --json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  for (const char* field : {"ttft_s", "tpot_s", "tokens_per_s", "hit_rate", "bytes_h2d"}) {
    ASSERT_TRUE(json[field].is_number()) << field;
    EXPECT_GT(json[field].get<double>(), 0) << field;
  }
  EXPECT_EQ(json["schema"], "moelab.sim_offload/1");
  EXPECT_EQ(json["policy"], "lru-prefetch");
  EXPECT_EQ(json["cost_source"], "analytic-roofline");
  EXPECT_EQ(json["policy_options"]["cache_per_layer"], 1);
  EXPECT_TRUE(json["provenance"].contains("git_commit"));
  for (const char* resource :
       {"accelerator_compute", "cpu_compute", "host_to_device", "device_to_host", "storage_read"}) {
    EXPECT_TRUE(json["busy_s"][resource].is_number()) << resource;
  }
  for (const char* tier : {"host_to_accelerator_expert_weights", "accelerator_to_host_activations",
                           "storage_to_host"}) {
    EXPECT_TRUE(json["bytes_per_tier"][tier].is_number()) << tier;
  }
}

TEST(SimOffloadCli, EveryWorkloadRuns) {
  for (const std::string workload :
       {"--workload prefill --prompt 64", "--workload beam --beam 4", "--workload batch --batch 4",
        "--workload verify --batch 2 --gamma 3 --alpha 0.7"}) {
    const auto r = RunMoelab(Sim("--policy fiddler " + workload + " --json"));
    ASSERT_EQ(r.status, 0) << workload << ": " << r.err;
    const nlohmann::json json = nlohmann::json::parse(r.out);
    EXPECT_GT(json["ttft_s"].get<double>(), 0) << workload;
    EXPECT_TRUE(json["tokens_per_s"].is_number()) << workload;
  }
}

TEST(SimOffloadCli, SameSeedSameOutputApartFromTheClock) {
  const std::filesystem::path dir = testing::MakeTempDir("sim-determinism");
  const std::string args = Sim("--policy fmoe --routing correlated:locality=0.4,layer=0.6 --json");
  const auto a = RunMoelab(args + " --trace-out " + (dir / "a.json").string());
  const auto b = RunMoelab(args + " --trace-out " + (dir / "b.json").string());
  ASSERT_EQ(a.status, 0) << a.err;
  nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  // The provenance carries the command line and the wall-clock time; everything else is bytes.
  ja.erase("provenance");
  jb.erase("provenance");
  EXPECT_EQ(ja.dump(2), jb.dump(2));
  EXPECT_EQ(Slurp(dir / "a.json"), Slurp(dir / "b.json"));
  const auto other =
      RunMoelab(Sim("--policy fmoe --routing correlated:locality=0.4,layer=0.6 --json --seed 4"));
  nlohmann::json jo = nlohmann::json::parse(other.out);
  jo.erase("provenance");
  EXPECT_NE(jo.dump(), ja.dump());
  std::filesystem::remove_all(dir);
}

TEST(SimOffloadCli, TraceOutIsAPerfettoTimeline) {
  const std::filesystem::path dir = testing::MakeTempDir("sim-trace");
  const std::filesystem::path file = dir / "timeline.json";
  const auto r = RunMoelab(
      Sim("--policy static-split --gpu-layers 20 --accelerator-memory 80GB --json --trace-out " +
          file.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json trace = nlohmann::json::parse(Slurp(file));
  int complete = 0;
  std::set<std::pair<int, int>> lanes;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    ++complete;
    lanes.insert({event["pid"].get<int>(), event["tid"].get<int>()});
  }
  EXPECT_GT(complete, 100);
  EXPECT_TRUE(lanes.count({1, 1}) && lanes.count({2, 1}) && lanes.count({1, 3}));  // GPU, CPU, D2H
  std::filesystem::remove_all(dir);
}

// The executor records the routing it ran; the simulator replays it on a model of the same
// routed shape (here Mixtral's costs with the executor's 2 MoE layers x 4 experts, top-2).
TEST(SimOffloadCli, ReplaysATraceRecordedByTheExecutor) {
  const std::filesystem::path dir = testing::MakeTempDir("sim-replay");
  const std::string trace = (dir / "trace.json").string();
  auto r = RunMoelab(
      "run --layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
      "--head-dim 16 --vocab 101 --threads 1 --workload decode --prompt 6 --tokens 4 --seed 3 "
      "--json "
      "--trace-out " +
      trace);
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json model =
      nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  model["name"] = "mixtral-2x4";
  model["num_layers"] = 2;
  model["moe"]["num_experts"] = 4;
  std::ofstream(dir / "model.json") << model.dump();
  r = RunMoelab(Sim("--model " + (dir / "model.json").string() +
                    " --policy on-demand --accelerator-memory 2GB "
                    "--prompt 6 --tokens 4 --routing trace:" +
                    trace + " --json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["experts"]["routed_tokens"], (6 + 3) * 2 /*layers*/ * 2 /*top-k*/);
  EXPECT_TRUE(json["calibration"]["in_sample"].get<bool>());
  EXPECT_LT(json["hit_rate"].get<double>(), 1.0);  // 4 slots for 8 experts
  // A different prompt length does not match the recorded steps: a clear error.
  r = RunMoelab(Sim("--model " + (dir / "model.json").string() +
                    " --policy on-demand --accelerator-memory 2GB "
                    "--prompt 7 --tokens 4 --routing trace:" +
                    trace + " --json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("asked for 7 tokens at step 0"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(SimOffloadCli, TextSummaryAndHelp) {
  auto r = RunMoelab(Sim("--policy on-demand"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("expert hit rate"), std::string::npos) << r.out;
  r = RunMoelab("sim offload --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("lru-prefetch"), std::string::npos);
  EXPECT_NE(r.out.find("--accelerator-memory"), std::string::npos);
}

struct BadInput {
  std::string args;
  std::string message;
};

class SimOffloadCliError : public ::testing::TestWithParam<BadInput> {};

TEST_P(SimOffloadCliError, OneLineNonZeroExitNoFiles) {
  const std::filesystem::path dir = testing::MakeTempDir("sim-cli-bad");
  const auto r = RunMoelab(GetParam().args + " --out " + (dir / "result.json").string() +
                           " --trace-out " + (dir / "timeline.json").string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "no output or temporary files";
  std::filesystem::remove_all(dir);
}

// A command for `policy` whose extra options are appended by the caller (defaults filled last).
struct Base {
  explicit Base(std::string policy) : args("--policy " + std::move(policy)) {}
  std::string operator+(const std::string& extra) const { return Sim(args + extra); }
  operator std::string() const { return Sim(args); }  // NOLINT: test shorthand
  std::string args;
};

INSTANTIATE_TEST_SUITE_P(
    Errors, SimOffloadCliError,
    ::testing::Values(
        BadInput{Base("lru") + "",
                 "unknown offload policy 'lru'; valid policies: resident, on-demand, static-split, "
                 "lru-prefetch, fiddler, fmoe, stream-all"},
        BadInput{Sim(""), "--policy is required; valid policies: resident"},
        BadInput{"sim offload --hardware rtx-3090 --policy resident", "--model is required"},
        BadInput{Base("resident") + " --model mixtral-8x8b", "did you mean 'mixtral-8x7b'"},
        BadInput{Base("resident") + " --hardware rtx-3091", "did you mean"},
        BadInput{Base("resident") + " --hardware 2xrtx-3090",
                 "models one accelerator and its host"},
        BadInput{Base("resident") + " --hardware ryzen-9-7950x", "has no accelerator"},
        BadInput{Base("resident") + " --model llama-3.2-1b", "dense"},
        BadInput{Base("resident") + " --workload stream", "--workload: unknown workload 'stream'"},
        BadInput{Base("resident") + " --prompt 0", "--prompt must be at least 1"},
        BadInput{Base("resident") + " --tokens 0", "--tokens must be at least 1"},
        BadInput{Base("resident") + " --batch 4", "--workload decode serves one request"},
        BadInput{Base("resident") + " --beam 4", "--beam applies to --workload beam only"},
        BadInput{Base("resident") + " --workload beam --beam 0", "--beam must be at least 1"},
        BadInput{Base("resident") + " --gamma 3",
                 "--gamma and --alpha apply to --workload verify only"},
        BadInput{Base("resident") + " --workload verify --alpha 1", "--alpha must be in [0, 1)"},
        BadInput{Base("resident") + " --expert-bits 0",
                 "--expert-bits 0: expected bits in (0, 32]"},
        BadInput{Base("resident") + " --attention-bits four",
                 "--attention-bits 'four': expected a finite number"},
        BadInput{Base("resident") + " --accelerator-memory lots",
                 "--accelerator-memory 'lots': expected a positive size"},
        BadInput{Base("resident") + " --accelerator-memory 24XB", "--accelerator-memory '24XB'"},
        BadInput{Base("resident") + " --accelerator-memory=-5GB", "expected a positive size"},
        BadInput{
            Base("fiddler") + " --cache-per-layer 2",
            "--cache-per-layer: policy 'fiddler' does not take it; it takes --staging-buffers"},
        BadInput{Base("resident") + " --gpu-layers 2",
                 "--gpu-layers: policy 'resident' does not take it"},
        BadInput{Base("lru-prefetch") + " --cache-per-layer 9",
                 "--cache-per-layer must be in [1, 8]"},
        BadInput{Base("lru-prefetch") + " --cache-per-layer 3", "at most 1 per layer fit"},
        BadInput{Base("lru-prefetch") + " --prefetch 5 --staging-buffers 4",
                 "--prefetch 5 needs as many staging buffers"},
        BadInput{Base("lru-prefetch") + " --accelerator-memory 12GB",
                 "does not hold one expert per layer"},
        BadInput{Base("static-split") + " --gpu-layers 40", "--gpu-layers must be in [0, 32]"},
        BadInput{Base("static-split") + " --gpu-layers 20", "at most 8 layers fit"},
        BadInput{Base("fmoe") + " --prefetch-distance 0", "--prefetch-distance must be at least 1"},
        BadInput{Base("fiddler") + " --staging-buffers 0", "--staging-buffers must be at least 1"},
        BadInput{Base("on-demand") + " --accelerator-memory 3GB",
                 "leaves no room for a single expert"},
        BadInput{Base("resident") + " --routing zipf", "routing 'zipf' is not understood"},
        BadInput{Base("resident") + " --routing gate",
                 "--routing gate: the simulator has no model gate"},
        BadInput{Base("resident") + " --routing correlated:locality=2",
                 "'locality' must be in [0, 0.99]"},
        BadInput{Base("resident") + " --routing correlated:spread=2", "unknown key 'spread'"},
        BadInput{Base("resident") + " --routing trace:/nonexistent/trace.json",
                 "/nonexistent/trace.json"},
        BadInput{Base("resident") + " --routing popularity:/nonexistent/table.csv",
                 "/nonexistent/table.csv"},
        BadInput{Base("resident") + " --cpu-threads -1", "--cpu-threads must be >= 0"},
        BadInput{Base("resident") + " --memory-efficiency 0", "memory_efficiency"},
        BadInput{Base("resident") + " --no-such-option 1", "unrecognised option"}));

}  // namespace
}  // namespace moelab::sim
