// The simulator and the executor's offload runtime make the same decisions: on the same recorded
// routing trace, calibration and settings, their sequences of hits, promotions, fetches,
// evictions, prefetches and discards are identical, policy by policy. The executor's gate signals
// (its real gate's mean probabilities and speculative next-layer scores) are replayed in the
// simulator, which otherwise uses stand-ins for them.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "executor/generation.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/offload/offload_runtime.h"
#include "fit/cost_source_options.h"
#include "model/parameter_count.h"
#include "model/preset_store.h"
#include "policies/memory_plan.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"
#include "policies/calibration.h"
#include "sim/offload_simulator.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/test_paths.h"

namespace moelab::executor {
namespace {
namespace fs = std::filesystem;

constexpr uint64_t kSeed = 13;
constexpr int64_t kPrompt = 5, kOutput = 9;

ExecutorConfig Model() {
  ExecutorConfig c = testing::TinyMixtral();
  c.name = "tiny-mixtral-offload";
  c.num_layers = 4;
  c.num_experts = 8;
  return c;
}

// SimConfig::routing is a --routing value (a string or its parsed RoutingSpec): only reported here.
[[maybe_unused]] void SetRouting(std::string& field, const std::string& text) { field = text; }
[[maybe_unused]] void SetRouting(routing::RoutingSpec& field, const std::string& text) {
  field = routing::ParseRoutingSpec(text);
}

struct Fixture {
  Fixture(int64_t batch)
      : pool(2), config(Model()), dir(testing::MakeTempDir("moelab-same-decisions")) {
    const ModelWeights in_ram = MakeSyntheticWeights(config, kSeed, pool);
    Transformer model(in_ram, pool);
    trace.num_layers = config.num_layers;
    trace.num_experts = config.num_experts;
    trace.top_k = config.top_k;
    trace.source = "the executor's gate";
    DecodeOptions decode;
    decode.output_tokens = kOutput;
    decode.record = &trace;
    prompts = SyntheticPrompts(batch, kPrompt, config.vocab_size, kSeed);
    RunDecode(model, prompts, decode);
    trace_file = (dir / "trace.json").string();
    routing::SaveRoutingTrace(trace, trace_file);
    calibration =
        policies::CalibrateRouting("trace:" + trace_file, config.num_layers, config.num_experts,
                                   config.top_k, kSeed, policies::CalibrationOptions{});
    bool built = false;
    store = offload::PrepareExpertStore(
        config, "synthetic seed 13", dir, [&](offload::ExpertStoreWriter& writer) {
          const ExpertSink add = [&](int64_t l, int64_t e, const FfnWeights& w) {
            writer.Add(l, e, w);
          };
          weights = MakeSyntheticWeights(config, kSeed, pool, &add);
          built = true;
        });
    EXPECT_TRUE(built);
  }
  ~Fixture() { fs::remove_all(dir); }

  offload::OffloadOptions Options(const std::string& policy, const policies::PolicyOptions& options,
                                  int64_t slots) const {
    offload::OffloadOptions offload;
    offload.policy = policy;
    offload.policy_options = options;
    offload.expert_memory_bytes = slots * store.store->key().payload_bytes();
    offload.popularity = calibration.popularity;
    offload.history = calibration.history;
    offload.seed = kSeed;
    offload.record_decisions = true;
    return offload;
  }

  void DecodeWithTheTrace(ForwardModel& model) {
    std::unique_ptr<routing::RoutingSource> routing = routing::MakeTraceRouting(
        trace, config.num_layers, config.num_experts, config.top_k, trace_file);
    DecodeOptions decode;
    decode.output_tokens = kOutput;
    decode.routing = routing.get();
    RunDecode(model, prompts, decode);
  }

  offload::OffloadStats Executor(const std::string& policy, const policies::PolicyOptions& options,
                                 int64_t slots) {
    Transformer model(weights, pool);
    offload::OffloadRuntime runtime(config, *store.store, Options(policy, options, slots));
    model.set_expert_provider(&runtime);
    DecodeWithTheTrace(model);
    return runtime.Stats();
  }

  // The same run on the GPU backend: host -> device tiers, the runtime's decisions carried out
  // with copies on the device (the experts' bytes are the store's payload: no padding here).
  offload::OffloadStats GpuExecutor(const std::string& policy,
                                    const policies::PolicyOptions& options, int64_t slots) {
    const ModelWeights in_ram = MakeSyntheticWeights(config, kSeed, pool);
    offload::OffloadRuntime* runtime = nullptr;
    const std::unique_ptr<ForwardModel> model =
        MakeOffloadedGpuTransformer(in_ram, 0, Options(policy, options, slots), pool, &runtime);
    DecodeWithTheTrace(*model);
    return runtime->Stats();
  }

