#include "loadgen/server_url.h"

#include <gtest/gtest.h>

#include <set>

#include "loadgen/completion_client.h"
#include "tests/support/error_of.h"

namespace moelab::loadgen {
namespace {

TEST(ParseServerUrl, HostPortAndPrefix) {
  const ServerUrl url = ParseServerUrl("http://127.0.0.1:8000");
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.CompletionsPath(), "/v1/completions");
  EXPECT_EQ(ParseServerUrl("http://gpu-box/llm/").CompletionsPath(), "/llm/v1/completions");
  EXPECT_EQ(ParseServerUrl("http://gpu-box/llm/").port, 80);
  EXPECT_EQ(ParseServerUrl("http://h:9/p").ToString(), "http://h:9/p");
}

TEST(ParseServerUrl, ErrorsNameTheOptionAndTheForm) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {{"127.0.0.1:8000", "not an http:// URL"},
               {"https://h:1", "https is not supported"},
               {"http://:80", "no host"},
               {"http://h:x", "the port is not a number"},
               {"http://h:", "the port is not a number"},
               {"http://h:70000", "the port must be in 1..65535"},
               {"http://h:0", "the port must be in 1..65535"},
               {"http://h h:1", "the host may hold"},
               {"http://h:1/a?b", "the path may not hold"}};
  for (const auto& c : cases) {
    const std::string message = testing::ErrorOf([&] { ParseServerUrl(c.text); });
    EXPECT_NE(message.find(std::string("--url '") + c.text + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << message;
    EXPECT_NE(message.find("expected http://HOST:PORT"), std::string::npos) << message;
  }
}

TEST(CompletionBody, PromptIdsOfTheDrawnLengthInTheVocabularyAndDeterministic) {
  CompletionSettings settings;
  settings.vocab = 20;
  settings.seed = 3;
  settings.model = "m";
  serving::RequestSpec request{4, 0.5, 300, 12};
  const nlohmann::json body = nlohmann::json::parse(CompletionBody(settings, request));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["max_tokens"], 12);
  EXPECT_EQ(body["stream"], true);
  EXPECT_FALSE(body.contains("ignore_eos"));
  ASSERT_EQ(body["prompt"].size(), 300u);
  std::set<int> ids;
  for (const auto& id : body["prompt"]) {
    EXPECT_GE(id.get<int>(), 1);
    EXPECT_LE(id.get<int>(), 19);
    ids.insert(id.get<int>());
  }
  EXPECT_EQ(ids.size(), 19u);  // 300 draws of 19 ids miss one with probability 19 e^-15.4
  EXPECT_EQ(CompletionBody(settings, request), CompletionBody(settings, request));
  serving::RequestSpec other = request;
  other.id = 5;
  EXPECT_NE(CompletionBody(settings, other), CompletionBody(settings, request));
}

}  // namespace
}  // namespace moelab::loadgen
