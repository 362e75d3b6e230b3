#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"
#include "tests/executor/offload_fixtures.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::executor::offload {
namespace {
namespace fs = std::filesystem;

bool SameBytes(const kernels::WeightMatrix& a, const kernels::WeightMatrix& b) {
  const auto x = a.Storage(), y = b.Storage();
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

TEST(ExpertStore, HoldsTheSameExpertsAndIsReusedWhenTheKeyMatches) {
  TempDir dir;
  for (kernels::WeightFormat format :
       {kernels::WeightFormat::kBf16, kernels::WeightFormat::kQ4_0}) {
    ExecutorConfig c = testing::TinyQwenMoe();
    c.expert_format = format;
    kernels::ThreadPool pool(2);
    const ModelWeights in_ram = MakeSyntheticWeights(c, 7, pool);
    Offloaded first(c, 7, dir.path);
    EXPECT_FALSE(first.store.reused);
    EXPECT_TRUE(first.weights.layers[1].experts.empty());
    // Every other weight is the same as the in-RAM model's.
    EXPECT_TRUE(SameBytes(first.weights.layers[2].qkv, in_ram.layers[2].qkv));
    EXPECT_TRUE(SameBytes(first.weights.layers[2].shared.down, in_ram.layers[2].shared.down));
    FfnWeights expert;
    expert.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
    AlignedBuffer buffer(first.store.store->key().block_bytes());
    for (int64_t layer = 0; layer < 2; ++layer) {
      for (int64_t e = 0; e < c.num_experts; ++e) {
        first.store.store->Read(layer, e, buffer, expert);
        EXPECT_TRUE(SameBytes(expert.gate_up, in_ram.layers[layer + 1].experts[e].gate_up))
            << layer << " " << e;
        EXPECT_TRUE(SameBytes(expert.down, in_ram.layers[layer + 1].experts[e].down))
            << layer << " " << e;
      }
    }
    EXPECT_EQ(first.store.store->key().block_bytes() % kStoreAlignment, 0);
    Offloaded again(c, 7, dir.path);
    EXPECT_TRUE(again.store.reused);
    Offloaded other_seed(c, 8, dir.path);  // same file names, another key: rebuilt
    EXPECT_FALSE(other_seed.store.reused);
  }
}

TEST(ExpertStore, CorruptionAndTruncationAreNeverTrusted) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  Offloaded built(c, 3, dir.path);
  const fs::path data = built.store.store->data_path();
  const int64_t block = built.store.store->key().block_bytes();
  built.store.store.reset();
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(block * 5 + 17);
    file.put('\x5a');
  }
  std::unique_ptr<ExpertStore> store =
      ExpertStore::Open(dir.path, ExpertStoreKeyFor(c, "synthetic seed 3"));
  ASSERT_TRUE(store);
  FfnWeights expert;
  expert.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
  AlignedBuffer buffer(block);
  store->Read(0, 4, buffer, expert);  // untouched blocks read fine
  EXPECT_NE(testing::ErrorOf([&] {
              store->Read(0, 5, buffer, expert);
            }).find("checksum mismatch for MoE layer 0 expert 5"),
            std::string::npos);
  // The I/O alone (the disk probe's read) checks no checksum, but what it reads and into what.
  store->ReadBlock(0, 5, buffer);
  EXPECT_NE(testing::ErrorOf([&] { store->ReadBlock(0, c.num_experts, buffer); }).find("no MoE"),
            std::string::npos);
  AlignedBuffer small(block / 2);
  EXPECT_NE(testing::ErrorOf([&] { store->ReadBlock(0, 4, small); }).find("smaller than its block"),
            std::string::npos);
  store.reset();
  fs::resize_file(data, static_cast<uintmax_t>(block * 3));
  EXPECT_FALSE(ExpertStore::Open(dir.path, ExpertStoreKeyFor(c, "synthetic seed 3")));
  Offloaded rebuilt(c, 3, dir.path);
  EXPECT_FALSE(rebuilt.store.reused);
  store = ExpertStore::Open(dir.path, ExpertStoreKeyFor(c, "synthetic seed 3"));
  ASSERT_TRUE(store);
  store->Read(0, 5, buffer, expert);
}

