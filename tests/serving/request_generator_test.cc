#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "serving/load_spec.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::serving {
namespace {

using testing::ErrorOf;

LoadSpec Spec(const std::string& arrivals, int64_t requests, const std::string& prompt = "100",
              const std::string& output = "10", uint64_t seed = 1) {
  LoadSpec spec;
  spec.arrivals = ParseArrivals(arrivals);
  spec.prompt_tokens = ParseLengths(prompt, "--prompt-tokens");
  spec.output_tokens = ParseLengths(output, "--output-tokens");
  spec.requests = requests;
  spec.seed = seed;
  return spec;
}

struct GapMoments {
  double mean = 0, cv = 0;
};

GapMoments GapsOf(const std::vector<RequestSpec>& requests) {
  const double n = static_cast<double>(requests.size() - 1);
  const double mean = requests.back().arrival_s / n;
  double squares = 0;
  for (size_t i = 1; i < requests.size(); ++i) {
    const double gap = requests[i].arrival_s - requests[i - 1].arrival_s;
    squares += (gap - mean) * (gap - mean);
  }
  return {mean, std::sqrt(squares / (n - 1)) / mean};
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::filesystem::path path = testing::MakeTempDir("serving") / name;
  std::ofstream(path) << text;
  return path.string();
}

// 40000 gaps: the mean gap's standard error is CV / 200 of it; the CV's is about 0.5 % (Poisson)
// to 2 % (gamma CV 3, kurtosis 57); every tolerance is 4 or more standard errors.
TEST(GenerateRequests, PoissonGapsHaveMeanOneOverRateAndCvOne) {
  const std::vector<RequestSpec> requests = GenerateRequests(Spec("poisson:10", 40000));
  ASSERT_EQ(requests.size(), 40000u);
  EXPECT_EQ(requests[0].arrival_s, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].id, static_cast<int64_t>(i));
    if (i > 0) {
      ASSERT_GE(requests[i].arrival_s, requests[i - 1].arrival_s);
    }
  }
  const GapMoments gaps = GapsOf(requests);
  EXPECT_NEAR(gaps.mean, 0.1, 0.1 * 0.02);
  EXPECT_NEAR(gaps.cv, 1, 0.03);
}

TEST(GenerateRequests, GammaGapsHaveTheRateAndTheCv) {
  for (const double cv : {0.5, 3.0}) {
    const std::vector<RequestSpec> requests =
        GenerateRequests(Spec("gamma:5," + std::to_string(cv), 40000));
    const GapMoments gaps = GapsOf(requests);
    EXPECT_NEAR(gaps.mean, 0.2, 0.2 * 0.02 * std::max(1.0, cv)) << "cv " << cv;
    EXPECT_NEAR(gaps.cv, cv, cv * 0.1) << "cv " << cv;
  }
}

TEST(GenerateRequests, ConstantArrivalsAreExactlyEvenlySpaced) {
  const std::vector<RequestSpec> requests = GenerateRequests(Spec("constant:4", 9));
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(requests[i].arrival_s, static_cast<double>(i) / 4);
}

TEST(GenerateRequests, ADurationKeepsTheArrivalsBeforeIt) {
  LoadSpec spec = Spec("constant:10", 1);
  spec.requests.reset();
  spec.duration_s = 2;
  EXPECT_EQ(GenerateRequests(spec).size(), 20u);  // 0, 0.1, ..., 1.9
  spec.arrivals = ParseArrivals("poisson:100");
  spec.duration_s = 100;
  const std::vector<RequestSpec> requests = GenerateRequests(spec);
  EXPECT_LT(requests.back().arrival_s, 100);
  EXPECT_NEAR(static_cast<double>(requests.size()), 10000, 400);  // Poisson sd 100
}

