#include "routing/routing_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "tests/routing/routing_test_util.h"
#include "tests/support/test_paths.h"

namespace moelab::routing {
namespace {

using testing::ErrorOf;

// 2 MoE layers x 4 experts, top-2: a 3-token prefill and a 2-token decode.
RoutingTrace SmallTrace() {
  RoutingTrace trace;
  trace.num_layers = 2;
  trace.num_experts = 4;
  trace.top_k = 2;
  trace.source = "hand-written test trace";
  trace.steps.push_back({"prefill", 3, {{{0, 1}, {2, 3}, {1, 0}}, {{3, 2}, {3, 0}, {1, 2}}}, {}});
  trace.steps.push_back({"decode", 2, {{{1, 2}, {1, 3}}, {{0, 3}, {2, 0}}}, {}});
  return trace;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string FromJsonError(const nlohmann::json& json) {
  return ErrorOf([&] { RoutingTraceFromJson(json, "trace.json"); });
}

TEST(RoutingTrace, ExpertCountsPerLayer) {
  const RoutingTrace trace = SmallTrace();
  EXPECT_EQ(trace.ExpertCounts(0), (std::vector<std::vector<int64_t>>{{2, 2, 1, 1}, {1, 1, 2, 2}}));
  EXPECT_EQ(trace.ExpertCounts(1), (std::vector<std::vector<int64_t>>{{0, 2, 1, 1}, {2, 0, 1, 1}}));
  EXPECT_CONTAINS(ErrorOf([&] { trace.ExpertCounts(2); }), "step 2 is out of range");
}

TEST(RoutingTrace, JsonHasSchemaAndRedundantCounts) {
  const nlohmann::json json = RoutingTraceToJson(SmallTrace());
  EXPECT_EQ(json["schema"], "moelab.routing_trace/1");
  EXPECT_EQ(json["num_layers"], 2);
  EXPECT_EQ(json["top_k"], 2);
  ASSERT_EQ(json["steps"].size(), 2u);
  EXPECT_EQ(json["steps"][1]["kind"], "decode");
  EXPECT_EQ(json["steps"][1]["experts"], nlohmann::json::parse("[[[1,2],[1,3]],[[0,3],[2,0]]]"));
  EXPECT_EQ(json["steps"][1]["expert_counts"], nlohmann::json::parse("[[0,2,1,1],[2,0,1,1]]"));
  EXPECT_EQ(RoutingTraceFromJson(json, "memory"), SmallTrace());
}

TEST(RoutingTrace, SaveLoadRoundTripIsByteIdentical) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-trace");
  const std::string first = (dir / "trace.json").string();
  const std::string second = (dir / "again.json").string();
  const RoutingTrace trace = SmallTrace();
  SaveRoutingTrace(trace, first);
  const RoutingTrace loaded = LoadRoutingTrace(first);
  EXPECT_EQ(loaded, trace);
  SaveRoutingTrace(loaded, second);
  const std::string bytes = ReadFile(first);
  EXPECT_EQ(ReadFile(second), bytes);
  EXPECT_EQ(bytes, RoutingTraceToText(trace));
  // Compact: one line per step, parseable by any JSON reader.
  EXPECT_CONTAINS(
      bytes,
      "\n    {\"kind\":\"decode\",\"tokens\":2,\"experts\":[[[1,2],[1,3]],[[0,3],[2,0]]],"
      "\"expert_counts\":[[0,2,1,1],[2,0,1,1]]}\n");
  EXPECT_EQ(nlohmann::json::parse(bytes), RoutingTraceToJson(trace));
  // Only the two traces: no temporary files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            2);
  std::filesystem::remove_all(dir);
}

TEST(RoutingTrace, EmptyTraceAndZeroTokenStepRoundTrip) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-trace");
  RoutingTrace trace = SmallTrace();
  trace.steps.clear();
  SaveRoutingTrace(trace, (dir / "empty.json").string());
  EXPECT_EQ(LoadRoutingTrace((dir / "empty.json").string()), trace);
  trace.steps.push_back({"decode", 0, {{}, {}}, {}});
  SaveRoutingTrace(trace, (dir / "zero.json").string());
  EXPECT_EQ(LoadRoutingTrace((dir / "zero.json").string()), trace);
  std::filesystem::remove_all(dir);
}

TEST(RoutingTrace, SaveRefusesInvalidTraceAndMissingFolderWritingNothing) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-trace");
  RoutingTrace bad = SmallTrace();
  bad.steps[1].experts[0][1] = {1, 4};
  const std::filesystem::path path = dir / "bad.json";
  EXPECT_CONTAINS(
      ErrorOf([&] { SaveRoutingTrace(bad, path.string()); }),
      "field 'steps[1].experts': layer 0 token 1 routes to expert 4, but num_experts is 4");
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  const std::string nowhere = (dir / "missing" / "trace.json").string();
  EXPECT_CONTAINS(ErrorOf([&] { SaveRoutingTrace(SmallTrace(), nowhere); }), "does not exist");
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(RoutingTrace, SaveReplacesExistingFile) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-trace");
  const std::string path = (dir / "trace.json").string();
  WriteFile(path, "old contents");
  SaveRoutingTrace(SmallTrace(), path);
  EXPECT_EQ(LoadRoutingTrace(path), SmallTrace());
  std::filesystem::remove_all(dir);
}