TEST(ExpertStore, AnUnfinishedWriteLeavesNothingTrusted) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  Offloaded built(c, 3, dir.path);
  const ExpertStoreKey key = ExpertStoreKeyFor(c, "synthetic seed 3");
  {
    ExpertStoreWriter writer(dir.path, key);  // a rebuild that dies before Commit
    FfnWeights zero;
    zero.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
    writer.Add(0, 0, zero);
  }
  EXPECT_FALSE(ExpertStore::Open(dir.path, key));  // the old manifest went first
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST(ExpertStore, UnwritableFolderIsAClearError) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  // A folder under a regular file cannot be created, whoever runs the test.
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  const fs::path bad = dir.path / "file" / "store";
  EXPECT_NE(testing::ErrorOf([&] {
              Offloaded(c, 3, bad);
            }).find("--offload-dir " + bad.string() + ": cannot create the folder"),
            std::string::npos);
}

struct DecodeRun {
  std::vector<TokenIds> outputs;
  OffloadStats stats;
};

DecodeRun Decode(Offloaded& model, const OffloadOptions* options, int64_t batch,
                 ExecutionTimeline* timeline = nullptr) {
  Transformer transformer(model.weights, model.pool);
  transformer.set_timeline(timeline);
  std::unique_ptr<OffloadRuntime> runtime;
  if (options) {
    runtime = std::make_unique<OffloadRuntime>(model.config, *model.store.store, *options);
    transformer.set_expert_provider(runtime.get());
  }
  DecodeOptions decode;
  decode.output_tokens = 12;
  const DecodeResult result =
      RunDecode(transformer, SyntheticPrompts(batch, 6, model.config.vocab_size, 2), decode);
  return {result.outputs, runtime ? runtime->Stats() : OffloadStats{}};
}

TEST(OffloadRuntime, EveryPolicyComputesExactlyWhatTheInRamModelDoes) {
  TempDir dir;
  ExecutorConfig c = testing::TinyQwenMoe();
  c.num_experts = 8;
  kernels::ThreadPool pool(2);
  const ModelWeights in_ram = MakeSyntheticWeights(c, 11, pool);
  Transformer reference(in_ram, pool);
  Offloaded model(c, 11, dir.path);
  const int64_t expert_bytes = model.store.store->key().payload_bytes();
  for (int64_t batch : {1, 3}) {
    DecodeOptions decode;
    decode.output_tokens = 12;
    const auto expected =
        RunDecode(reference, SyntheticPrompts(batch, 6, c.vocab_size, 2), decode).outputs;
    struct Case {
      std::string policy;
      int64_t experts_in_memory;
      policies::PolicyOptions options;
    };
    std::vector<Case> cases = {{"on-demand", 3, {}},    {"on-demand", 12, {}},
                               {"lru-prefetch", 8, {}}, {"static-split", 9, {}},
                               {"fmoe", 6, {}},         {"stream-all", 8, {}}};
    cases[2].options.staging_buffers = 2;
    cases[2].options.cache_per_layer = 3;
    cases[4].options.prefetch_distance = 1;
    // Every reader this build and kernel can run issues the same reads.
    std::vector<ReaderKind> readers = {ReaderKind::kThreads};
    if (IoUringAvailable(nullptr)) readers.push_back(ReaderKind::kIoUring);
    for (const ReaderKind reader : readers)
      for (const Case& test : cases) {
        OffloadOptions options;
        options.policy = test.policy;
        options.policy_options = test.options;
        options.expert_memory_bytes = test.experts_in_memory * expert_bytes;
        options.seed = 11;
        options.reader = reader;
        const DecodeRun run = Decode(model, &options, batch);
        EXPECT_EQ(run.outputs, expected)
            << test.policy << " batch " << batch << " reader " << ToString(reader);
        const OffloadStats& s = run.stats;
        EXPECT_EQ(s.reader, ToString(reader));
        EXPECT_EQ(s.passes, 12);
        EXPECT_EQ(s.activations, s.hits + s.inflight_hits + s.demand_fetches + s.transient_fetches +
                                     s.storage_runs);
        EXPECT_GT(s.activations, 0);
        EXPECT_EQ(s.reads, s.demand_fetches + s.transient_fetches + s.storage_runs + s.prefetches)
            << test.policy;
        EXPECT_LE(s.hits + s.inflight_hits, s.activations);
        // The RAM budget holds except for transient buffers: static-split's streamed layers, and a
        // layer that needs more experts than the cache holds (at most one layer's experts more).
        EXPECT_LE(s.buffers_allocated, s.expert_slots + s.staging_buffers + c.num_experts)
            << test.policy;
        if (test.experts_in_memory >= c.num_experts && test.policy != "static-split") {
          EXPECT_LE(s.buffers_allocated, s.expert_slots + s.staging_buffers) << test.policy;
        }
        int64_t layer_hits = 0;
        for (int64_t h : s.layer_hits) layer_hits += h;
        EXPECT_LE(layer_hits, s.activations);
        if (test.policy == "stream-all") {
          EXPECT_EQ(s.hits + s.inflight_hits, 0);
          EXPECT_EQ(s.reads,
                    12 * 2 * c.num_experts);  // every expert of both MoE layers, every pass
        }
        if (test.policy == "lru-prefetch") {
          EXPECT_GE(s.speculative_used, 1);
        }
        // Where the run's reads spent their time: every read a layer waited for has finished (a
        // last prefetch may still be landing), none of the initial placement's is counted.
        ASSERT_TRUE(s.read_spans.has_value()) << test.policy;
        EXPECT_LE(s.read_spans->reads, s.reads) << test.policy;
        EXPECT_GE(s.read_spans->reads, s.demand_fetches + s.transient_fetches + s.storage_runs)
            << test.policy;
        EXPECT_GE(s.read_spans->running_s, 0.0) << test.policy;
        EXPECT_EQ(s.ToJson()["read_spans"]["reads"], s.read_spans->reads) << test.policy;
      }
  }
}

