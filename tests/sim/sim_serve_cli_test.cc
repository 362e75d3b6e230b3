// moelab sim serve and plan capacity as a user runs them: loadgen's schema, determinism, the
// timeline and decision log, the KV budget's origin, and errors naming the option (exit 1, no
// output file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serving/serving_metrics.h"
#include "tests/support/cli_runner.h"

namespace moelab::sim {
namespace {

using testing::RunMoelab;
using testing::Slurp;

const std::string kServe =
    "sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals poisson:4 "
    "--requests 300 --prompt-tokens uniform:64,1024 --output-tokens uniform:16,256 --seed 7 ";

TEST(SimServeCli, JsonIsLoadgensSchemaPlusTheRunsSettings) {
  const auto r = RunMoelab(kServe + "--slo-ttft 0.5 --slo-tpot 0.05 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "moelab.serving/1");
  // Every field loadgen's summary has, with the same JSON type, so the two diff field by field.
  const nlohmann::json loadgen = serving::ServingSummaryToJson(serving::ServingSummary{});
  for (const auto& [key, value] : loadgen.items()) {
    ASSERT_TRUE(json.contains(key)) << key;
    EXPECT_EQ(json[key].is_object(), value.is_object()) << key;
    EXPECT_EQ(json[key].is_number(), value.is_number()) << key;
    if (value.is_object()) {
      for (const auto& [inner, ignored] : value.items()) EXPECT_TRUE(json[key].contains(inner));
    }
  }
  for (const char* field : {"throughput_tokens_per_s", "requests_per_s", "goodput_requests_per_s",
                            "completed", "failed", "failures", "duration_s", "scheduler", "load",
                            "cost_source", "iterations", "mean_batch_sequences", "kv_budget"}) {
    EXPECT_TRUE(json.contains(field)) << field;
  }
  EXPECT_EQ(json["completed"], 300);
  EXPECT_EQ(json["failed"], 0);
  EXPECT_GT(json["ttft_s"]["p50"].get<double>(), 0);
  EXPECT_GE(json["ttft_s"]["p99"].get<double>(), json["ttft_s"]["p50"].get<double>());
  EXPECT_EQ(json["scheduler"]["max_running_sequences"], 64);
  EXPECT_NE(json["kv_budget"]["from"].get<std::string>().find("cost source's memory"),
            std::string::npos);
  EXPECT_GT(json["kv_budget"]["blocks"].get<int64_t>(), 1000);
  EXPECT_EQ(json["cost_source"]["cost_source"], "analytic-roofline");
  EXPECT_EQ(json["load"]["arrivals"], "poisson:4");
  // The same seed, the same run.
  const auto again = RunMoelab(kServe + "--slo-ttft 0.5 --slo-tpot 0.05 --json");
  nlohmann::json a = json, b = nlohmann::json::parse(again.out);
  a.erase("provenance");
  b.erase("provenance");
  EXPECT_EQ(a, b);
}

TEST(SimServeCli, MoreLoadWaitsLonger) {
  const auto light = RunMoelab(kServe + "--json");
  const auto heavy = RunMoelab(
      "sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals poisson:40 "
      "--requests 300 --prompt-tokens uniform:64,1024 --output-tokens uniform:16,256 --seed 7 "
      "--json");
  ASSERT_EQ(light.status, 0) << light.err;
  ASSERT_EQ(heavy.status, 0) << heavy.err;
  const auto l = nlohmann::json::parse(light.out), h = nlohmann::json::parse(heavy.out);
  EXPECT_GT(h["ttft_s"]["p90"].get<double>(), l["ttft_s"]["p90"].get<double>());
  EXPECT_GT(h["mean_batch_sequences"].get<double>(), l["mean_batch_sequences"].get<double>());
}

TEST(SimServeCli, TraceDecisionsCsvAndReplicas) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "sim_serve_cli";
  std::filesystem::create_directories(dir);
  const auto trace = dir / "trace.json", decisions = dir / "decisions.json";
  const auto r = RunMoelab(kServe + "--kv-blocks 400 --trace-out " + trace.string() +
                           " --decisions-out " + decisions.string() + " --csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ttft_s_p50"), std::string::npos);
  const nlohmann::json timeline = nlohmann::json::parse(Slurp(trace));
  bool counter = false, slice = false;
  for (const auto& event : timeline["traceEvents"]) {
    counter |= event["ph"] == "C" && event["name"] == "kv_blocks_used";
    slice |= event["ph"] == "X" && event["cat"] == "iteration";
  }
  EXPECT_TRUE(counter);
  EXPECT_TRUE(slice);
  const nlohmann::json log = nlohmann::json::parse(Slurp(decisions));
  EXPECT_EQ(log["schema"], "moelab.serving_decisions/1");
  EXPECT_EQ(log["scheduler"]["kv_blocks"], 400);
  EXPECT_GT(log["iterations"].size(), 100u);

