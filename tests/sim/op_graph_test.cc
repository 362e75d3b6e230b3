#include "sim/op_graph.h"

#include <gtest/gtest.h>

#include <map>
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

// Processor sharing: a disk with two reads in flight serves each at half its rate.
TEST(OpGraph, ASharedResourceSplitsItsRateAmongTheOpsRunning) {
  Recorder recorder;
  OpGraph graph(&recorder);
  graph.ShareResource(Resource::kStorageRead, 2);
  // Two reads of 1 s alone issued together both land at 2 s; a third waits for a place and then
  // runs alone; an op of another resource is untouched.
  for (uint8_t kind = 0; kind < 3; ++kind)
    graph.Commit(graph.NewOp(Resource::kStorageRead, 1.0, kind));
  graph.Commit(graph.NewOp(Resource::kHostToDevice, 1.0, 9));
  graph.Run();
  EXPECT_DOUBLE_EQ(recorder.Of(0).end_s, 2.0);
  EXPECT_DOUBLE_EQ(recorder.Of(1).end_s, 2.0);
  EXPECT_DOUBLE_EQ(recorder.Of(2).start_s, 2.0);
  EXPECT_DOUBLE_EQ(recorder.Of(2).end_s, 3.0);
  EXPECT_DOUBLE_EQ(recorder.Of(9).end_s, 1.0);
  EXPECT_DOUBLE_EQ(graph.busy_s(Resource::kStorageRead), 3.0);  // the work, at the full rate

  // Unequal reads: 1 s and 3 s alone together; the short one lands at 2 s, the long one has 2 s
  // of its own left and runs alone from there: it lands at 4 s. One finishing op, one event each.
  Recorder unequal;
  OpGraph second(&unequal);
  second.ShareResource(Resource::kStorageRead, 2);
  second.Commit(second.NewOp(Resource::kStorageRead, 1.0, 0));
  second.Commit(second.NewOp(Resource::kStorageRead, 3.0, 1));
  second.Run();
  ASSERT_EQ(unequal.done.size(), 2u);
  EXPECT_DOUBLE_EQ(unequal.Of(0).end_s, 2.0);
  EXPECT_DOUBLE_EQ(unequal.Of(1).end_s, 4.0);

  // A read issued while another runs: 2 s alone from t = 0, and 0.5 s alone released at t = 1
  // (after an op of 1 s on another resource). The first has 1 s left at t = 1; both then progress
  // at half rate, so the second lands at 2 s with the first 0.5 s short, which it runs alone: 2.5
  // s.
  Recorder late;
  OpGraph third(&late);
  third.ShareResource(Resource::kStorageRead, 2);
  third.Commit(third.NewOp(Resource::kStorageRead, 2.0, 0));
  const OpHandle gate = third.NewOp(Resource::kAcceleratorCompute, 1.0, 5);
  third.Commit(gate);
  const OpHandle after = third.NewOp(Resource::kStorageRead, 0.5, 1);
  third.AddDependency(gate, after);
  third.Commit(after);
  third.Run();
  EXPECT_DOUBLE_EQ(late.Of(1).start_s, 1.0);
  EXPECT_DOUBLE_EQ(late.Of(1).end_s, 2.0);
  EXPECT_DOUBLE_EQ(late.Of(0).end_s, 2.5);
  EXPECT_THROW(third.ShareResource(Resource::kNone, 2), base::Error);
}

