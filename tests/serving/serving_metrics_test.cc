#include "serving/serving_metrics.h"

#include <gtest/gtest.h>

namespace moelab::serving {
namespace {

RequestOutcome Completed(int64_t id, double arrival_s, std::vector<double> token_times_s) {
  RequestOutcome outcome;
  outcome.id = id;
  outcome.arrival_s = arrival_s;
  outcome.first_token_s = token_times_s.front();
  outcome.finish_s = token_times_s.back();
  outcome.output_tokens = static_cast<int64_t>(token_times_s.size());
  outcome.token_times_s = std::move(token_times_s);
  return outcome;
}

RequestOutcome Failed(int64_t id, double arrival_s, double finish_s, const std::string& error) {
  RequestOutcome outcome;
  outcome.id = id;
  outcome.arrival_s = arrival_s;
  outcome.finish_s = finish_s;
  outcome.failed = true;
  outcome.error = error;
  return outcome;
}

// Worked by hand: TTFT 0.1, 0.3, 0.2, 0.5; TPOT 0.4/4, 0.2/2, 0.8/1 (the one-token request has
// none); E2E 0.5, 0.5, 1.0, 0.5; the run from 0 to 4.5 s.
std::vector<RequestOutcome> Outcomes() {
  return {Completed(0, 0, {0.1, 0.2, 0.3, 0.4, 0.5}),
          Completed(1, 1, {1.3, 1.4, 1.5}),
          Completed(2, 2, {2.2, 3.0}),
          Failed(3, 2.5, 2.6, "http 503: queue full"),
          Failed(4, 3, 3, "connection refused"),
          Failed(5, 3.5, 3.6, "http 503: queue full"),
          Completed(6, 4, {4.5})};
}

TEST(Summarize, PercentilesOfHandWorkedOutcomes) {
  const ServingSummary s = Summarize(Outcomes(), {});
  EXPECT_EQ(s.completed, 4);
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(s.ttft_s.count, 4);
  EXPECT_NEAR(s.ttft_s.p50, 0.25, 1e-12);   // sorted .1 .2 .3 .5, position 1.5
  EXPECT_NEAR(s.ttft_s.p90, 0.44, 1e-12);   // position 2.7
  EXPECT_NEAR(s.ttft_s.p99, 0.494, 1e-12);  // position 2.97
  EXPECT_NEAR(s.ttft_s.mean, 0.275, 1e-12);
  EXPECT_EQ(s.tpot_s.count, 3);
  EXPECT_NEAR(s.tpot_s.p50, 0.1, 1e-12);
  EXPECT_NEAR(s.tpot_s.p90, 0.66, 1e-12);  // .1 .1 .8, position 1.8
  EXPECT_NEAR(s.tpot_s.mean, 1.0 / 3, 1e-12);
  EXPECT_EQ(s.itl_s.count, 7);  // 4 + 2 + 1 gaps
  EXPECT_NEAR(s.itl_s.p50, 0.1, 1e-12);
  EXPECT_NEAR(s.itl_s.mean, 1.4 / 7, 1e-12);
  EXPECT_NEAR(s.e2e_s.p50, 0.5, 1e-12);
  EXPECT_NEAR(s.e2e_s.mean, 0.625, 1e-12);
  EXPECT_NEAR(s.duration_s, 4.5, 1e-12);
  EXPECT_NEAR(s.throughput_tokens_per_s, 11 / 4.5, 1e-12);
  EXPECT_NEAR(s.requests_per_s, 4 / 4.5, 1e-12);
}

TEST(Summarize, GoodputCountsCompletedRequestsMeetingEverySloGiven) {
  EXPECT_NEAR(Summarize(Outcomes(), {}).goodput_requests_per_s, 4 / 4.5, 1e-12);
  EXPECT_NEAR(Summarize(Outcomes(), {0.25, 0.5}).goodput_requests_per_s, 1 / 4.5, 1e-12);
  EXPECT_NEAR(Summarize(Outcomes(), {0.6, std::nullopt}).goodput_requests_per_s, 4 / 4.5, 1e-12);
  // TPOT only: the one-token request has no TPOT and meets it; request 2 (0.8 s) does not.
  EXPECT_NEAR(Summarize(Outcomes(), {std::nullopt, 0.5}).goodput_requests_per_s, 3 / 4.5, 1e-12);
  EXPECT_NEAR(Summarize(Outcomes(), {0.35, 0.15}).goodput_requests_per_s, 2 / 4.5, 1e-12);
}

TEST(Summarize, FailuresMostFrequentFirst) {
  const ServingSummary s = Summarize(Outcomes(), {});
  ASSERT_EQ(s.failures.size(), 2u);
  EXPECT_EQ(s.failures[0], std::make_pair(std::string("http 503: queue full"), int64_t{2}));
  EXPECT_EQ(s.failures[1], std::make_pair(std::string("connection refused"), int64_t{1}));
}

TEST(Summarize, NoOutcomesOrOnlyFailuresGiveZeros) {
  const ServingSummary empty = Summarize({}, {});
  EXPECT_EQ(empty.completed + empty.failed, 0);
  EXPECT_EQ(empty.duration_s, 0);
  EXPECT_EQ(empty.ttft_s.p99, 0);
  const ServingSummary failed = Summarize({Failed(0, 0, 2, "timeout")}, {});
  EXPECT_EQ(failed.failed, 1);
  EXPECT_EQ(failed.duration_s, 2);
  EXPECT_EQ(failed.requests_per_s, 0);
  EXPECT_EQ(failed.ttft_s.count, 0);
}

TEST(ServingSummaryToJson, HasExactlyTheSchemaFields) {
  const nlohmann::json json = ServingSummaryToJson(Summarize(Outcomes(), {}));
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  EXPECT_EQ(keys,
            (std::vector<std::string>{"completed", "duration_s", "e2e_s", "failed", "failures",
                                      "goodput_requests_per_s", "itl_s", "requests_per_s", "schema",
                                      "throughput_tokens_per_s", "tpot_s", "ttft_s"}));
  EXPECT_EQ(json["schema"], "moelab.serving/1");
  EXPECT_EQ(json["ttft_s"].size(), 5u);
  EXPECT_NEAR(json["ttft_s"]["p90"].get<double>(), 0.44, 1e-12);
  EXPECT_EQ(json["ttft_s"]["count"], 4);
  EXPECT_EQ(json["failures"][0]["error"], "http 503: queue full");
  EXPECT_EQ(json["failures"][0]["count"], 2);
}

TEST(ServingSummaryCsv, OneHeaderAndOneRowOfTheSameNumbers) {
  const std::string csv = ServingSummaryCsv(Summarize(Outcomes(), {}));
  const size_t newline = csv.find('\n');
  const std::string header = csv.substr(0, newline);
  const std::string row = csv.substr(newline + 1);
  EXPECT_EQ(header.rfind("ttft_s_p50,ttft_s_p90,ttft_s_p99,ttft_s_mean,ttft_s_count,tpot_s_p50", 0),
            0u);
  EXPECT_NE(header.find(",completed,failed,duration_s"), std::string::npos);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ','));
  EXPECT_NE(row.find(",4,3,4.5\n"), std::string::npos) << row;
  EXPECT_NEAR(std::stod(row.substr(0, row.find(','))), 0.25, 1e-12) << row;
}

}  // namespace
}  // namespace moelab::serving
