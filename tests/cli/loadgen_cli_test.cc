// moelab loadgen as a user runs it, against a test server in this process (tests/loadgen/
// test_server.h): the report, its CSV, --out, and every option refused with its name, exit 1 and
// no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/loadgen/test_server.h"
#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab {
namespace {

using testing::CompletionTestServer;
using testing::RunMoelab;
using testing::TestServerBehaviour;

TestServerBehaviour Fast() {
  TestServerBehaviour behaviour;
  behaviour.first_token_delay_s = 0.02;
  behaviour.token_gap_s = 0.005;
  return behaviour;
}

TEST(LoadgenCli, ReportsTheServingSchemaWithTheLoadAndSlo) {
  CompletionTestServer server(Fast());
  const auto run = RunMoelab("loadgen --url " + server.url() +
                             " --arrivals constant:50 --requests 6 --prompt-tokens 8"
                             " --output-tokens 5 --seed 3 --slo-ttft 10 --model tiny --json");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");  // stderr is not a terminal: no progress line
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["schema"], "moelab.serving/1");
  EXPECT_EQ(report["source"], "measured");
  EXPECT_EQ(report["completed"], 6);
  EXPECT_EQ(report["failed"], 0);
  for (const char* measure : {"ttft_s", "tpot_s", "itl_s", "e2e_s"})
    for (const char* key : {"p50", "p90", "p99", "mean", "count"})
      EXPECT_TRUE(report[measure].contains(key)) << measure << "." << key;
  EXPECT_GE(report["ttft_s"]["p50"].get<double>(), 0.02);
  EXPECT_EQ(report["load"]["arrivals"], "constant:50");
  EXPECT_EQ(report["load"]["requests"], 6);
  EXPECT_EQ(report["load"]["seed"], 3);
  EXPECT_EQ(report["slo"]["ttft_s"], 10);
  EXPECT_TRUE(report["slo"]["tpot_s"].is_null());
  EXPECT_EQ(report["goodput_requests_per_s"], report["requests_per_s"]);
  EXPECT_EQ(report["late_sends"], 0);
  EXPECT_EQ(report["model"], "tiny");
  EXPECT_TRUE(report.contains("provenance"));
  for (const nlohmann::json& body : server.Bodies()) EXPECT_EQ(body["model"], "tiny");
}

TEST(LoadgenCli, TableCsvAndOutFile) {
  CompletionTestServer server(Fast());
  const std::string load = "loadgen --url " + server.url() +
                           " --arrivals poisson:100 --requests 4 --prompt-tokens uniform:2,9"
                           " --output-tokens 3 --seed 1";
  const auto table = RunMoelab(load);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("completed 4, failed 0"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("TTFT"), std::string::npos);
  const auto csv = RunMoelab(load + " --csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  // One row of the JSON's scalar leaves by dotted path, as every command's --csv.
  const std::string header = csv.out.substr(0, csv.out.find('\n'));
  for (const char* column : {"ttft_s.p50", "tpot_s.p99", "completed", "late_sends", "load.seed"})
    EXPECT_NE(header.find(column), std::string::npos) << column << " in " << header;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 2);
  const std::filesystem::path dir = testing::MakeTempDir("loadgen-cli");
  const auto out = RunMoelab(load + " --out " + (dir / "r.json").string());
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(out.out, "");
  EXPECT_EQ(nlohmann::json::parse(testing::Slurp(dir / "r.json"))["completed"], 4);
  // An --out that cannot be written is refused before any request is sent, not after the load.
  const size_t sent = server.Bodies().size();
  const auto nowhere = RunMoelab(load + " --out " + (dir / "missing" / "r.json").string());
  EXPECT_EQ(nowhere.status, 1);
  EXPECT_NE(nowhere.err.find("missing' does not exist"), std::string::npos) << nowhere.err;
  EXPECT_EQ(server.Bodies().size(), sent);
}

