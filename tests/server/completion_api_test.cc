// The API's pieces without a socket: the byte tokenizer, request checks naming the field, the
// answer shapes, the Prometheus histogram.
#include "server/completion_api.h"

#include <gtest/gtest.h>

#include "server/server_metrics.h"
#include "server/tokenizer.h"

namespace moelab::server {
namespace {

using nlohmann::json;

const ServedModel kModel{"tiny", 101, 64, {}};

TEST(Tokenizer, OneTokenPerUtf8ByteModuloTheVocabulary) {
  EXPECT_EQ(TokenizeBytes("hi", 1000), (std::vector<int32_t>{104, 105}));
  EXPECT_EQ(TokenizeBytes("hi", 101), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(TokenizeBytes("\xc3\xa9", 1000), (std::vector<int32_t>{195, 169}));  // é: two bytes
  EXPECT_EQ(Detokenize({104, 105, 3, 4711}), "hi<3><4711>");
}

ApiError ErrorOf(const std::string& body) {
  try {
    ParseCompletionRequest(body, kModel);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted " << body;
  return ApiError(0, "");
}

TEST(CompletionRequest, ParsesAndRefusesNamingTheField) {
  const CompletionRequest r =
      ParseCompletionRequest(R"({"prompt": [1, 100], "max_tokens": 3, "stream": true})", kModel);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 100}));
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(ParseCompletionRequest(R"({"prompt": "x", "temperature": 0})", kModel).max_tokens, 16);
  EXPECT_EQ(ErrorOf(R"({"prompt": [1, 100)").param, "");
  EXPECT_EQ(ErrorOf(R"({"prompt": [1, 100)").status, 400);
  EXPECT_EQ(ErrorOf(R"({})").param, "prompt");
  EXPECT_EQ(ErrorOf(R"({"prompt": [-1]})").param, "prompt");
  EXPECT_EQ(ErrorOf(R"({"prompt": [[1]]})").param, "prompt");
  EXPECT_EQ(ErrorOf(R"({"prompt": "a", "max_tokens": 1.5})").param, "max_tokens");
  // Past 2^40 it reached the scheduler's bound and came back as an engine failure (500).
  for (const char* huge : {"1099511627777", "9223372036854775807"}) {
    const ApiError error = ErrorOf(std::string(R"({"prompt": "a", "max_tokens": )") + huge + "}");
    EXPECT_EQ(error.status, 400) << huge;
    EXPECT_EQ(error.param, "max_tokens") << huge;
  }
  EXPECT_EQ(ErrorOf(R"({"prompt": "a", "n": 2})").param, "n");
  EXPECT_EQ(ErrorOf(R"({"prompt": "a", "priority": "high"})").param, "priority");
  EXPECT_EQ(ErrorOf(R"({"prompt": "a", "model": "other"})").status, 404);
  const json error = ErrorJson(ErrorOf(R"({"prompt": "a", "stream": 1})"));
  EXPECT_EQ(error["error"]["param"], "stream");
  EXPECT_EQ(error["error"]["type"], "invalid_request_error");
}

TEST(CompletionAnswer, CarriesUsageAndTokens) {
  const json answer = CompletionJson("cmpl-1", 5, "tiny", {72, 3}, 4, "length");
  EXPECT_EQ(answer["choices"][0]["text"], "H<3>");
  EXPECT_EQ(answer["usage"]["total_tokens"], 6);
  const json last = ChunkJson("cmpl-1", 5, "tiny", {}, std::string("length"), UsageJson(4, 2));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(
      ChunkJson("cmpl-1", 5, "tiny", {7}, std::nullopt, std::nullopt)["choices"][0]["finish_reason"]
          .is_null());
  EXPECT_EQ(ServerSentEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(Histogram, CountsAreCumulativePerBound) {
  Histogram h({0.1, 1});
  for (double s : {0.05, 0.1, 0.5, 3.0}) h.Observe(s);
  const std::string text = h.Text("x_seconds", "help");
  EXPECT_NE(text.find("x_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_count 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_sum 3.65\n"), std::string::npos) << text;
}

// /v1/models' entry: OpenAI's fields, vLLM's max_model_len, and the server's settings under
// `moelab` when it has them (absent otherwise).
TEST(CompletionApi, ModelsListTheSettingsWhenGiven) {
  const json plain = ModelsJson(kModel, 7)["data"][0];
  EXPECT_EQ(plain["id"], "tiny");
  EXPECT_EQ(plain["max_model_len"], 64);
  EXPECT_FALSE(plain.contains("moelab"));
  ServedModel with_settings = kModel;
  with_settings.settings = {{"scheduler", {{"kv_blocks", 4}}}};
  const json entry = ModelsJson(with_settings, 7)["data"][0];
  EXPECT_EQ(entry["moelab"]["scheduler"]["kv_blocks"], 4);
  EXPECT_EQ(entry["created"], 7);
}

}  // namespace
}  // namespace moelab::server
