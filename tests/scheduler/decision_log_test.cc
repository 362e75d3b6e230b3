#include <gtest/gtest.h>

#include "scheduler/decision_log.h"
#include "tests/support/error_of.h"

namespace moelab::scheduler {
namespace {

std::vector<IterationPlan> SomePlans() {
  SchedulerConfig config;
  config.kv_block_tokens = 2;
  config.kv_blocks = 4;
  config.max_running_sequences = 4;
  config.max_batched_tokens = 16;
  Scheduler scheduler(config);
  scheduler.Submit({1, 0.0, 3, 4, 0});
  scheduler.Submit({2, 0.0, 3, 4, 0});
  std::vector<IterationPlan> plans;
  while (!scheduler.Idle()) {
    plans.push_back(scheduler.Plan());
    scheduler.Complete(plans.back());
  }
  return plans;
}

TEST(DecisionLog, RoundTripsAndNamesTheFirstDifference) {
  SchedulerConfig config;
  config.kv_blocks = 4;
  const std::vector<IterationPlan> plans = SomePlans();
  const nlohmann::json log = DecisionLogToJson(config, plans);
  EXPECT_EQ(log["schema"], "moelab.serving_decisions/1");
  EXPECT_EQ(log["scheduler"]["kv_blocks"], 4);
  EXPECT_EQ(log["iterations"][2]["preempted"], nlohmann::json::array({2}));
  EXPECT_EQ(log["iterations"][0]["batch"][0]["phase"], "prefill");
  const std::vector<IterationPlan> back = DecisionLogFromJson(log, "log.json");
  EXPECT_EQ(back, plans);
  EXPECT_EQ(FirstDifference(plans, back), "");
  std::vector<IterationPlan> changed = plans;
  changed[3].batch[0].tokens = 2;
  EXPECT_NE(FirstDifference(plans, changed).find("recorded iteration 3"), std::string::npos);
  changed = plans;
  changed.pop_back();
  EXPECT_NE(FirstDifference(plans, changed).find("recorded iterations"), std::string::npos);
}

TEST(DecisionLog, LeavesOutIdleIterations) {
  SchedulerConfig config;
  config.kv_blocks = 4;
  std::vector<IterationPlan> plans = SomePlans();
  IterationPlan idle;
  idle.iteration = 99;
  std::vector<IterationPlan> with_idle = plans;
  with_idle.insert(with_idle.begin() + 1, idle);
  EXPECT_EQ(DecisionLogToJson(config, with_idle)["iterations"].size(), plans.size());
  EXPECT_EQ(FirstDifference(plans, with_idle), "");
}

TEST(DecisionLog, ErrorsNameTheFileAndField) {
  nlohmann::json log = {{"schema", "moelab.serving/1"}, {"iterations", nlohmann::json::array()}};
  EXPECT_NE(testing::ErrorOf([&] { DecisionLogFromJson(log, "x.json"); }).find("x.json"),
            std::string::npos);
  log["schema"] = kDecisionsSchema;
  log["iterations"] = {{{"iteration", 0},
                        {"kv_blocks_used", 0},
                        {"waiting", 0},
                        {"preempted", nlohmann::json::array()},
                        {"admitted", nlohmann::json::array()},
                        {"swapped_out", nlohmann::json::array()},
                        {"swapped_in", nlohmann::json::array()},
                        {"batch",
                         {{{"id", 1},
                           {"phase", "sideways"},
                           {"tokens", 1},
                           {"context_tokens", 0},
                           {"emits_token", true}}}}}};
  const std::string error = testing::ErrorOf([&] { DecisionLogFromJson(log, "x.json"); });
  EXPECT_NE(error.find("phase"), std::string::npos) << error;
}

}  // namespace
}  // namespace moelab::scheduler