  sim::SimResult Simulator(const std::string& policy, const policies::PolicyOptions& options,
                           int64_t slots, const policies::GateSignals& signals) {
    static const model::PresetStore presets(testing::PresetDir());
    sim::SimConfig sim;
    sim.model = SpecFromExecutorConfig(config);
    sim.hardware = presets.LoadHardware("rtx-3090");
    sim.policy = policy;
    sim.policy_options = options;
    sim.workload.batch = static_cast<int64_t>(prompts.size());
    if (sim.workload.batch > 1) sim.workload.kind = sim::WorkloadKind::kBatch;
    sim.workload.prompt_tokens = kPrompt;
    sim.workload.output_tokens = kOutput;
    sim.routing = routing::ParseRoutingSpec("trace:" + trace_file);
    sim.seed = kSeed;
    // The same number of expert slots as the executor's budget: the model's non-expert bytes plus
    // `slots` experts (and half of one, so rounding cannot take a slot away).
    const policies::ModelMemory memory =
        policies::ModelMemoryOf(sim.model, sim.kv_bits, sim.workload.KvTokens());
    double dense = 0;
    for (double bytes : memory.dense_layer_bytes) dense += bytes;
    sim.accelerator_bytes =
        memory.fixed_bytes + dense +
        (static_cast<double>(slots) + 0.5) * static_cast<double>(model::ExpertBytes(sim.model));
    sim.gate_signals = std::make_shared<policies::GateSignals>(signals);
    sim.record_decisions = true;
    const fit::OffloadSources rooflines =
        fit::AnalyticOffloadSources(sim.model, sim.hardware, sim.cpu_threads, {});
    sim.accelerator_costs = rooflines.accelerator;
    sim.host_costs = rooflines.host;
    std::unique_ptr<routing::RoutingSource> routing = routing::MakeTraceRouting(
        trace, config.num_layers, config.num_experts, config.top_k, trace_file);
    return sim::SimulateOffload(sim, *routing, calibration);
  }

  kernels::ThreadPool pool;
  ExecutorConfig config;
  fs::path dir;
  routing::RoutingTrace trace;
  std::string trace_file;
  std::vector<TokenIds> prompts;
  policies::RoutingCalibration calibration;
  ModelWeights weights;
  offload::PreparedStore store;
};

struct Case {
  std::string policy;
  int64_t slots;  // experts the budget holds (cache and staging buffers)
  std::optional<int64_t> cache_per_layer = {}, prefetch = {}, staging_buffers = {}, gpu_layers = {};
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.policy << " with " << c.slots << " experts of memory";
}

class SameDecisions : public ::testing::TestWithParam<Case> {};

void ExpectSameDecisions(const offload::OffloadStats& executor, const sim::SimResult& simulator,
                         const std::string& label) {
  ASSERT_FALSE(executor.decisions.empty());
  const size_t common = std::min(executor.decisions.size(), simulator.decisions.size());
  for (size_t i = 0; i < common; ++i) {
    ASSERT_EQ(policies::ToString(executor.decisions[i]), policies::ToString(simulator.decisions[i]))
        << label << ": first difference at decision " << i;
  }
  EXPECT_EQ(executor.decisions.size(), simulator.decisions.size()) << label;
  EXPECT_EQ(executor.prefetches, simulator.prefetches) << label;
  EXPECT_EQ(executor.prefetches_used, simulator.prefetches_used) << label;
  EXPECT_EQ(executor.prefetches_wasted, simulator.prefetches_wasted) << label;
  EXPECT_EQ(executor.hits + executor.inflight_hits, simulator.hits + simulator.inflight_hits)
      << label;
}

policies::PolicyOptions OptionsOf(const Case& test) {
  policies::PolicyOptions options;
  options.cache_per_layer = test.cache_per_layer;
  options.prefetch = test.prefetch;
  options.staging_buffers = test.staging_buffers;
  options.gpu_layers = test.gpu_layers;
  return options;
}

TEST_P(SameDecisions, SimulatorAndExecutorAgreeDecisionByDecision) {
  const Case& test = GetParam();
  for (int64_t batch : {1, 3}) {
    Fixture fixture(batch);
    const policies::PolicyOptions options = OptionsOf(test);
    const offload::OffloadStats executor = fixture.Executor(test.policy, options, test.slots);
    const sim::SimResult simulator =
        fixture.Simulator(test.policy, options, test.slots, executor.signals);
    ExpectSameDecisions(executor, simulator, test.policy + " batch " + std::to_string(batch));
  }
}

// The GPU backend's offload runtime (host -> device) against the simulator, on the same trace
// with its own gate signals replayed; static-split's CPU layers run on the CPU beside the GPU.
TEST_P(SameDecisions, SimulatorAndGpuExecutorAgreeDecisionByDecision) {
  const std::string why_not = GpuUnavailableReason(0);
  if (!why_not.empty()) GTEST_SKIP() << "needs a GPU: " << why_not;
  const Case& test = GetParam();
  for (int64_t batch : {1, 3}) {
    Fixture fixture(batch);
    const policies::PolicyOptions options = OptionsOf(test);
    const offload::OffloadStats executor = fixture.GpuExecutor(test.policy, options, test.slots);
    const sim::SimResult simulator =
        fixture.Simulator(test.policy, options, test.slots, executor.signals);
    ExpectSameDecisions(executor, simulator,
                        "GPU " + test.policy + " batch " + std::to_string(batch));
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, SameDecisions,
                         ::testing::Values(Case{"on-demand", 7}, Case{"on-demand", 13},
                                           Case{"lru-prefetch", 14, 3, 2, 2},
                                           Case{"lru-prefetch", 12, 2, 1, 4},
                                           Case{"static-split", 16, {}, {}, {}, 2},
                                           Case{"fmoe", 10}, Case{"stream-all", 8}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name =
                               info.param.policy + "_" + std::to_string(info.param.slots);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// The check can fail: lru-prefetch shown the simulator's co-occurrence stand-in instead of the
// executor's real speculative gate prefetches other experts.
TEST(SameDecisions, DiffersWhenTheSimulatorUsesItsOwnSpeculativeGate) {
  Fixture fixture(1);
  policies::PolicyOptions options;
  options.cache_per_layer = 2;
  options.prefetch = 2;
  options.staging_buffers = 2;
  const offload::OffloadStats executor = fixture.Executor("lru-prefetch", options, 12);
  const sim::SimResult simulator =
      fixture.Simulator("lru-prefetch", options, 12, policies::GateSignals{});
  EXPECT_GT(executor.prefetches, 0);
  EXPECT_NE(executor.decisions, simulator.decisions);
}

}  // namespace
}  // namespace moelab::executor
