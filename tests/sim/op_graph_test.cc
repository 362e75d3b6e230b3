#include "sim/op_graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace moelab::sim {
namespace {

// Records completions; can release a follow-up op when one finishes.
class Recorder : public OpListener {
 public:
  struct Done {
    uint8_t kind;
    double start_s, end_s;
  };
  void OnOpDone(OpHandle, const Op& op) override {
    done.push_back({op.kind, op.start_s, op.end_s});
  }
  const Done& Of(uint8_t kind) const {
    for (const Done& d : done) {
      if (d.kind == kind) return d;
    }
    ADD_FAILURE() << "op " << int(kind) << " never finished";
    return done.front();
  }
  std::vector<Done> done;
};

TEST(OpGraph, OneResourceServesInArrivalOrder) {
  Recorder recorder;
  OpGraph graph(&recorder);
  for (uint8_t kind = 0; kind < 3; ++kind)
    graph.Commit(graph.NewOp(Resource::kHostToDevice, 1.0, kind));
  graph.Run();
  ASSERT_EQ(recorder.done.size(), 3u);
  for (uint8_t kind = 0; kind < 3; ++kind) {
    EXPECT_EQ(recorder.Of(kind).start_s, kind);
    EXPECT_EQ(recorder.Of(kind).end_s, kind + 1.0);
  }
  EXPECT_EQ(graph.busy_s(Resource::kHostToDevice), 3.0);
  EXPECT_EQ(graph.busy_s(Resource::kAcceleratorCompute), 0.0);
}

TEST(OpGraph, DemandBeforePrefetchAndHigherPriorityFirst) {
  Recorder recorder;
  OpGraph graph(&recorder);
  auto add = [&](uint8_t kind, uint8_t priority_class, double priority) {
    const OpHandle op = graph.NewOp(Resource::kHostToDevice, 1.0, kind);
    graph.at(op).priority_class = priority_class;
    graph.at(op).priority = priority;
    graph.Commit(op);
  };
  add(0, 1, 0.1);  // prefetch, low priority
  add(1, 1, 0.9);  // prefetch, high priority
  add(2, 0, 0.0);  // demand
  graph.Run();
  EXPECT_EQ(recorder.Of(2).start_s, 0.0);
  EXPECT_EQ(recorder.Of(1).start_s, 1.0);
  EXPECT_EQ(recorder.Of(0).start_s, 2.0);
}

TEST(OpGraph, DependenciesAcrossResourcesAndNoPreemption) {
  Recorder recorder;
  OpGraph graph(&recorder);
  const OpHandle prefetch = graph.NewOp(Resource::kHostToDevice, 5.0, 0);
  graph.at(prefetch).priority_class = 1;
  graph.Commit(prefetch);
  const OpHandle compute = graph.NewOp(Resource::kAcceleratorCompute, 1.0, 1);
  graph.Commit(compute);
  // A demand copy released when the compute ends (t = 1) waits for the running prefetch (t = 5).
  const OpHandle demand = graph.NewOp(Resource::kHostToDevice, 2.0, 2);
  graph.AddDependency(compute, demand);
  graph.Commit(demand);
  const OpHandle after = graph.NewOp(Resource::kAcceleratorCompute, 1.0, 3);
  graph.AddDependency(demand, after);
  graph.Commit(after);
  graph.Run();
  EXPECT_EQ(recorder.Of(2).start_s, 5.0);
  EXPECT_EQ(recorder.Of(3).start_s, 7.0);
  EXPECT_EQ(graph.now_s(), 8.0);
}

TEST(OpGraph, HandlesStayValidAndHoldsDelayStart) {
  Recorder recorder;
  OpGraph graph(&recorder);
  const OpHandle first = graph.NewOp(Resource::kCpuCompute, 1.0, 0);
  graph.Commit(first);
  EXPECT_TRUE(graph.Pending(first));
  graph.Run();
  EXPECT_FALSE(graph.Pending(first));
  const OpHandle reused = graph.NewOp(Resource::kCpuCompute, 1.0, 1);  // may reuse the slot
  EXPECT_FALSE(graph.Pending(first));
  EXPECT_TRUE(graph.Pending(reused));
  graph.AddDependency(first, reused);  // finished: no edge
  graph.Hold(reused);
  graph.Commit(reused);
  EXPECT_TRUE(graph.Pending(reused));
  graph.Release(reused);
  graph.Run();
  EXPECT_EQ(recorder.Of(1).start_s, 1.0);
}

TEST(OpGraph, ACycleIsReported) {
  Recorder recorder;
  OpGraph graph(&recorder);
  const OpHandle a = graph.NewOp(Resource::kNone, 0, 0);
  const OpHandle b = graph.NewOp(Resource::kNone, 0, 1);
  graph.AddDependency(a, b);
  graph.AddDependency(b, a);
  graph.Commit(a);
  graph.Commit(b);
  EXPECT_THROW(graph.Run(), base::Error);
}

}  // namespace
}  // namespace moelab::sim