TEST(GenerateRequests, LengthsFollowTheirDistributions) {
  const std::vector<RequestSpec> requests =
      GenerateRequests(Spec("poisson:1", 40000, "uniform:10,20", "lognormal:500,1"));
  std::set<int64_t> prompts;
  double prompt_sum = 0, output_sum = 0, output_squares = 0;
  for (const RequestSpec& r : requests) {
    ASSERT_GE(r.prompt_tokens, 10);
    ASSERT_LE(r.prompt_tokens, 20);
    ASSERT_GE(r.output_tokens, 1);
    prompts.insert(r.prompt_tokens);
    prompt_sum += static_cast<double>(r.prompt_tokens);
    output_sum += static_cast<double>(r.output_tokens);
    output_squares += static_cast<double>(r.output_tokens * r.output_tokens);
  }
  EXPECT_EQ(prompts.size(), 11u);  // both ends included
  const double n = static_cast<double>(requests.size());
  EXPECT_NEAR(prompt_sum / n, 15, 0.1);  // standard error 0.016
  // Lognormal SIGMA 1: CV sqrt(e - 1) = 1.31, so the mean's standard error is 0.66 %.
  const double mean = output_sum / n;
  EXPECT_NEAR(mean, 500, 500 * 0.03);
  EXPECT_NEAR(std::sqrt(output_squares / n - mean * mean) / mean, std::sqrt(std::exp(1.0) - 1),
              0.15);
}

TEST(GenerateRequests, TheSeedDeterminesEverythingAndStreamsAreIndependent) {
  const auto a = GenerateRequests(Spec("gamma:3,2", 500, "uniform:1,1000", "lognormal:80,1", 5));
  const auto b = GenerateRequests(Spec("gamma:3,2", 500, "uniform:1,1000", "lognormal:80,1", 5));
  const auto other_output =
      GenerateRequests(Spec("gamma:3,2", 500, "uniform:1,1000", "uniform:1,9", 5));
  const auto other_seed =
      GenerateRequests(Spec("gamma:3,2", 500, "uniform:1,1000", "lognormal:80,1", 6));
  int same_seed_differs = 0, other_seed_differs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same_seed_differs += a[i].arrival_s != b[i].arrival_s ||
                         a[i].prompt_tokens != b[i].prompt_tokens ||
                         a[i].output_tokens != b[i].output_tokens;
    // Another output distribution leaves the arrivals and the prompts as they were.
    EXPECT_EQ(a[i].arrival_s, other_output[i].arrival_s);
    EXPECT_EQ(a[i].prompt_tokens, other_output[i].prompt_tokens);
    other_seed_differs += a[i].prompt_tokens != other_seed[i].prompt_tokens;
  }
  EXPECT_EQ(same_seed_differs, 0);
  EXPECT_GT(other_seed_differs, 400);  // 1 in 1000 equal by chance
}

TEST(GenerateRequests, ATraceGivesArrivalsAndItsLengthColumns) {
  const std::string trace =
      WriteFile("trace.csv", "# a comment\narrival_s,prompt_tokens,user\n0,5,a\n0.5,7,b\n2,9,c\n");
  LoadSpec spec = Spec("trace:" + trace, 2, "100", "uniform:3,4");
  std::vector<RequestSpec> requests = GenerateRequests(spec);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].arrival_s, 0.5);
  EXPECT_EQ(requests[1].prompt_tokens, 7);  // the trace's column, not --prompt-tokens
  EXPECT_GE(requests[1].output_tokens, 3);  // no output column: the distribution
  spec.requests.reset();
  EXPECT_EQ(GenerateRequests(spec).size(), 3u);  // neither count nor duration: every row
  spec.duration_s = 1;
  EXPECT_EQ(GenerateRequests(spec).size(), 2u);
  spec.duration_s.reset();
  spec.requests = 4;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("has only 3 rows"), std::string::npos);
}

TEST(GenerateRequests, CsvLengthsFromOneFileStayPaired) {
  std::string text = "prompt_tokens,output_tokens\n";
  for (int i = 1; i <= 50; ++i) text += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  const std::string file = WriteFile("lengths.csv", text);
  const auto requests = GenerateRequests(Spec("poisson:1", 2000, "csv:" + file, "csv:" + file));
  std::set<int64_t> prompts;
  for (const RequestSpec& r : requests) {
    EXPECT_EQ(r.output_tokens, 2 * r.prompt_tokens);
    prompts.insert(r.prompt_tokens);
  }
  EXPECT_EQ(prompts.size(), 50u);  // every row drawn at 2000 draws of 50
  const auto unpaired = GenerateRequests(Spec("poisson:1", 2000, "csv:" + file, "7"));
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(unpaired[i].prompt_tokens, requests[i].prompt_tokens);
}