TEST(RoutingTraceValidate, ExpertIndexOutOfRange) {
  RoutingTrace trace = SmallTrace();
  trace.steps[1].experts[1][0] = {0, 9};
  EXPECT_EQ(ErrorOf([&] { trace.Validate("run.json"); }),
            "run.json: field 'steps[1].experts': layer 1 token 0 routes to expert 9, but "
            "num_experts is 4");
  trace.steps[1].experts[1][0] = {-1, 0};
  EXPECT_CONTAINS(ErrorOf([&] { trace.Validate("run.json"); }), "routes to expert -1");
}

TEST(RoutingTraceValidate, DuplicateExpertsInAToken) {
  RoutingTrace trace = SmallTrace();
  trace.steps[0].experts[1][2] = {2, 2};
  const std::string message = ErrorOf([&] { trace.Validate("run.json"); });
  EXPECT_CONTAINS(message,
                  "run.json: field 'steps[0].experts': layer 1 token 2 routes to expert 2 twice");
  EXPECT_CONTAINS(message, "[2, 2]");
}

TEST(RoutingTraceValidate, WrongShapes) {
  {
    RoutingTrace trace = SmallTrace();
    trace.steps[1].experts.pop_back();
    EXPECT_EQ(ErrorOf([&] { trace.Validate("run.json"); }),
              "run.json: field 'steps[1].experts': has 1 layers, but num_layers is 2");
  }
  {
    RoutingTrace trace = SmallTrace();
    trace.steps[0].experts[1].pop_back();
    EXPECT_EQ(
        ErrorOf([&] { trace.Validate("run.json"); }),
        "run.json: field 'steps[0].experts': layer 1 has 2 tokens, but the step's tokens is 3");
  }
  {
    RoutingTrace trace = SmallTrace();
    trace.steps[0].experts[0][1] = {2, 3, 0};
    EXPECT_EQ(ErrorOf([&] { trace.Validate("run.json"); }),
              "run.json: field 'steps[0].experts': layer 0 token 1 has 3 experts, but top_k is 2");
  }
  {
    RoutingTrace trace = SmallTrace();
    trace.top_k = 5;
    EXPECT_CONTAINS(ErrorOf([&] { trace.Validate("run.json"); }),
                    "run.json: field 'top_k': expected an integer in [1, num_experts = 4], got 5");
  }
  {
    RoutingTrace trace = SmallTrace();
    trace.steps[0].kind = "";
    EXPECT_CONTAINS(ErrorOf([&] { trace.Validate("run.json"); }), "field 'steps[0].kind'");
  }
  {
    RoutingTrace trace = SmallTrace();
    trace.num_layers = 0;
    EXPECT_CONTAINS(ErrorOf([&] { trace.Validate("run.json"); }), "field 'num_layers'");
  }
}

TEST(RoutingTraceFromJson, ExpertOutOfRangeNamesFileFieldLayerToken) {
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json.erase("steps");
  json["num_layers"] = 3;
  json["num_experts"] = 8;
  nlohmann::json step = {{"kind", "decode"}, {"tokens", 6}};
  step["experts"] = nlohmann::json::array();
  for (int layer = 0; layer < 3; ++layer) {
    step["experts"].push_back(nlohmann::json::parse("[[0,1],[1,2],[2,3],[3,4],[4,5],[5,6]]"));
  }
  json["steps"] = {step, step, step, step};
  EXPECT_NO_THROW(RoutingTraceFromJson(json, "trace.json"));
  json["steps"][3]["experts"][2][5] = {9, 1};
  EXPECT_EQ(FromJsonError(json),
            "trace.json: field 'steps[3].experts': layer 2 token 5 routes to expert 9, but "
            "num_experts is 8");
  json["steps"][3]["experts"][2][5] = {7, 1e12};
  EXPECT_CONTAINS(FromJsonError(json), "routes to expert 1000000000000, but num_experts is 8");
}