TEST(LoadgenCli, ATraceAndTheShippedLengthTable) {
  CompletionTestServer server(Fast());
  const std::filesystem::path dir = testing::MakeTempDir("loadgen-trace");
  std::ofstream(dir / "trace.csv") << "arrival_s,prompt_tokens\n0,3\n0.01,7\n0.05,5\n";
  const auto run = RunMoelab("loadgen --url " + server.url() + " --arrivals trace:" +
                             (dir / "trace.csv").string() + " --output-tokens 2 --seed 1 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  std::multiset<size_t> prompts;
  for (const nlohmann::json& body : server.Bodies()) prompts.insert(body["prompt"].size());
  EXPECT_EQ(prompts, (std::multiset<size_t>{3, 5, 7}));

  const std::string lengths =
      "csv:" + (testing::PresetDir() / "workloads" / "sharegpt-like-lengths.csv").string();
  const auto shaped = RunMoelab("loadgen --url " + server.url() +
                                " --arrivals poisson:200 --requests 3 --prompt-tokens " + lengths +
                                " --output-tokens 2 --seed 9 --json");
  ASSERT_EQ(shaped.status, 0) << shaped.err;
  EXPECT_EQ(nlohmann::json::parse(shaped.out)["completed"], 3);
}

TEST(LoadgenCli, RefusesEachBadOptionByNameWithNoOutputFile) {
  CompletionTestServer server(Fast());
  const std::filesystem::path dir = testing::MakeTempDir("loadgen-bad");
  std::ofstream(dir / "trace.csv") << "arrival_s,prompt_tokens\n0,3\n";
  const std::string url = " --url " + server.url();
  const std::string good_load =
      " --arrivals constant:10 --requests 2 --prompt-tokens 4 --output-tokens 2 --seed 1";
  const struct {
    std::string args;
    const char* message;
  } cases[] = {
      {good_load, "--url is required"},
      {url + " --requests 2 --prompt-tokens 4 --output-tokens 2 --seed 1",
       "--arrivals is required"},
      {url + " --arrivals constant:10 --requests 2 --prompt-tokens 4 --output-tokens 2",
       "--seed is required"},
      {" --url localhost:8000" + good_load, "--url 'localhost:8000': not an http:// URL"},
      {url + " --arrivals poisson:-2 --requests 2 --prompt-tokens 4 --output-tokens 2 --seed 1",
       "--arrivals 'poisson:-2': RATE must be above 0"},
      {url + " --arrivals poisson:2 --requests 0 --prompt-tokens 4 --output-tokens 2 --seed 1",
       "--requests 0: must be at least 1"},
      {url + " --arrivals poisson:2 --prompt-tokens 4 --output-tokens 2 --seed 1",
       "--requests N or --duration S is required"},
      {url + good_load + " --duration 3", "give one of them, not both"},
      {url + " --arrivals poisson:2 --requests 2 --output-tokens 2 --seed 1",
       "--prompt-tokens is required"},
      {url + " --arrivals poisson:2 --requests 2 --prompt-tokens 4 --output-tokens uniform:3 "
             "--seed 1",
       "--output-tokens 'uniform:3': uniform takes A,B"},
      {url + good_load + " --concurrency-max 0", "--concurrency-max 0: must be at least 1"},
      {url + good_load + " --concurrency-max 5000", "--concurrency-max 5000: above the limit"},
      {url + good_load + " --timeout 0", "--timeout must be above 0 s"},
      {url + good_load + " --slo-ttft -1", "--slo-ttft -1: expected a finite number of seconds"},
      {url + good_load + " --slo-tpot 0", "--slo-tpot must be above 0 s"},
      {url + good_load + " --vocab 1", "--vocab 1: must be at least 2"},
      {url + good_load + " --model ''", "--model: an empty name"},
      {url + " --arrivals trace:" + (dir / "trace.csv").string() +
           " --prompt-tokens 4 --output-tokens 2 --seed 1",
       "--prompt-tokens: the trace"},
      {url + " --arrivals trace:" + (dir / "trace.csv").string() + " --seed 1",
       "--output-tokens is required (the trace"},
      {url + " --arrivals trace:" + (dir / "missing.csv").string() + " --output-tokens 2 --seed 1",
       "missing.csv"},
      {url + good_load + " --json --csv", "give --json or --csv, not both"},
  };
  for (const auto& c : cases) {
    const std::filesystem::path out = dir / "out.json";
    const auto run = RunMoelab("loadgen" + c.args + " --out " + out.string());
    EXPECT_EQ(run.status, 1) << c.args << "\n" << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  EXPECT_TRUE(server.Bodies().empty());  // nothing was sent for a refused command
}

TEST(LoadgenCli, NoCompletedRequestIsAnErrorWithNoOutputFile) {
  int closed_port = 0;
  {
    CompletionTestServer gone(Fast());
    closed_port = gone.port();
  }
  const std::filesystem::path out = testing::MakeTempDir("loadgen-refused") / "out.json";
  const auto run = RunMoelab("loadgen --url http://127.0.0.1:" + std::to_string(closed_port) +
                             " --arrivals constant:100 --requests 3 --prompt-tokens 4"
                             " --output-tokens 2 --seed 1 --out " +
                             out.string());
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("no request completed; 3 failed, most often: connection failed "
                         "(refused or unreachable) (3 of them)"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace moelab
