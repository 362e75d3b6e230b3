#include "profiler/profile_summary.h"

#include <gtest/gtest.h>

#include "base/json_reader.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

TEST(ProfileSummary, OneLinePerOperatorAndDevice) {
  const nlohmann::json profile =
      base::JsonReader::ParseFile(testing::TestDataDir() / "profiles/quick-cpu.json");
  const std::string text = ProfileSummaryText(profile, "p.json");
  EXPECT_EQ(text.rfind("moelab profile: ", 0), 0u) << text;
  EXPECT_NE(text.find("expert_ffn cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("(quick)"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 13), "wrote p.json\n") << text;
}

}  // namespace
}  // namespace moelab::profiler