// With a timeline, every read shows as its pread and its checksum and copy on a reader lane, every
// expert computation on the compute thread, and every wait for a read on the compute thread,
// ending once a read of that expert in the same pass has landed (its copy may end just before the
// wait begins: the reader marks it done after); the waits add up to the stall the tier counts.
// A read that has landed before the compute thread asks for it is not a wait (io_uring can finish
// a read from the page cache as it is submitted), so a run that never waited is repeated until
// one does: every run's timeline must hold the invariants, and some run must have drawn a wait.
TEST(OffloadRuntime, TheTimelineShowsEveryReadAndEveryWait) {
  TempDir dir;
  ExecutorConfig c = testing::TinyQwenMoe();
  c.num_experts = 8;
  Offloaded model(c, 11, dir.path);
  std::vector<ReaderKind> readers = {ReaderKind::kThreads};
  if (IoUringAvailable(nullptr)) readers.push_back(ReaderKind::kIoUring);
  constexpr int kMaxRuns = 8;
  for (const ReaderKind reader : readers) {
    for (const std::string policy : {"on-demand", "stream-all"}) {
      const std::string label = policy + " " + ToString(reader);
      int64_t runs_that_waited = 0;
      for (int run = 0; run < kMaxRuns && runs_that_waited == 0; ++run) {
        ExecutionTimeline timeline;
        OffloadOptions options;
        options.policy = policy;
        options.expert_memory_bytes = 8 * model.store.store->key().payload_bytes();
        options.seed = 11;
        options.reader = reader;
        options.timeline = &timeline;
        const OffloadStats s = Decode(model, &options, 2, &timeline).stats;
        using Kind = ExecutionTimeline::Kind;
        std::map<Kind, int64_t> count;
        double waited_s = 0;
        std::vector<ExecutionTimeline::Event> copies, waits;
        std::map<int64_t, double> pass_start;
        for (const ExecutionTimeline::Event& e : timeline.events()) {
          ++count[e.kind];
          if (e.kind == Kind::kPass) pass_start[e.pass] = e.start_s;
          if (e.kind == Kind::kStorage || e.kind == Kind::kCopy) {
            EXPECT_GE(e.lane, ExecutionTimeline::kReaderLane) << label;
            EXPECT_GE(e.expert, 0) << label;
          }
          if (e.kind == Kind::kCopy) copies.push_back(e);
          if (e.kind == Kind::kWait) {
            waits.push_back(e);
            waited_s += e.end_s - e.start_s;
          }
        }
        // Neither policy prefetches, so every read has landed by the end of the run.
        EXPECT_EQ(count[Kind::kStorage], s.reads + s.initial_reads) << label;
        EXPECT_EQ(count[Kind::kCopy], s.reads + s.initial_reads) << label;
        EXPECT_EQ(count[Kind::kExpert], s.activations) << label;
        EXPECT_GE(s.demand_fetches + s.transient_fetches, 1) << label;
        EXPECT_LE(count[Kind::kWait], s.demand_fetches + s.transient_fetches) << label;
        EXPECT_NEAR(waited_s, s.stall_s, 0.1 * s.stall_s + 1e-3) << label;
        for (const ExecutionTimeline::Event& wait : waits) {
          const bool landed = std::any_of(copies.begin(), copies.end(), [&](const auto& copy) {
            return copy.layer == wait.layer && copy.expert == wait.expert &&
                   copy.end_s <= wait.end_s && copy.end_s >= pass_start.at(wait.pass);
          });
          EXPECT_TRUE(landed) << label << ": " << EventName(wait);
        }
        if (count[Kind::kWait] > 0) ++runs_that_waited;
      }
      EXPECT_EQ(runs_that_waited, 1) << label << ": no wait drawn in " << kMaxRuns << " runs";
    }
  }
}

