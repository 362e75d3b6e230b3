#include "routing/routing_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/routing/routing_test_util.h"
#include "tests/support/test_paths.h"

namespace moelab::routing {
namespace {

using testing::ErrorOf;
using Kind = RoutingSpec::Kind;

TEST(ParseRoutingSpec, EveryKind) {
  EXPECT_EQ(ParseRoutingSpec("gate").kind, Kind::kGate);
  const RoutingSpec uniform = ParseRoutingSpec("uniform");
  EXPECT_EQ(uniform.kind, Kind::kUniform);
  EXPECT_EQ(uniform.text, "uniform");

  const RoutingSpec popularity = ParseRoutingSpec("popularity:table.csv");
  EXPECT_EQ(popularity.kind, Kind::kPopularity);
  EXPECT_EQ(popularity.file, "table.csv");  // not opened by the parser

  const RoutingSpec bare = ParseRoutingSpec("correlated");
  EXPECT_EQ(bare.kind, Kind::kCorrelated);
  EXPECT_EQ(bare.locality, 0);
  EXPECT_EQ(bare.layer_correlation, 0);
  EXPECT_TRUE(bare.popularity_file.empty());
  const RoutingSpec correlated =
      ParseRoutingSpec("correlated:locality=0.3,,layer=1,popularity=/data/t.csv");
  EXPECT_EQ(correlated.kind, Kind::kCorrelated);
  EXPECT_DOUBLE_EQ(correlated.locality, 0.3);
  EXPECT_DOUBLE_EQ(correlated.layer_correlation, 1);
  EXPECT_EQ(correlated.popularity_file, "/data/t.csv");
  EXPECT_EQ(correlated.text, "correlated:locality=0.3,,layer=1,popularity=/data/t.csv");

  const RoutingSpec trace = ParseRoutingSpec("trace:run.trace");
  EXPECT_EQ(trace.kind, Kind::kTrace);
  EXPECT_EQ(trace.file, "run.trace");
}

TEST(ParseRoutingSpec, BarePathsAreTraces) {
  for (const std::string path : {"recorded.json", "dir/recorded"}) {
    const RoutingSpec spec = ParseRoutingSpec(path);
    EXPECT_EQ(spec.kind, Kind::kTrace) << path;
    EXPECT_EQ(spec.file, path);
  }
  // A plain name is a path only when such a file exists.
  const std::filesystem::path dir = testing::MakeTempDir("routing-spec");
  const std::filesystem::path file = dir / "plain";
  std::ofstream(file) << "{}";
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  const RoutingSpec spec = ParseRoutingSpec("plain");
  std::filesystem::current_path(previous);
  EXPECT_EQ(spec.kind, Kind::kTrace);
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("plain-absent"); }), "is not understood");
}

TEST(ParseRoutingSpec, EveryError) {
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("zipf"); }),
                  "routing 'zipf' is not understood; valid forms: \"gate\"");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec(""); }), "routing '' is not understood");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("popularity:"); }),
                  "routing 'popularity:': missing FILE after 'popularity:'");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("trace:"); }),
                  "routing 'trace:': missing FILE after 'trace:'");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:locality"); }),
                  "routing 'correlated:locality': 'locality' is not key=value");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:spread=2"); }),
                  "unknown key 'spread'; valid keys: locality=P (0..0.99)");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:layer=x"); }),
                  "'layer' value 'x' is not a number");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:layer=0.5x"); }),
                  "'layer' value '0.5x' is not a number");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:locality=inf"); }),
                  "'locality' value 'inf' is not a number");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:popularity="); }),
                  "'popularity' needs a FILE");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:locality=1"); }),
                  "correlated routing: 'locality' must be in [0, 0.99], got 1");
  EXPECT_CONTAINS(ErrorOf([] { ParseRoutingSpec("correlated:layer=-0.1"); }),
                  "correlated routing: 'layer' must be in [0, 1]");
}

}  // namespace
}  // namespace moelab::routing
