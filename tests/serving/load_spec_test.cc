#include "serving/load_spec.h"

#include <gtest/gtest.h>

#include "tests/support/error_of.h"

namespace moelab::serving {
namespace {

using testing::ErrorOf;

TEST(ParseArrivals, ReadsEachFormAndDescribesItBack) {
  const ArrivalProcess poisson = ParseArrivals("poisson:2.5");
  EXPECT_EQ(poisson.kind, ArrivalProcess::Kind::kPoisson);
  EXPECT_EQ(poisson.rate_per_s, 2.5);
  const ArrivalProcess gamma = ParseArrivals("gamma:4,0.5");
  EXPECT_EQ(gamma.kind, ArrivalProcess::Kind::kGamma);
  EXPECT_EQ(gamma.rate_per_s, 4);
  EXPECT_EQ(gamma.cv, 0.5);
  EXPECT_EQ(ParseArrivals("constant:10").kind, ArrivalProcess::Kind::kConstant);
  const ArrivalProcess trace = ParseArrivals("trace:/tmp/a,b.csv");
  EXPECT_EQ(trace.kind, ArrivalProcess::Kind::kTrace);
  EXPECT_EQ(trace.trace_file, "/tmp/a,b.csv");
  for (const char* text : {"poisson:2.5", "gamma:4,0.5", "constant:10", "trace:x.csv"})
    EXPECT_EQ(Describe(ParseArrivals(text)), text);
}

TEST(ParseArrivals, EveryErrorNamesTheOptionAndTheExpectedForm) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"poisson", "poisson takes one RATE"},
      {"poisson:", "nothing after 'poisson:'"},
      {"poisson:x", "RATE 'x' is not a number"},
      {"poisson:1,2", "poisson takes one RATE"},
      {"poisson:0", "RATE must be above 0"},
      {"poisson:-1", "RATE must be above 0"},
      {"poisson:inf", "RATE 'inf' is not a number"},
      {"poisson:2e6", "RATE above the limit of 1000000"},
      {"constant:nan", "RATE 'nan' is not a number"},
      {"gamma:1", "gamma takes RATE,CV"},
      {"gamma:1,", "gamma takes RATE,CV"},
      {"gamma:1,0", "CV must be a number in (0, 10]"},
      {"gamma:1,11", "CV must be a number in (0, 10]"},
      {"gamma:1,2,3", "gamma takes RATE,CV"},
      {"zipf:1", "unknown arrival process 'zipf'"},
      {"", "unknown arrival process ''"},
  };
  for (const auto& c : cases) {
    const std::string message = ErrorOf([&] { ParseArrivals(c.text, "--arrivals"); });
    EXPECT_NE(message.find(std::string("--arrivals '") + c.text + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << c.text << ": " << message;
    EXPECT_NE(message.find("expected poisson:RATE, gamma:RATE,CV"), std::string::npos) << message;
  }
}

TEST(ParseLengths, ReadsEachFormAndDescribesItBack) {
  const LengthDistribution fixed = ParseLengths("128", "--prompt-tokens");
  EXPECT_EQ(fixed.kind, LengthDistribution::Kind::kFixed);
  EXPECT_EQ(fixed.fixed, 128);
  const LengthDistribution uniform = ParseLengths("uniform:4,4", "--prompt-tokens");
  EXPECT_EQ(uniform.kind, LengthDistribution::Kind::kUniform);
  EXPECT_EQ(uniform.low, 4);
  EXPECT_EQ(uniform.high, 4);
  const LengthDistribution lognormal = ParseLengths("lognormal:200,0.8", "--output-tokens");
  EXPECT_EQ(lognormal.kind, LengthDistribution::Kind::kLognormal);
  EXPECT_EQ(lognormal.mean, 200);
  EXPECT_EQ(lognormal.sigma, 0.8);
  EXPECT_EQ(ParseLengths("csv:l.csv", "--x").csv_file, "l.csv");
  for (const char* text : {"128", "uniform:4,9", "lognormal:200,0.8", "csv:l.csv"})
    EXPECT_EQ(Describe(ParseLengths(text, "--x")), text);
}

TEST(ParseLengths, EveryErrorNamesTheOptionAndTheExpectedForm) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"0", "N must be at least 1 token"},
      {"-3", "N must be at least 1 token"},
      {"1.5", "N '1.5' is not a whole number"},
      {"abc", "N 'abc' is not a whole number"},
      {"16777217", "N above the limit of 16777216"},
      {"uniform:5", "uniform takes A,B"},
      {"uniform:9,4", "B is below A"},
      {"uniform:0,4", "A must be at least 1"},
      {"uniform:1,x", "B 'x' is not a whole number"},
      {"lognormal:0.5,1", "MEAN must be a number of tokens from 1"},
      {"lognormal:100,-1", "SIGMA must be a number in [0, 4]"},
      {"lognormal:100,5", "SIGMA must be a number in [0, 4]"},
      {"lognormal:100", "lognormal takes MEAN,SIGMA"},
      {"csv:", "nothing after 'csv:'"},
      {"zipf:1.1", "unknown length distribution 'zipf'"},
  };
  for (const auto& c : cases) {
    const std::string message = ErrorOf([&] { ParseLengths(c.text, "--output-tokens"); });
    EXPECT_NE(message.find(std::string("--output-tokens '") + c.text + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << c.text << ": " << message;
    EXPECT_NE(message.find("expected N, uniform:A,B, lognormal:MEAN,SIGMA or csv:FILE"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace moelab::serving