  const auto two = RunMoelab(kServe + "--replicas 2 --json");
  ASSERT_EQ(two.status, 0) << two.err;
  const auto json = nlohmann::json::parse(two.out);
  EXPECT_EQ(json["requests_per_replica"], nlohmann::json::array({150, 150}));
}

TEST(SimServeCli, ErrorsNameTheOption) {
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {kServe + "--max-running 0", "--max-running 0"},
      {kServe + "--kv-blocks 4 --max-sequence-tokens 2000",
       "--max-sequence-tokens 2000 exceeds the KV budget's 64 tokens"},
      {kServe + "--max-running 4096", "--max-batched-tokens 2048: must be at least --max-running"},
      {kServe + "--queue-order lifo", "--queue-order lifo"},
      {kServe + "--router random", "--router random"},
      {kServe + "--replicas 0", "--replicas 0"},
      {kServe + "--replicas 2 --decisions-out x.json", "--decisions-out: needs --replicas 1"},
      {kServe + "--kv-memory-fraction 1.5", "--kv-memory-fraction"},
      {"sim serve --model qwen2-57b-a14b --arrivals poisson:1 --requests 5",
       "--hardware H or --profile"},
      {"sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals poisson:1",
       "--requests N or --duration S"},
      // One count: a list's first value was taken (3 requests simulated for "3,100").
      {"sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals poisson:1 "
       "--requests 3,100",
       "the argument ('3,100') for option '--requests' is invalid"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --max-batch 16,64,16",
       "--max-batch '16,64,16': 16 is listed twice"},
      // Accepted before and changed nothing, or doubled the rows.
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm,h100-sxm --rate 1 "
       "--slo-ttft-p99 1 --slo-tpot-p99 0.1",
       "--hardware h100-sxm: listed twice"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --policy resident,resident",
       "--policy resident: listed twice"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --price h100-sxm=1,h100-sxm=2",
       "--price h100-sxm: priced twice"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --kv-memory-fraction 100",
       "--kv-memory-fraction 100: expected a fraction in (0, 1]"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --alpha 0.5",
       "--alpha applies with --gamma G (G >= 1) only"},
      {"sim serve --model qwen2-57b-a14b --hardware rtx-3060 --arrivals poisson:1 --requests 5",
       "--kv-memory-fraction"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --policy on-demand,lru",
       "unknown offload policy 'lru'"},
      {kServe + "--offload lru", "--offload: unknown offload policy 'lru'"},
      {"sim serve --model qwen2-57b-a14b --profile p.json --offload on-demand --arrivals "
       "poisson:1 --requests 5",
       "--offload: needs --hardware H"},
      {kServe + "--cache-per-layer 4", "--cache-per-layer"},
      {kServe + "--accelerator-memory 10GB", "--accelerator-memory applies with --offload"},
      {kServe + "--expert-memory 10GB", "--expert-memory applies with --offload"},
      {kServe + "--offload on-demand --expert-memory 1GB --accelerator-memory 10GB", "give one"},
      {kServe + "--offload on-demand --routing trace:t.json", "--routing trace"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --gamma 64",
       "--gamma 64"},
      {kServe + "--gamma 40", "--max-batched-tokens 2048: must be at least --max-running"},
      // plan capacity's own options, not serve's --max-running it has not.
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --max-batch 8 --gamma 4 --max-batched-tokens 20",
       "--max-batched-tokens 20: must be at least --max-batch x decode tokens per step = 8 x 5"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1 "
       "--slo-tpot-p99 0.1 --max-batch 2000000",
       "--max-batch 2000000: above the limit of 1048576"},
      {kServe + "--gamma 2 --alpha 1", "--alpha"},
      {kServe + "--alpha 0.5", "--alpha applies with --gamma"},
      {kServe + "--routing zipf", "zipf"},
      // An objective of 0 s: every request misses it; loadgen refused it, sim serve took it.
      {kServe + "--slo-ttft 0", "--slo-ttft must be above 0 s"},
      {"plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 --slo-ttft-p99 1",
       "--slo-tpot-p99 is required"},
      {"sim serve --model mixtral-8x7b --hardware 8xh100-sxm --arrivals poisson:1 --requests 5 "
       "--max-sequence-tokens 40000",
       "--max-sequence-tokens 40000 exceeds model 'mixtral-8x7b''s max_position_embeddings 32768"},
  };
  for (const Case& c : cases) {
    const auto r = RunMoelab(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

// A trace's own length columns are its requests' lengths: a length option beside one was
// ignored while the report printed the option's value. Refused; without it the report names the
// column.
TEST(SimServeCli, ATracesLengthColumnsAreTheLengths) {
  const auto trace = std::filesystem::path(::testing::TempDir()) / "sim_serve_lengths.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,64,5\n0.5,32,5\n";
  const std::string command =
      "sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals trace:" +
      trace.string() + " ";
  const auto refused = RunMoelab(command + "--output-tokens 100");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("--output-tokens: the trace " + trace.string() +
                             " gives each request's output_tokens; leave the option out"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(RunMoelab(command + "--prompt-tokens 100").status, 1);
  const auto r = RunMoelab(command + "--json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["load"]["output_tokens"], "the trace's output_tokens column");
  EXPECT_EQ(json["load"]["prompt_tokens"], "the trace's prompt_tokens column");
  EXPECT_EQ(json["completed"], 2);
}

// Nothing completed: the latencies have no sample. They read 0 s (an instant answer) in the
// JSON, the CSV and the text; now null, empty and n/a.
TEST(SimServeCli, LatenciesWithoutASampleAreNull) {
  const std::string command =
      "sim serve --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --arrivals poisson:1 "
      "--requests 5 --prompt-tokens 64 --output-tokens 16 --max-sequence-tokens 10 ";
  const auto r = RunMoelab(command + "--json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["failed"], 5);
  EXPECT_EQ(json["ttft_s"]["count"], 0);
  EXPECT_TRUE(json["ttft_s"]["p50"].is_null()) << json["ttft_s"];
  EXPECT_TRUE(json["e2e_s"]["p99"].is_null());
  const auto text = RunMoelab(command);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("TTFT  n/a (no sample)"), std::string::npos) << text.out;
  const auto csv = RunMoelab(command + "--csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_NE(csv.out.find("\n,,,,0,"), std::string::npos) << csv.out;  // ttft_s p50..mean, count
}

// sim serve --offload: resident experts add nothing to the plain simulation; an offload policy
// with too little memory waits for its copies, and says so.
TEST(SimServeCli, OffloadWaitsForCopies) {
  const std::string base =
      "sim serve --model mixtral-8x7b --hardware a100-80gb-sxm --arrivals poisson:0.5 "
      "--requests 40 --prompt-tokens 128 --output-tokens 32 --seed 3 --max-running 8 "
      "--kv-blocks 512 --json ";
  const auto plain = RunMoelab(base);
  const auto resident = RunMoelab(base + "--offload resident");
  const auto offloaded = RunMoelab(base + "--offload on-demand --accelerator-memory 40GB");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(resident.status, 0) << resident.err;
  ASSERT_EQ(offloaded.status, 0) << offloaded.err;
  const auto p = nlohmann::json::parse(plain.out), r = nlohmann::json::parse(resident.out),
             o = nlohmann::json::parse(offloaded.out);
  EXPECT_TRUE(p["offload"].is_null());
  for (const char* metric : {"ttft_s", "tpot_s", "e2e_s"}) {
    EXPECT_NEAR(r[metric]["p50"].get<double>(), p[metric]["p50"].get<double>(),
                1e-9 * p[metric]["p50"].get<double>())
        << metric;
  }
  EXPECT_EQ(r["offload"]["policy"], "resident");
  EXPECT_EQ(r["offload"]["hit_rate"], 1.0);
  EXPECT_EQ(o["offload"]["policy"], "on-demand");
  EXPECT_LT(o["offload"]["hit_rate"].get<double>(), 1.0);
  EXPECT_GT(o["offload"]["experts"]["demand_fetches"].get<int64_t>(), 0);
  EXPECT_GT(o["time_breakdown_s"]["offload_s"].get<double>(), 0);
  EXPECT_GT(o["tpot_s"]["p50"].get<double>(), 2 * p["tpot_s"]["p50"].get<double>());
  // --expert-memory is moelab serve's: the cache alone, the rest of the memory added to it.
  const auto small = RunMoelab(base + "--offload on-demand --expert-memory 20GB");
  const auto large = RunMoelab(base + "--offload on-demand --expert-memory 21GB");
  ASSERT_EQ(small.status, 0) << small.err;
  ASSERT_EQ(large.status, 0) << large.err;
  const auto s = nlohmann::json::parse(small.out), l = nlohmann::json::parse(large.out);
  EXPECT_NEAR(l["offload"]["memory"]["accelerator_bytes"].get<double>() -
                  s["offload"]["memory"]["accelerator_bytes"].get<double>(),
              1e9, 1);
  EXPECT_GT(s["offload"]["memory"]["accelerator_bytes"].get<double>(), 20e9);
  // resident is the ideal bound, whatever the memory: a memory too small for the experts is said,
  // as sim offload says it, not priced (a hit rate of 1 in 100 MB read as a fact).
  const auto ideal = RunMoelab(std::string(base).replace(base.find("--json "), 7, "") +
                               "--offload resident --accelerator-memory 100MB");
  ASSERT_EQ(ideal.status, 0) << ideal.err;
  EXPECT_NE(ideal.out.find("(resident is the ideal: the experts do not actually fit in "
                           "accelerator memory)"),
            std::string::npos)
      << ideal.out;
}

// A request longer than the model's context window is refused, as moelab serve refuses it (its
// default --max-sequence-tokens is the KV budget within the model's positions), not served: the
// KV budget of 8 H100s alone would hold it.
TEST(SimServeCli, RequestsBeyondTheModelsPositionsAreRefused) {
  const std::string base =
      "sim serve --model mixtral-8x7b --hardware 8xh100-sxm --arrivals poisson:2 --requests 6 "
      "--output-tokens 8 --json --prompt-tokens ";
  const auto within = RunMoelab(base + "30000");
  ASSERT_EQ(within.status, 0) << within.err;
  const nlohmann::json served = nlohmann::json::parse(within.out);
  EXPECT_EQ(served["completed"], 6);
  EXPECT_EQ(served["scheduler"]["max_sequence_tokens"], 32768);
  EXPECT_GT(served["kv_budget"]["blocks"].get<int64_t>() * 16, 40000 * 6);
  const auto beyond = RunMoelab(base + "40000");
  ASSERT_EQ(beyond.status, 0) << beyond.err;
  const nlohmann::json refused = nlohmann::json::parse(beyond.out);
  EXPECT_EQ(refused["completed"], 0);
  EXPECT_EQ(refused["failed"], 6);
  EXPECT_NE(refused["failures"][0]["error"].get<std::string>().find("too long"), std::string::npos);
  // plan capacity prices the same limit: no replica count serves them.
  const auto plan = RunMoelab(
      "plan capacity --model mixtral-8x7b --hardware 8xh100-sxm --rate 0.5 --slo-ttft-p99 100 "
      "--slo-tpot-p99 10 --requests 6 --max-replicas 2 --prompt-tokens 40000 --output-tokens 8 "
      "--json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const nlohmann::json candidates = nlohmann::json::parse(plan.out)["candidates"];
  ASSERT_FALSE(candidates.empty());
  for (const auto& candidate : candidates) {
    EXPECT_NE(candidate["why_not"].get<std::string>().find("refused"), std::string::npos)
        << candidate.dump();
  }
}

// plan capacity --policy: a model whose weights do not fit the accelerator has no resident
// candidate, but an offloading one is simulated and named.
TEST(PlanCapacityCli, OffloadPoliciesAreCandidates) {
  const auto r = RunMoelab(
      "plan capacity --model mixtral-8x7b --hardware h100-sxm --rate 0.2 --slo-ttft-p99 10 "
      "--slo-tpot-p99 1 --policy resident,fiddler --max-batch 8 --requests 60 --max-replicas 4 "
      "--prompt-tokens 128 --output-tokens 32 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["policies"], nlohmann::json::array({"resident", "fiddler"}));
  ASSERT_EQ(json["candidates"].size(), 2u);
  for (const auto& candidate : json["candidates"]) {
    if (candidate["policy"] == "resident") {
      EXPECT_EQ(candidate["replicas"], 0);
      EXPECT_NE(candidate["why_not"].get<std::string>().find("leave no room"), std::string::npos);
    } else {
      EXPECT_EQ(candidate["policy"], "fiddler");
      EXPECT_GT(candidate["replicas"].get<int64_t>(), 0);
    }
  }
  EXPECT_EQ(json["rows"][0]["policy"], "fiddler");
}

TEST(PlanCapacityCli, FewestReplicasCheapestFirst) {
  const auto r = RunMoelab(
      "plan capacity --model qwen2-57b-a14b --hardware 2xh100-sxm,2xa100-80gb-sxm --rate 6 "
      "--slo-ttft-p99 2 --slo-tpot-p99 0.2 --max-batch 32,64 --requests 200 "
      "--price 2xa100-80gb-sxm=3.5 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["rows"].size(), 2u);
  for (const auto& row : json["rows"]) {
    EXPECT_TRUE(row.contains("hardware"));
    EXPECT_TRUE(row["meets_slo"].get<bool>()) << row.dump();
    EXPECT_GE(row["replicas"].get<int64_t>(), 1);
    EXPECT_LE(row["ttft_p99_s"].get<double>(), 2.0);
    EXPECT_LE(row["tpot_p99_s"].get<double>(), 0.2);
  }
  EXPECT_LE(json["rows"][0]["cost_usd_per_hour"].get<double>(),
            json["rows"][1]["cost_usd_per_hour"].get<double>());
  EXPECT_GE(json["pareto"].size(), 1u);
  EXPECT_EQ(json["candidates"].size(), 4u);
}

TEST(SimServeCli, SpeculativeDecodingAndRouting) {
  const auto plain = RunMoelab(kServe + "--json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  const auto sd = RunMoelab(kServe + "--gamma 3 --alpha 0.8 --json");
  ASSERT_EQ(sd.status, 0) << sd.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out), s = nlohmann::json::parse(sd.out);
  EXPECT_TRUE(p["speculative"].is_null());
  EXPECT_EQ(s["speculative"]["gamma"], 3);
  EXPECT_EQ(s["speculative"]["draft"], "llama-3.2-1b");
  EXPECT_EQ(s["scheduler"]["decode_tokens_per_step"], 4);
  EXPECT_GT(s["time_breakdown_s"]["draft_s"].get<double>(), 0);
  EXPECT_EQ(s["completed"], 300);
  // The same tokens in fewer iterations: accepted drafts advance several tokens at once.
  EXPECT_LT(s["iterations"].get<int64_t>(), p["iterations"].get<int64_t>());
  EXPECT_EQ(p["routing"], "uniform");
  const auto routed = RunMoelab(kServe + "--routing correlated --json");
  ASSERT_EQ(routed.status, 0) << routed.err;
  const nlohmann::json r = nlohmann::json::parse(routed.out);
  // The sampled estimate priced it (its effect is tested against a planted activation in
  // serving_speculative_test.cc: the tokens of different sequences are independent draws here).
  EXPECT_NE(r["routing"].get<std::string>().find("correlated"), std::string::npos) << r["routing"];
  EXPECT_EQ(r["completed"], 300);
}

TEST(PlanCapacityCli, SearchesGammaAndPlots) {
  const std::string plot =
      (std::filesystem::temp_directory_path() / "moelab-capacity-plot-test.gp").string();
  std::filesystem::remove(plot);
  const auto r = RunMoelab(
      "plan capacity --model qwen2-57b-a14b --hardware 2xa100-80gb-sxm --rate 4 "
      "--slo-ttft-p99 2 --slo-tpot-p99 0.2 --gamma 0,3 --requests 150 --plot-out " +
      plot + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["candidates"].size(), 2u);
  EXPECT_EQ(json["candidates"][0]["gamma"], 0);
  EXPECT_EQ(json["candidates"][1]["gamma"], 3);
  const std::string script = Slurp(plot);
  EXPECT_NE(script.find("$hardware0 << EOD"), std::string::npos);
  EXPECT_NE(script.find("2xa100-80gb-sxm"), std::string::npos);
  EXPECT_NE(script.find("$pareto"), std::string::npos);
  std::filesystem::remove(plot);
}

}  // namespace
}  // namespace moelab::sim