TEST(RoutingTraceFromJson, DuplicateAndShapeErrors) {
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json["steps"][0]["experts"][0][0] = {3, 3};
  json["steps"][0].erase("expert_counts");
  EXPECT_CONTAINS(FromJsonError(json),
                  "trace.json: field 'steps[0].experts': layer 0 token 0 routes to expert 3 twice");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["tokens"] = 3;
  EXPECT_CONTAINS(FromJsonError(json),
                  "field 'steps[1].experts': layer 0 has 2 tokens, but the step's tokens is 3");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["experts"][1][1] = {2};
  EXPECT_CONTAINS(FromJsonError(json), "layer 1 token 1 has 1 experts, but top_k is 2");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["experts"][1] = 7;
  EXPECT_CONTAINS(FromJsonError(json),
                  "field 'steps[1].experts': layer 1: expected an array of tokens");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["experts"][1][0] = {0, "two"};
  EXPECT_CONTAINS(FromJsonError(json),
                  "field 'steps[1].experts': layer 1 token 0 entry 1: expected an expert index");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["experts"][1][0] = {0, 2.5};
  EXPECT_CONTAINS(FromJsonError(json), "entry 1: expected an expert index");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][0].erase("experts");
  EXPECT_CONTAINS(FromJsonError(json), "missing required field 'steps[0].experts'");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"] = nlohmann::json::array({nlohmann::json::object({{"kind", "decode"}})});
  EXPECT_CONTAINS(FromJsonError(json), "missing required field 'steps[0].tokens'");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"][1] = "decode";
  EXPECT_CONTAINS(FromJsonError(json), "field 'steps[1]': expected a JSON object");

  json = RoutingTraceToJson(SmallTrace());
  json["steps"] = "none";
  EXPECT_CONTAINS(FromJsonError(json), "field 'steps': expected an array of steps");

  json = RoutingTraceToJson(SmallTrace());
  json["top_k"] = 0;
  EXPECT_CONTAINS(FromJsonError(json), "field 'top_k': expected an integer >= 1");
}

TEST(RoutingTraceFromJson, RedundantCountsMustAgree) {
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json["steps"][1]["expert_counts"][1][3] = 5;
  EXPECT_EQ(FromJsonError(json),
            "trace.json: field 'steps[1].expert_counts': layer 1 expert 3 is 5, but 'experts' "
            "routes 1 tokens "
            "to it");
  json["steps"][1]["expert_counts"] = nlohmann::json::array({nlohmann::json::array({0, 2, 1, 1})});
  EXPECT_CONTAINS(FromJsonError(json), "field 'steps[1].expert_counts': expected [num_layers = 2]");
  json["steps"][1].erase("expert_counts");  // optional
  EXPECT_EQ(RoutingTraceFromJson(json, "trace.json"), SmallTrace());
}

TEST(RoutingTraceFromJson, WrongOrMissingSchema) {
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json["schema"] = "moelab.routing_trace/2";
  EXPECT_EQ(FromJsonError(json),
            "trace.json: field 'schema': expected \"moelab.routing_trace/1\", got "
            "\"moelab.routing_trace/2\"");
  json["schema"] = "moelab.model/1";
  EXPECT_CONTAINS(FromJsonError(json), "got \"moelab.model/1\"");
  json.erase("schema");
  EXPECT_EQ(FromJsonError(json), "trace.json: missing required field 'schema'");
  EXPECT_CONTAINS(FromJsonError(nlohmann::json::array()),
                  "trace.json: top level: expected a JSON object");
}

TEST(RoutingTraceFromJson, IgnoresUnknownFieldsAndAcceptsWholeFloats) {
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json["provenance"] = {{"tool", "moelab"}};
  json["steps"][0]["experts"][0][0] = {0.0, 1.0};
  EXPECT_EQ(RoutingTraceFromJson(json, "trace.json"), SmallTrace());
}

TEST(LoadRoutingTrace, MissingAndMalformedFilesNameTheFile) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-trace");
  const std::string missing = (dir / "absent.json").string();
  EXPECT_CONTAINS(ErrorOf([&] { LoadRoutingTrace(missing); }), missing);
  const std::string malformed = (dir / "malformed.json").string();
  WriteFile(malformed, "{\"schema\": \"moelab.routing_trace/1\",");
  EXPECT_CONTAINS(ErrorOf([&] { LoadRoutingTrace(malformed); }), malformed + ": malformed JSON");
  const std::string wrong = (dir / "wrong.json").string();
  nlohmann::json json = RoutingTraceToJson(SmallTrace());
  json["steps"][0]["experts"][1][2] = {1, 7};
  WriteFile(wrong, json.dump());
  EXPECT_EQ(
      ErrorOf([&] { LoadRoutingTrace(wrong); }),
      wrong +
          ": field 'steps[0].experts': layer 1 token 2 routes to expert 7, but num_experts is 4");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::routing
