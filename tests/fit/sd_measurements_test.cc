#include "fit/sd_measurements.h"

#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/support/test_paths.h"

namespace moelab::fit {
namespace {

class SdMeasurementsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("sd-measurements"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path Write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  // The error message LoadSdMeasurements gives for `text`.
  std::string LoadError(const std::string& text, const std::string& name = "m.csv") {
    const std::filesystem::path path = Write(name, text);
    try {
      LoadSdMeasurements(path);
    } catch (const base::Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

constexpr const char* kHeader = "batch,gamma,K,E,sigma,speedup\n";

TEST_F(SdMeasurementsTest, ReadsCsv) {
  const auto points = LoadSdMeasurements(
      Write("m.csv", std::string(kHeader) + "1,4,8,64,0.67,1.31\r\n\n16,2,2,64,0.8,2.5\n"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].point.batch, 1);
  EXPECT_EQ(points[0].point.gamma, 4);
  EXPECT_EQ(points[0].point.top_k, 8);
  EXPECT_EQ(points[0].point.num_experts, 64);
  EXPECT_DOUBLE_EQ(points[0].point.sigma, 0.67);
  EXPECT_DOUBLE_EQ(points[0].speedup, 1.31);
  EXPECT_EQ(points[1].point.batch, 16);
  EXPECT_NE(points[1].origin.find("m.csv:4"), std::string::npos) << points[1].origin;
}

TEST_F(SdMeasurementsTest, ReadsJsonArraysAndExecutorReports) {
  const std::string report =
      R"({"schema": "moelab.run/1", "workload": "sd", "batch": 8, "model": {"experts": 8, "top_k": 2},
          "sd": {"gamma": 3, "sigma": 0.75, "speedup": 1.4}})";
  const auto single = LoadSdMeasurements(Write("r.json", report));
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].point.batch, 8);
  EXPECT_EQ(single[0].point.gamma, 3);
  EXPECT_EQ(single[0].point.top_k, 2);
  EXPECT_EQ(single[0].point.num_experts, 8);
  EXPECT_DOUBLE_EQ(single[0].speedup, 1.4);
  const auto mixed = LoadSdMeasurements(
      Write("a.json",
            "[" + report +
                R"(, {"batch": 2, "gamma": 4, "K": 1, "E": 64, "sigma": 0.5, "speedup": 0.9}])"));
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[1].point.num_experts, 64);
  EXPECT_NE(mixed[1].origin.find("[1]"), std::string::npos);
}

TEST_F(SdMeasurementsTest, RefusesNanNegativeAndZeroSpeedups) {
  for (const char* value : {"nan", "-1.2", "0", "inf"}) {
    const std::string message = LoadError(std::string(kHeader) + "1,4,8,64,0.5," + value + "\n");
    EXPECT_NE(message.find("m.csv:2"), std::string::npos) << message;
    EXPECT_NE(message.find("'speedup'"), std::string::npos) << message;
    EXPECT_NE(message.find("finite number > 0"), std::string::npos) << message;
  }
  EXPECT_NE(LoadError(R"([{"batch": 1, "gamma": 4, "K": 8, "E": 64, "sigma": 0.5, "speedup": -2}])",
                      "m.json")
                .find("speedup"),
            std::string::npos);
}

TEST_F(SdMeasurementsTest, RefusesSigmaOutsideZeroOne) {
  for (const char* value : {"0", "1.5", "-0.1", "nan"}) {
    const std::string message = LoadError(std::string(kHeader) + "1,4,8,64," + value + ",1.2\n");
    EXPECT_NE(message.find("'sigma'"), std::string::npos) << value << ": " << message;
    EXPECT_NE(message.find("(0, 1]"), std::string::npos) << message;
  }
}