TEST(GenerateRequests, RefusesBadCountsAndFilesNamingThem) {
  LoadSpec spec = Spec("poisson:1", 10);
  spec.requests.reset();
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("--requests N or --duration S"),
            std::string::npos);
  spec.requests = 10;
  spec.duration_s = 5;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("not both"), std::string::npos);
  spec.duration_s.reset();
  spec.requests = 0;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("--requests 0: must be at least 1"),
            std::string::npos);
  spec.requests = kMaxRequests + 1;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("above the limit of 10000000"),
            std::string::npos);
  spec.requests.reset();
  spec.arrivals = ParseArrivals("poisson:1000000");
  spec.duration_s = 1000;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("draws more than 10000000 requests"),
            std::string::npos);
  spec.duration_s = -1;
  EXPECT_NE(ErrorOf([&] { GenerateRequests(spec); }).find("--duration"), std::string::npos);

  const std::string lengths = WriteFile("l.csv", "prompt_tokens\n5\n");
  const auto no_column = Spec("poisson:1", 3, "10", "csv:" + lengths);
  EXPECT_NE(
      ErrorOf([&] { GenerateRequests(no_column); }).find(lengths + ": no output_tokens column"),
      std::string::npos);
  const auto huge = Spec("poisson:1", 5000, "lognormal:1000000,4");
  EXPECT_NE(ErrorOf([&] { GenerateRequests(huge); }).find("tokens, above the limit of 16777216"),
            std::string::npos);
}

TEST(ReadLengthTable, ErrorsNameFileLineAndColumn) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"arrival_s\n0\n1\n0.5\n", ":4: column arrival_s: expected arrival times in order"},
      {"arrival_s\n-1\n", ":2: column arrival_s: expected seconds from 0 to 1e6"},
      {"arrival_s\nx\n", ":2: column arrival_s: expected seconds >= 0, got 'x'"},
      {"arrival_s,prompt_tokens\n0,1.5\n", ":2: column prompt_tokens: expected a whole number"},
      {"arrival_s,prompt_tokens\n0,0\n", ":2: column prompt_tokens: expected a whole number"},
      {"arrival_s,output_tokens\n0,99999999\n", "column output_tokens: expected a whole number"},
      {"arrival_s,prompt_tokens\n0\n", ":2: expected 2 comma-separated fields"},
      {"prompt_tokens\n4\n", ":1: a trace needs an arrival_s column"},
      {"when,what\n1,2\n", "names none of arrival_s, prompt_tokens, output_tokens"},
      {"arrival_s,arrival_s\n1,2\n", "column arrival_s appears twice"},
      {"# only a comment\narrival_s\n", ": no rows"},
  };
  for (const auto& c : cases) {
    const std::string file = WriteFile("t.csv", c.text);
    const std::string message = ErrorOf([&] { ReadLengthTable(file, true); });
    EXPECT_NE(message.find(file), std::string::npos) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.text << ": " << message;
  }
  EXPECT_NE(ErrorOf([] {
              ReadLengthTable("/nonexistent/trace.csv", true);
            }).find("/nonexistent/trace.csv"),
            std::string::npos);
}

TEST(ReadLengthTable, TheShippedShareGptLikeTableReadsWithTheMeansItsHeaderStates) {
  const std::string file =
      (testing::PresetDir() / "workloads" / "sharegpt-like-lengths.csv").string();
  const LengthTable table = ReadLengthTable(file, false);
  ASSERT_EQ(table.rows, 1000u);
  ASSERT_TRUE(table.has_prompt_tokens && table.has_output_tokens);
  double prompts = 0, outputs = 0;
  for (size_t i = 0; i < table.rows; ++i) {
    prompts += static_cast<double>(table.prompt_tokens[i]);
    outputs += static_cast<double>(table.output_tokens[i]);
    EXPECT_LE(table.prompt_tokens[i] + table.output_tokens[i], 2048);
  }
  EXPECT_NEAR(prompts / 1000, 141.29, 0.005);  // the header's "prompt mean 141.29"
  EXPECT_NEAR(outputs / 1000, 301.22, 0.005);
}

}  // namespace
}  // namespace moelab::serving