// Static-split's streamed layers read their experts into transient buffers; those are allocated
// with the cache, before the first token, so no pass pays for allocating them (the simulator
// does not), and a run never allocates more.
TEST(OffloadRuntime, StaticSplitTransientBuffersExistBeforeTheFirstToken) {
  TempDir dir;
  ExecutorConfig c = testing::TinyQwenMoe();
  c.num_experts = 8;
  Offloaded model(c, 11, dir.path);
  OffloadOptions options;
  options.policy = "static-split";
  options.expert_memory_bytes = 9 * model.store.store->key().payload_bytes();  // one layer of two
  options.seed = 11;
  const OffloadRuntime runtime(c, *model.store.store, options);
  const OffloadStats before = runtime.Stats();
  ASSERT_EQ(before.expert_slots, c.num_experts);
  EXPECT_EQ(before.buffers_allocated, before.expert_slots + c.num_experts);
  const DecodeRun run = Decode(model, &options, 3);
  EXPECT_GT(run.stats.storage_runs, 0);
  EXPECT_EQ(run.stats.buffers_allocated, before.buffers_allocated);

  // A policy that never streams a layer allocates its budget only.
  options.policy = "on-demand";
  const OffloadRuntime on_demand(c, *model.store.store, options);
  EXPECT_EQ(on_demand.Stats().buffers_allocated,
            on_demand.Stats().expert_slots + on_demand.Stats().staging_buffers);
}

TEST(OffloadRuntime, RefusesWhatItCannotRun) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  Offloaded model(c, 5, dir.path);
  const int64_t expert_bytes = model.store.store->key().payload_bytes();
  OffloadOptions options;
  options.policy = "fiddler";
  options.expert_memory_bytes = 20 * expert_bytes;
  EXPECT_NE(testing::ErrorOf([&] {
              OffloadRuntime(c, *model.store.store, options);
            }).find("second compute device"),
            std::string::npos);
  options.policy = "on-demand";
  options.expert_memory_bytes = expert_bytes + expert_bytes / 2;
  EXPECT_NE(testing::ErrorOf([&] {
              OffloadRuntime(c, *model.store.store, options);
            }).find("fewer than one layer's top-2"),
            std::string::npos);
  options.policy = "no-such-policy";
  options.expert_memory_bytes = 20 * expert_bytes;
  EXPECT_NE(testing::ErrorOf([&] {
              OffloadRuntime(c, *model.store.store, options);
            }).find("valid policies"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::executor::offload