TEST(OpGraph, ASharedResourceRunsAtItsCoupledRateWhileTheOtherComputes) {
  // A read of 2 s alone from t = 0; from t = 0.5 to t = 1.5 a compute op (kind 3, coupled) runs,
  // during which reads progress at half rate; a copy (kind 4, not coupled) from 1.5 to 2.5 leaves
  // it alone. By 0.5: 0.5 s done; by 1.5: 0.5 more; the last 1 s alone: it lands at 2.5 s.
  Recorder recorder;
  OpGraph graph(&recorder);
  graph.ShareResource(Resource::kStorageRead, 1);
  graph.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1u << 3, 0.5);
  graph.Commit(graph.NewOp(Resource::kStorageRead, 2.0, 0));
  const OpHandle wait = graph.NewOp(Resource::kHostToDevice, 0.5, 9);
  graph.Commit(wait);
  const OpHandle compute = graph.NewOp(Resource::kAcceleratorCompute, 1.0, 3);
  graph.AddDependency(wait, compute);
  graph.Commit(compute);
  const OpHandle copy = graph.NewOp(Resource::kAcceleratorCompute, 1.0, 4);
  graph.AddDependency(compute, copy);
  graph.Commit(copy);
  graph.Run();
  EXPECT_DOUBLE_EQ(recorder.Of(3).end_s, 1.5);
  EXPECT_DOUBLE_EQ(recorder.Of(4).end_s, 2.5);
  EXPECT_DOUBLE_EQ(recorder.Of(0).end_s, 2.5);
  EXPECT_DOUBLE_EQ(graph.busy_s(Resource::kStorageRead), 2.0);  // the work, at the rate alone

  // Two reads in flight share the coupled rate too: 1 s alone each, issued together beside a
  // compute op of 10 s at rate 0.5: each progresses at 0.25, both land at 4 s.
  Recorder shared;
  OpGraph two(&shared);
  two.ShareResource(Resource::kStorageRead, 2);
  two.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1u << 3, 0.5);
  two.Commit(two.NewOp(Resource::kStorageRead, 1.0, 0));
  two.Commit(two.NewOp(Resource::kStorageRead, 1.0, 1));
  two.Commit(two.NewOp(Resource::kAcceleratorCompute, 10.0, 3));
  two.Run();
  EXPECT_DOUBLE_EQ(shared.Of(0).end_s, 4.0);
  EXPECT_DOUBLE_EQ(shared.Of(1).end_s, 4.0);

  // Without the coupling the same read lands at 2 s whatever computes.
  Recorder plain;
  OpGraph uncoupled(&plain);
  uncoupled.ShareResource(Resource::kStorageRead, 1);
  uncoupled.Commit(uncoupled.NewOp(Resource::kStorageRead, 2.0, 0));
  uncoupled.Commit(uncoupled.NewOp(Resource::kAcceleratorCompute, 1.0, 3));
  uncoupled.Run();
  EXPECT_DOUBLE_EQ(plain.Of(0).end_s, 2.0);

  OpGraph refused(&plain);
  EXPECT_THROW(  // not shared
      refused.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1, 0.5),
      base::Error);
  refused.ShareResource(Resource::kStorageRead, 2);
  EXPECT_THROW(
      refused.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1, 0),
      base::Error);
  refused.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1, 0.5);
  EXPECT_THROW(  // a second coupling would silently replace the first
      refused.SetRateWhileBusy(Resource::kStorageRead, Resource::kCpuCompute, 1, 0.5), base::Error);
}

