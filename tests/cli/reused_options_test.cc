// cli/reused_options.h: a command's option table built once per thread gives every call what a
// fresh table would, whatever the calls before it gave or threw.
#include "cli/reused_options.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cli/command.h"

namespace moelab::cli {
namespace {

struct ToyState {
  int64_t count = 3;
  std::optional<std::string> label;
  std::vector<int64_t> seen;  // the counts parsed by every call (kept only within one call)
};

void DeclareToy(po::options_description& options, ToyState& state) {
  options.add_options()("count", Into(&state.count), "a number")(
      "label", ParsedIntoOptional(&state.label, [](const std::string& text) { return text; }),
      "a name");
}

std::optional<Printed> FinishToy(const po::variables_map&, ToyState& state) {
  state.seen.push_back(state.count);
  return Printed{std::to_string(state.count) + " " + state.label.value_or("none") + " " +
                     std::to_string(state.seen.size()),
                 "",
                 {}};
}

TEST(ReusedOptions, EachCallStartsFromTheDeclaredState) {
  ReusedOptions<ToyState> command("toy", "usage: toy", DeclareToy, FinishToy);
  EXPECT_EQ(command.Run({"--count", "7", "--label", "a"})->text, "7 a 1");
  EXPECT_EQ(command.Run({})->text, "3 none 1");  // the default again, the label unset
  EXPECT_THROW(command.Run({"--count", "x"}), base::Error);
  EXPECT_EQ(command.Run({"--label", "b"})->text, "3 b 1");
}

// The commands on a reused table: a call after others (different options, one failing) prints
// the same bytes as the same call on a fresh thread, whose table is new.
std::string OnFreshThread(std::optional<Printed> (*command)(const std::vector<std::string>&),
                          const std::vector<std::string>& args) {
  std::string text;
  std::thread([&] { text = command(args)->text; }).join();
  return text;
}

TEST(ReusedOptions, SimSdAndPlanSdCallsDoNotSeeEarlierCalls) {
  const std::vector<std::string> base = {"--model",    "mixtral-8x7b", "--draft",
                                         "qwen2-0.5b", "--batch",      "1,4",
                                         "--gamma",    "1,2",          "--csv"};
  std::vector<std::string> sigma = base, alpha = base, bad = base;
  sigma.insert(sigma.end(), {"--sigma", "0.5", "--context", "900"});
  alpha.insert(alpha.end(), {"--alpha", "0.7"});
  bad.insert(bad.end(), {"--alpha", "0.7", "--sigma", "0.5"});  // both: refused
  const std::string fresh = OnFreshThread(SimSdPrinted, alpha);
  std::string after;
  std::thread([&] {
    SimSdPrinted(sigma);
    EXPECT_THROW(SimSdPrinted(bad), base::Error);
    after = SimSdPrinted(alpha)->text;
  }).join();
  EXPECT_EQ(after, fresh);
  EXPECT_NE(after, OnFreshThread(SimSdPrinted, sigma));  // the calls do differ

  std::vector<std::string> plan_alpha = base, plan_other = base;
  plan_other.insert(plan_other.end(), {"--alpha", "0.5", "--verify", "gamma"});
  const std::string plan_fresh = OnFreshThread(PlanSdPrinted, plan_alpha);
  std::string plan_after;
  std::thread([&] {
    PlanSdPrinted(plan_other);
    plan_after = PlanSdPrinted(plan_alpha)->text;
  }).join();
  EXPECT_EQ(plan_after, plan_fresh);
  EXPECT_NE(plan_after, OnFreshThread(PlanSdPrinted, plan_other));
}

}  // namespace
}  // namespace moelab::cli
