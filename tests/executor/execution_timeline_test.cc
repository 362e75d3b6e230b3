#include "executor/execution_timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "executor/generation.h"
#include "executor/transformer.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

using Kind = ExecutionTimeline::Kind;
using Clock = ExecutionTimeline::Clock;

// The trace names events as the simulator's timeline does, puts the compute thread and the passes
// in process 1 and each reader lane that read anything in process 2, and orders events by start.
TEST(ExecutionTimeline, TraceNamesEventsAsTheSimulatorDoes) {
  ExecutionTimeline timeline;
  const Clock::time_point t0 = Clock::now();
  const auto at = [&](double ms) {
    return t0 +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ms / 1e3));
  };
  timeline.Add(Kind::kStorage, 1, 3, ExecutionTimeline::kReaderLane + 1, at(0), at(2));  // pass -1
  timeline.BeginPass(0);
  timeline.Add(Kind::kDense, 2, -1, ExecutionTimeline::kComputeLane, at(3), at(4));
  timeline.Add(Kind::kWait, 1, 3, ExecutionTimeline::kComputeLane, at(4), at(6));
  timeline.Add(Kind::kCopy, 1, 3, ExecutionTimeline::kReaderLane + 1, at(5), at(6));
  timeline.Add(Kind::kExpert, 1, 3, ExecutionTimeline::kComputeLane, at(6), at(7));
  timeline.Add(Kind::kLmHead, -1, -1, ExecutionTimeline::kComputeLane, at(7), at(8));
  timeline.Add(Kind::kPass, -1, -1, ExecutionTimeline::kPassLane, at(3), at(8));

  const nlohmann::json trace = nlohmann::json::parse(timeline.TraceJson("test cpu (2 threads)"));
  std::map<std::pair<int, int>, std::string> lanes;
  std::vector<nlohmann::json> events;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      lanes[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 1) {
      EXPECT_EQ(e["args"]["name"], "executor: test cpu (2 threads)");
    }
    if (e["ph"] == "X") events.push_back(e);
  }
  EXPECT_EQ(lanes.at({1, 1}), "compute thread");
  EXPECT_EQ(lanes.at({1, 2}), "passes");
  EXPECT_EQ(lanes.at({2, 3}), "reader 1");
  EXPECT_EQ(lanes.count({2, 2}), 0u) << "reader 0 read nothing";
  ASSERT_EQ(events.size(), 7u);
  const std::vector<std::string> names = {"storage L1 E3", "dense layer 2", "pass 0", "wait L1 E3",
                                          "copy L1 E3",    "expert L1 E3",  "lm_head"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(events[i]["name"], names[i]) << i;
  EXPECT_EQ(events[0]["args"]["pass"], -1);  // before the first pass: the initial placement
  EXPECT_EQ(events[0]["cat"], "storage");
  EXPECT_EQ(events[0]["pid"], 2);
  EXPECT_NEAR(events[0]["dur"].get<double>(), 2000.0, 1.0);  // microseconds
  EXPECT_EQ(events[3]["args"]["pass"], 0);
  EXPECT_EQ(events[3]["pid"], 1);
  EXPECT_EQ(events[3]["tid"], 1);
  EXPECT_NEAR(events[3]["ts"].get<double>() - events[1]["ts"].get<double>(), 1000.0, 1.0);

  // A model that ran 7 passes before: its next pass is this run's pass 0.
  ExecutionTimeline later(7);
  later.BeginPass(8);
  later.Add(Kind::kLmHead, -1, -1, ExecutionTimeline::kComputeLane, at(0), at(1));
  EXPECT_EQ(later.events().at(0).pass, 1);
}

// A run with its experts in RAM: per pass the embedding, every layer's dense part (a MoE layer's
// norms, attention and router), every routed expert it ran and the LM head, one after the other
// on the compute thread and inside the pass; no waits, no reads.
TEST(ExecutionTimeline, APassRecordsEveryOperatorInOrder) {
  const ExecutorConfig c = testing::TinyQwenMoe();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(c, 5, pool);
  Transformer model(weights, pool);
  ExecutionTimeline timeline;
  model.set_timeline(&timeline);
  DecodeOptions decode;
  decode.output_tokens = 4;
  RunDecode(model, SyntheticPrompts(2, 5, c.vocab_size, 1), decode);

  std::map<Kind, int64_t> count;
  std::map<int64_t, std::pair<double, double>> pass_span;
  std::vector<ExecutionTimeline::Event> compute;
  for (const ExecutionTimeline::Event& e : timeline.events()) {
    ++count[e.kind];
    EXPECT_LE(e.start_s, e.end_s);
    if (e.kind == Kind::kPass) pass_span[e.pass] = {e.start_s, e.end_s};
    if (e.lane == ExecutionTimeline::kComputeLane) compute.push_back(e);
  }
  const int64_t passes = model.passes();
  EXPECT_EQ(passes, 4);  // the prompts' pass and three decode passes
  EXPECT_EQ(count[Kind::kPass], passes);
  EXPECT_EQ(count[Kind::kEmbedding], passes);
  EXPECT_EQ(count[Kind::kLmHead], passes);
  EXPECT_EQ(count[Kind::kDense], passes * c.num_layers);
  EXPECT_EQ(count[Kind::kWait] + count[Kind::kStorage] + count[Kind::kCopy], 0);
  // Each pass runs between one and (experts) routed experts per MoE layer.
  const int64_t moe_layers = c.num_layers - c.first_dense_layers;
  EXPECT_GE(count[Kind::kExpert], passes * moe_layers);
  EXPECT_LE(count[Kind::kExpert], passes * moe_layers * c.num_experts);
  for (size_t i = 0; i < compute.size(); ++i) {
    const auto [begin, end] = pass_span.at(compute[i].pass);
    EXPECT_GE(compute[i].start_s, begin) << EventName(compute[i]);
    EXPECT_LE(compute[i].end_s, end) << EventName(compute[i]);
    if (i > 0) {
      EXPECT_GE(compute[i].start_s, compute[i - 1].end_s) << EventName(compute[i]);
    }
    if (compute[i].kind == Kind::kExpert) {
      EXPECT_GE(compute[i].layer, 0);
      EXPECT_LT(compute[i].layer, moe_layers);
    }
  }
}

}  // namespace
}  // namespace moelab::executor
