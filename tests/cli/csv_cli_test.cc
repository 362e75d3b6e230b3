// --csv on every command with --json: RFC 4180 rows that carry the JSON's numbers. Each test runs
// the command both ways and checks the CSV header, a known value, and every CSV cell against the
// JSON value at the column's dotted path (provenance aside: the command lines differ).
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;

// RFC 4180: fields separated by commas, quoted when they hold commas, quotes or line breaks.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quote";
  EXPECT_TRUE(rows.back().empty() && field.empty()) << "CSV must end with a line break";
  rows.pop_back();
  return rows;
}

nlohmann::json AtPath(const nlohmann::json& object, const std::string& dotted) {
  const nlohmann::json* value = &object;
  std::stringstream path(dotted);
  std::string key;
  while (std::getline(path, key, '.')) {
    if (!value->is_object() || !value->contains(key)) return nlohmann::json();
    value = &(*value)[key];
  }
  return *value;
}

// Every cell equals the JSON's value at its column's path (numbers to the last bit).
void ExpectCsvCarriesJson(const std::vector<std::vector<std::string>>& csv,
                          const std::vector<nlohmann::json>& objects) {
  ASSERT_FALSE(csv.empty());
  ASSERT_EQ(csv.size() - 1, objects.size());
  const std::vector<std::string>& header = csv[0];
  for (size_t r = 0; r < objects.size(); ++r) {
    ASSERT_EQ(csv[r + 1].size(), header.size()) << "row " << r;
    for (size_t c = 0; c < header.size(); ++c) {
      if (header[c].rfind("provenance.", 0) == 0) continue;
      const nlohmann::json value = AtPath(objects[r], header[c]);
      const std::string& cell = csv[r + 1][c];
      if (value.is_null()) {
        EXPECT_EQ(cell, "") << header[c];
      } else if (value.is_boolean()) {
        EXPECT_EQ(cell, value.get<bool>() ? "true" : "false") << header[c];
      } else if (value.is_number()) {
        EXPECT_EQ(std::stod(cell), value.get<double>()) << header[c];
      } else {
        EXPECT_EQ(cell, value.get<std::string>()) << header[c];
      }
    }
  }
}

struct Both {
  std::vector<std::vector<std::string>> csv;
  nlohmann::json json;
};

Both RunBoth(const std::string& args) {
  const CliRun csv = RunMoelab(args + " --csv");
  EXPECT_EQ(csv.status, 0) << args << ": " << csv.err;
  const CliRun json = RunMoelab(args + " --json");
  EXPECT_EQ(json.status, 0) << args << ": " << json.err;
  return {ParseCsv(csv.out), nlohmann::json::parse(json.out)};
}

size_t Column(const std::vector<std::string>& header, const std::string& key) {
  const auto it = std::find(header.begin(), header.end(), key);
  EXPECT_NE(it, header.end()) << key;
  return static_cast<size_t>(it - header.begin());
}

TEST(CsvCli, DevicesOneRowPerGpu) {
  const Both r = RunBoth("devices");
  ASSERT_FALSE(r.csv.empty());
  EXPECT_EQ(r.csv[0], (std::vector<std::string>{"index", "name", "memory_bytes", "sm_count",
                                                "compute_capability"}));
  ExpectCsvCarriesJson(r.csv,
                       std::vector<nlohmann::json>(r.json["gpus"].begin(), r.json["gpus"].end()));
}

TEST(CsvCli, HardwareListOneRowPerPreset) {
  const Both r = RunBoth("hw list");
  ASSERT_GT(r.csv.size(), 5u);
  const size_t name = Column(r.csv[0], "name"), kind = Column(r.csv[0], "kind");
  bool found = false;
  for (const auto& row : r.csv)
    found = found || (row[name] == "a100-80gb-sxm" && row[kind] == "accelerator");
  EXPECT_TRUE(found);
  ExpectCsvCarriesJson(
      r.csv, std::vector<nlohmann::json>(r.json["hardware"].begin(), r.json["hardware"].end()));
}