TEST_F(SdMeasurementsTest, RefusesImpossiblePoints) {
  EXPECT_NE(LoadError(std::string(kHeader) + "1,4,80,64,0.5,1.2\n").find("exceeds E"),
            std::string::npos);
  EXPECT_NE(LoadError(std::string(kHeader) + "0,4,8,64,0.5,1.2\n").find("'batch'"),
            std::string::npos);
  EXPECT_NE(LoadError(std::string(kHeader) + "2.5,4,8,64,0.5,1.2\n").find("whole number"),
            std::string::npos);
  EXPECT_NE(LoadError(std::string(kHeader) + "1,four,8,64,0.5,1.2\n").find("'gamma'"),
            std::string::npos);
  const std::string fields = LoadError(std::string(kHeader) + "1,4,8,64,0.5\n");
  EXPECT_NE(fields.find("expected 6 comma-separated fields"), std::string::npos) << fields;
}

TEST_F(SdMeasurementsTest, MalformedHeaderNamesTheExpectedHeader) {
  const std::string message = LoadError("batch,gamma,k,E,sigma,speedup\n1,4,8,64,0.5,1.2\n");
  EXPECT_NE(message.find("m.csv:1"), std::string::npos) << message;
  EXPECT_NE(message.find("expected exactly 'batch,gamma,K,E,sigma,speedup'"), std::string::npos)
      << message;
  EXPECT_NE(LoadError("").find("batch,gamma,K,E,sigma,speedup"), std::string::npos);
}

TEST_F(SdMeasurementsTest, MissingFileAndMalformedJson) {
  try {
    LoadSdMeasurements(dir_ / "absent.csv");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.csv: measurements file not found"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(LoadError("[{\"batch\": 1,", "bad.json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(LoadError(R"([{"batch": 1, "gamma": 4, "K": 8, "E": 64, "sigma": 0.5}])", "m.json")
                .find("missing required field '[0].speedup'"),
            std::string::npos);
}

TEST_F(SdMeasurementsTest, RefusesReportsOfOtherWorkloads) {
  const std::string message =
      LoadError(R"({"schema": "moelab.run/1", "workload": "decode", "batch": 1})", "r.json");
  EXPECT_NE(message.find("'workload'"), std::string::npos) << message;
  EXPECT_NE(message.find("\"sd\""), std::string::npos) << message;
}

TEST(SdMeasurementSet, NeedsTenPointsAndTwoBatchSizes) {
  std::vector<SdMeasurement> points(10);
  for (size_t i = 0; i < points.size(); ++i) points[i].point.batch = 4;
  EXPECT_THROW(ValidateSdMeasurementSet(points, "x"), base::Error);
  points[3].point.batch = 8;
  EXPECT_NO_THROW(ValidateSdMeasurementSet(points, "x"));
  points.pop_back();
  try {
    ValidateSdMeasurementSet(points, "x.csv");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.csv: 9 measurement(s)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moelab::fit

namespace moelab::fit {
namespace {

// E has the model files' bound (4,096) and batch and gamma 1e15, in a CSV and a JSON alike: a
// JSON file took any int64 batch and any E, where a CSV stopped at 1e15 without saying so.
TEST_F(SdMeasurementsTest, CountsAreBoundedInCsvAndJsonAlike) {
  std::string message = LoadError(std::string(kHeader) + "1,4,8,5000,0.5,1.2\n");
  EXPECT_NE(message.find("field 'E': expected at most 4096 experts"), std::string::npos) << message;
  message = LoadError(std::string(kHeader) + "10000000000000000,4,8,64,0.5,1.2\n");
  EXPECT_NE(message.find("field 'batch': expected a whole number from 1 to 1e15"),
            std::string::npos)
      << message;
  for (const std::string& point :
       {std::string(R"({"batch": 10000000000000000, "gamma": 4, "K": 1, "E": 64, )"),
        std::string(R"({"batch": 2, "gamma": 4, "K": 1, "E": 5000, )")}) {
    try {
      LoadSdMeasurements(Write("big.json", "[" + point + R"("sigma": 0.5, "speedup": 0.9}])"));
      ADD_FAILURE() << point << " was accepted";
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("big.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace moelab::fit