// The computation of a storage-tier machine slows while reads are in flight (the reader takes
// from its cores) as the reads slow while it computes: two shared resources following each other.
TEST(OpGraph, TwoSharedResourcesFollowEachOther) {
  // A read of 1 s alone at 0.5 while computing; a compute op of 2 s alone at 0.8 while reading.
  // The read lands at 2 s; by then the compute op has done 1.6 s of its work, the rest at its full
  // rate: 2.4 s.
  Recorder recorder;
  OpGraph graph(&recorder);
  graph.ShareResource(Resource::kStorageRead, 2);
  graph.ShareResource(Resource::kAcceleratorCompute, 1);
  graph.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, 1u << 3, 0.5);
  graph.SetRateWhileBusy(Resource::kAcceleratorCompute, Resource::kStorageRead, 1u << 0, 0.8);
  graph.Commit(graph.NewOp(Resource::kStorageRead, 1.0, 0));
  graph.Commit(graph.NewOp(Resource::kAcceleratorCompute, 2.0, 3));
  graph.Run();
  EXPECT_DOUBLE_EQ(recorder.Of(0).end_s, 2.0);
  EXPECT_DOUBLE_EQ(recorder.Of(3).end_s, 2.4);
  EXPECT_DOUBLE_EQ(graph.busy_s(Resource::kAcceleratorCompute),
                   2.0);  // the work, at the rate alone

  // The computation stays slowed while any coupled read runs, not only the first: reads of 1 and
  // 2 s alone share the disk (the first lands at 2 s, the second at 3 s); a compute op of 4 s at
  // 0.5 until 3 s has 2.5 s of work left then, and ends at 5.5 s (5 s had the first landing
  // restored its rate).
  Recorder counted;
  OpGraph two(&counted);
  two.ShareResource(Resource::kStorageRead, 2);
  two.ShareResource(Resource::kAcceleratorCompute, 1);
  two.SetRateWhileBusy(Resource::kAcceleratorCompute, Resource::kStorageRead, 1u << 0, 0.5);
  two.Commit(two.NewOp(Resource::kStorageRead, 1.0, 0));
  const OpHandle second = two.NewOp(Resource::kStorageRead, 2.0, 0);
  two.Commit(second);
  two.Commit(two.NewOp(Resource::kAcceleratorCompute, 4.0, 3));
  two.Run();
  EXPECT_DOUBLE_EQ(counted.Of(3).end_s, 5.5);

  // A kind outside the mask leaves the rate alone.
  Recorder other;
  OpGraph masked(&other);
  masked.ShareResource(Resource::kAcceleratorCompute, 1);
  masked.SetRateWhileBusy(Resource::kAcceleratorCompute, Resource::kStorageRead, 1u << 0, 0.5);
  masked.Commit(masked.NewOp(Resource::kStorageRead, 1.0, 1));
  masked.Commit(masked.NewOp(Resource::kAcceleratorCompute, 2.0, 3));
  masked.Run();
  EXPECT_DOUBLE_EQ(other.Of(3).end_s, 2.0);
}

// A reschedule leaves the op's earlier event in the queue; when it comes up the op may be gone and
// its index reused by an op of another resource, which must not finish early.
TEST(OpGraph, AReplacedEventNeverFinishesTheOpThatReusesItsIndex) {
  class Spawner : public OpListener {
   public:
    OpGraph* graph = nullptr;
    std::vector<std::pair<uint8_t, double>> done;  // kind, end
    void OnOpDone(OpHandle, const Op& op) override {
      done.push_back({op.kind, op.end_s});
      if (op.kind <= 2) graph->Commit(graph->NewOp(Resource::kHostToDevice, 100.0, 7 + op.kind));
    }
  } spawner;
  OpGraph graph(&spawner);
  spawner.graph = &graph;
  graph.ShareResource(Resource::kStorageRead, 2);
  // A (1 s) and B (3 s) share the disk: events A@2, B@6; at 2 B is rescheduled to 4 (B@6 stale).
  // A's and B's completions and C's (on compute, at 5) each spawn an op of 100 s; C's reuses B's
  // index before the stale B@6 comes up.
  graph.Commit(graph.NewOp(Resource::kStorageRead, 1.0, 0));
  graph.Commit(graph.NewOp(Resource::kStorageRead, 3.0, 1));
  graph.Commit(graph.NewOp(Resource::kAcceleratorCompute, 5.0, 2));
  graph.Run();
  std::map<uint8_t, double> end;
  for (const auto& [kind, end_s] : spawner.done) end[kind] = end_s;
  ASSERT_EQ(spawner.done.size(), 6u);
  EXPECT_DOUBLE_EQ(end[0], 2.0);
  EXPECT_DOUBLE_EQ(end[1], 4.0);
  EXPECT_DOUBLE_EQ(end[2], 5.0);
  // The spawned ops queue on one copy engine: 2..102, 102..202, 202..302.
  EXPECT_DOUBLE_EQ(end[7], 102.0);
  EXPECT_DOUBLE_EQ(end[8], 202.0);
  EXPECT_DOUBLE_EQ(end[9], 302.0);
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