TEST(CsvCli, HardwareShowOneRowOfTheSpec) {
  const Both r = RunBoth("hw show a100-80gb-sxm");
  ASSERT_EQ(r.csv.size(), 2u);
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "name")], "a100-80gb-sxm");
  ExpectCsvCarriesJson(r.csv, {r.json});
}

TEST(CsvCli, ModelListAndShow) {
  const Both list = RunBoth("model list");
  ASSERT_GT(list.csv.size(), 3u);
  ExpectCsvCarriesJson(list.csv, std::vector<nlohmann::json>(list.json["models"].begin(),
                                                             list.json["models"].end()));
  // Every listing says which build listed it (the presets are that build's).
  for (const char* listing : {"model list", "hw list", "devices"}) {
    const Both both = RunBoth(listing);
    EXPECT_TRUE(both.json["provenance"].contains("git_commit")) << listing;
  }
  const Both show = RunBoth("model show --model mixtral-8x7b");
  ASSERT_EQ(show.csv.size(), 2u);
  EXPECT_EQ(show.csv[1][Column(show.csv[0], "t_thres")], "11");
  EXPECT_EQ(show.csv[1][Column(show.csv[0], "spec.moe.num_experts")], "8");
  ExpectCsvCarriesJson(show.csv, {show.json});
}

TEST(CsvCli, FitLatencyOneRowPerCurveAndCalibrateOneRow) {
  const std::filesystem::path dir = testing::MakeTempDir("csv-fit");
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  const std::string fit = (dir / "fit.json").string();
  const CliRun csv = RunMoelab("fit latency --profile " + profile + " --out " + fit + " --csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  const nlohmann::json written = nlohmann::json::parse(testing::Slurp(fit));
  const auto rows = ParseCsv(csv.out);
  EXPECT_EQ(rows[1][Column(rows[0], "operator")],
            written["operators"][0]["operator"].get<std::string>());
  Column(rows[0], "forms.linear.params.b");
  ExpectCsvCarriesJson(
      rows, std::vector<nlohmann::json>(written["operators"].begin(), written["operators"].end()));
  const CliRun both = RunMoelab("fit latency --profile " + profile + " --out " +
                                (dir / "never.json").string() + " --csv --json");
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "never.json"));

  const Both calibration = RunBoth("fit calibrate --profile " + profile);
  ASSERT_EQ(calibration.csv.size(), 2u);
  Column(calibration.csv[0], "parameters.compute_efficiency.value");
  ExpectCsvCarriesJson(calibration.csv, {calibration.json});
  std::filesystem::remove_all(dir);
}

const char* kSmallShape =
    "--layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 "
    "--vocab 101 --threads 2";

TEST(CsvCli, RunSummaryAsOneRow) {
  const Both r = RunBoth(std::string("run ") + kSmallShape +
                         " --workload decode --batch 2 --prompt 6 --tokens 5 --seed 3");
  ASSERT_EQ(r.csv.size(), 2u);
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "batch")], "2");
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "workload")], "decode");
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "model.name")], r.json["model"]["name"].get<std::string>());
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "output_tokens")], r.json["output_tokens"].dump());
  Column(r.csv[0], "ttft_s");  // timings differ between the two runs, so only the column is checked
}

TEST(CsvCli, SimOffloadResultAsOneRow) {
  const Both r = RunBoth(
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy fiddler --prompt 8 --tokens 4 "
      "--seed 1");
  ASSERT_EQ(r.csv.size(), 2u);
  EXPECT_EQ(r.csv[1][Column(r.csv[0], "policy")], "fiddler");
  Column(r.csv[0], "ttft_s");
  ExpectCsvCarriesJson(r.csv, {r.json});
}

}  // namespace
}  // namespace moelab::cli
