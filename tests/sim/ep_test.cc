// sim ep's library: the pipeline schedule, the collective and GEMM models, the simulator's sweep
// against brute force and its limits (no communication, bad layouts), node presets with links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "model/collective_cost.h"
#include "model/cost_source.h"
#include "model/rank_imbalance.h"
#include "sim/ep_gemm.h"
#include "sim/ep_pipeline.h"
#include "sim/ep_simulator.h"
#include "tests/sim/sim_test_util.h"

namespace moelab::sim {
namespace {

using testing::Presets;

EpConfig DeepSeekPrefill() {
  EpConfig config;
  config.model = Presets().LoadModel("deepseek-v2");
  config.node = Presets().LoadHardware("8xh800");
  config.ep = 8;
  config.workload = EpWorkload::kPrefill;
  config.batch = 8;
  config.tokens = 4096;
  return config;
}

// One accelerator of the node, priced by its analytic roofline (what --hardware gives).
std::unique_ptr<model::RooflineCostSource> OneDevice(const model::HardwareSpec& node) {
  return model::RooflineCostSource::ForHardware(OneAcceleratorOf(node), model::CostParameters{});
}

EpResult Simulate(const EpConfig& config) {
  const auto compute = OneDevice(config.node);
  const auto links = model::LinkCollectiveCost::ForNode(config.node);
  return SimulateEp(config, *compute, *links);
}

TEST(ExpertPipeline, OneChunkRunsEverythingInTurn) {
  const PipelineSchedule s = SchedulePipeline({{2.0, 3.0, 1.5}}, 0.5, false);
  EXPECT_DOUBLE_EQ(s.makespan_s, 0.5 + 2.0 + 3.0 + 1.5);
  EXPECT_DOUBLE_EQ(s.exposed_communication_s, 3.5);
}

TEST(ExpertPipeline, SplittingTheSameWorkNeverLosesAndOverlapsWhenBothExist) {
  for (const auto& [comm, comp] : {std::pair{4.0, 6.0}, {6.0, 4.0}, {1.0, 9.0}, {5.0, 5.0}}) {
    const double serial = SchedulePipeline({{comm, comp, comm}}, 0, false).makespan_s;
    for (int n = 2; n <= 16; ++n) {
      const std::vector<ChunkWork> chunks(n, ChunkWork{comm / n, comp / n, comm / n});
      const PipelineSchedule s = SchedulePipeline(chunks, 0);
      EXPECT_LT(s.makespan_s, serial) << comm << " " << comp << " N=" << n;
      // Never below the busier lane's work.
      EXPECT_GE(s.makespan_s + 1e-12, std::max(2 * comm, comp));
    }
  }
}

TEST(ExpertPipeline, WithoutCommunicationTheComputeLaneIsTheWholeTime) {
  const std::vector<ChunkWork> chunks(4, ChunkWork{0, 2.5, 0});
  const PipelineSchedule s = SchedulePipeline(chunks, 1.0);
  EXPECT_DOUBLE_EQ(s.makespan_s, 11.0);
  EXPECT_DOUBLE_EQ(s.exposed_communication_s, 0.0);
  EXPECT_THROW(SchedulePipeline({}, 0), base::Error);
  EXPECT_THROW(SchedulePipeline({{-1, 1, 1}}, 0), base::Error);
}

// Ranks whose exchanges progress only on the cores that compute: one lane, the pipeline's order,
// nothing hidden; splitting adds each chunk's latency instead of hiding the exchange.
TEST(ExpertPipeline, LanesSharingTheCoresRunOneOpAtATime) {
  const std::vector<ChunkWork> chunks = {{1.0, 3.0, 0.5}, {1.0, 2.0, 0.5}, {1.5, 2.0, 1.0}};
  const PipelineSchedule shared = SchedulePipeline(chunks, 0.25, true, true);
  EXPECT_DOUBLE_EQ(shared.makespan_s, 0.25 + 5.5 + 7.0);
  EXPECT_DOUBLE_EQ(shared.exposed_communication_s, 5.5);
  EXPECT_LT(SchedulePipeline(chunks, 0.25, true).makespan_s, shared.makespan_s);
  for (size_t i = 1; i < shared.ops.size(); ++i)  // back to back, in the pipeline's order
    EXPECT_DOUBLE_EQ(shared.ops[i].start_s, shared.ops[i - 1].end_s) << i;
  EXPECT_EQ(shared.ops[1].name, "dispatch");
  EXPECT_EQ(shared.ops[5].name, "combine");  // lead, D0 G0 D1 G1 C0
}

TEST(SimEp, WithoutOverlapMoreChunksOnlyAddTheirLatency) {
  EpConfig config = DeepSeekPrefill();
  config.communication_overlaps_compute = false;
  config.chunks = 1;
  const EpResult one = Simulate(config);
  for (const int64_t n : {2, 4}) {
    config.chunks = n;
    const EpResult r = Simulate(config);
    EXPECT_GE(r.chosen.exposed_comm_s, one.chosen.exposed_comm_s) << n;
    EXPECT_NEAR(r.chosen.exposed_comm_s, r.chosen.dispatch_s + r.chosen.combine_s, 1e-12) << n;
    EXPECT_GT(r.chosen.step_s, one.chosen.step_s) << n;
  }
  // Nothing overlaps, so no SMs are lent to the exchanges: --comm-sms changes nothing.
  config.chunks = 4;
  const double step_s = Simulate(config).chosen.step_s;
  config.comm_sms = 64;
  EXPECT_EQ(Simulate(config).chosen.step_s, step_s);
  EXPECT_EQ(Simulate(config).compute_sms, config.node.accelerator->sm_count);
  config.comm_sms = 16;
  config.chunks.reset();  // auto: the sweep's optimum is no pipeline
  EXPECT_EQ(Simulate(config).chosen.chunks, 1);
  config.communication_overlaps_compute = true;
  EXPECT_GT(Simulate(config).chosen.chunks, 1);
}

TEST(LinkCollectives, AllToAllTimeScalesWithBytesAboveItsLatency) {
  const model::HardwareSpec node = Presets().LoadHardware("8xh800");
  const auto links = model::LinkCollectiveCost::ForNode(node);
  const model::CollectiveGroup group{8, 8};
  const double latency = node.interconnect->latency_s;
  const double one = links->AllToAllSeconds(1e8, group);
  const double two = links->AllToAllSeconds(2e8, group);
  EXPECT_NEAR(two - latency, 2 * (one - latency), 1e-12);
  EXPECT_NEAR(one, latency + 1e8 / 2e11, 1e-12);  // NVSwitch: the per-GPU bandwidth
  EXPECT_EQ(links->AllToAllSeconds(1e8, {1, 8}), 0.0);
  EXPECT_THROW(links->AllToAllSeconds(-1, group), base::Error);
}

TEST(LinkCollectives, TheScaleOutNetworkIsTheSlowestLink) {
  const model::HardwareSpec cluster = Presets().LoadHardware("2x8xh800-ib");
  EXPECT_EQ(cluster.accelerator_count, 16);
  EXPECT_EQ(cluster.AcceleratorsPerMachine(), 8);
  ASSERT_TRUE(cluster.scale_out.has_value());
  const auto links = model::LinkCollectiveCost::ForNode(cluster);
  // 16 ranks: 7 peers in the machine over NVLink, 8 over 50 GB/s InfiniBand, at the same time.
  const double bytes = 1.5e8;
  const double expected = std::max(2e-6 + bytes * 7 / 15 / 2e11, 5e-6 + bytes * 8 / 15 / 5e10);
  EXPECT_NEAR(links->AllToAllSeconds(bytes, {16, 8}), expected, 1e-12);
  EXPECT_GT(links->AllReduceSeconds(bytes, {16, 8}), links->AllReduceSeconds(bytes, {8, 8}));
}

TEST(NodePresets, SeveralMachinesNeedTheirScaleOutNetwork) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "two-machines-no-network.json";
  std::ofstream(file) << R"({"schema": "moelab.hardware/1", "kind": "node", "name": "x",
    "accelerator": "h800", "count": 8, "interconnect": "nvlink", "nodes": 2})";
  try {
    Presets().LoadHardware(file.string());
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scale_out"), std::string::npos) << e.what();
  }
  std::ofstream(file) << R"({"schema": "moelab.hardware/1", "kind": "node", "name": "x",
    "accelerator": "h800", "count": 8, "interconnect": "nvlink", "nodes": 2,
    "scale_out": {"kind": "ib", "bandwidth_bytes_per_s": -5, "latency_s": 1e-6}})";
  try {
    Presets().LoadHardware(file.string());
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth_bytes_per_s"), std::string::npos) << e.what();
  }
}

TEST(ExpertGemm, GroupGemmWinsSmallLoadsAndDenseGemmLargeOnes) {
  const model::HardwareSpec node = Presets().LoadHardware("8xh800");
  const auto compute = OneDevice(node);
  ExpertGemmParameters params;
  params.sm_count = node.accelerator->sm_count;
  const ExpertGemmModel gemm(*compute, Presets().LoadModel("deepseek-v2"), params);
  const std::vector<int64_t> small(20, 32), large(20, 8192);
  EXPECT_LT(gemm.GroupSeconds(small, 132), gemm.DenseSeconds(small, 132));
  EXPECT_GT(gemm.GroupSeconds(large, 132), gemm.DenseSeconds(large, 132));
  const std::optional<int64_t> crossover = gemm.CrossoverTokens(20, 132);
  ASSERT_TRUE(crossover.has_value());
  EXPECT_GT(*crossover, 32);
  EXPECT_LT(*crossover, 8192);
  // Fewer SMs never make a GEMM faster.
  EXPECT_GE(gemm.DenseSeconds(large, 116), gemm.DenseSeconds(large, 132));
}

// The GEMM's time is continuous in its rows across the ridge point, with SMs lent to communication
// too: a threshold there once made Mixtral's chunks 12 % cheaper just below it.
TEST(ExpertGemm, TimeIsContinuousAcrossTheRidge) {
  const model::HardwareSpec node = Presets().LoadHardware("8xh800");
  const auto compute = OneDevice(node);
  ExpertGemmParameters params;
  params.sm_count = node.accelerator->sm_count;
  const ExpertGemmModel gemm(*compute, Presets().LoadModel("mixtral-8x7b"), params);
  // Through the knee of H800's roofline (about 260 rows at the assumed efficiencies): one more row
  // never costs less, nor more than its share of the arithmetic and 1 % (the threshold jumped 12
  // %).
  for (const int64_t sms : {int64_t{116}, int64_t{132}}) {
    for (int64_t m = 150; m < 450; ++m) {
      const double dense = gemm.DenseSeconds({m}, sms), next = gemm.DenseSeconds({m + 1}, sms);
      EXPECT_GE(next, dense) << m << " rows, " << sms << " SMs";
      EXPECT_LE(next / dense, (m + 1.0) / m + 0.01) << m << " rows, " << sms << " SMs";
      const double group = gemm.GroupSeconds({m, m}, sms);
      const double group_next = gemm.GroupSeconds({m + 1, m + 1}, sms);
      EXPECT_GE(group_next, group) << m << " rows, " << sms << " SMs";
      EXPECT_LE(group_next / group, (m + 1.0) / m + 0.01) << m << " rows, " << sms << " SMs";
    }
  }
  // Far below the ridge a GEMM reads weights whatever SMs the arithmetic lacks.
  EXPECT_DOUBLE_EQ(gemm.DenseSeconds({16}, 116), gemm.DenseSeconds({16}, 132));
}

// Mixtral-8x7B prefill on 8xH800, EP 8, batch 8 x 2048: one local expert whose 4096 rows the
// chunks split. Splitting the same rows over more chunks never makes the GEMMs cheaper, so no N
// gains by crossing the ridge (before: N = 14-15 "gained" 1.086 where N = 2-13 lost).
TEST(SimEp, SplittingOneExpertsRowsNeverCutsItsGemmTime) {
  EpConfig config = DeepSeekPrefill();
  config.model = Presets().LoadModel("mixtral-8x7b");
  config.tokens = 2048;
  config.max_chunks = 20;
  const EpResult r = Simulate(config);
  ASSERT_EQ(r.active_local_experts, 1);
  ASSERT_EQ(r.sweep.size(), 20u);
  // N chunks compute N x round(4096 / N) rows: per row computed, never cheaper with more chunks.
  const auto per_row = [&](const EpChunkRow& row) {
    const double rows =
        static_cast<double>(row.chunks) * std::round(4096.0 / static_cast<double>(row.chunks));
    return row.expert_compute_s / rows;
  };
  for (size_t i = 2; i < r.sweep.size(); ++i) {
    EXPECT_GE(per_row(r.sweep[i]), per_row(r.sweep[i - 1]) * (1 - 1e-9))
        << "N=" << r.sweep[i].chunks;
  }
  EXPECT_EQ(r.optimum.chunks, 1);
  EXPECT_FALSE(r.gemm_crossover_tokens.has_value());  // nothing for a GroupGemm to fuse
}

// A source whose expert time is a CPU kernel's tiles: 1 ms per 16 tokens begun (the AVX512-BF16
// prefill tile), the rest the roofline's.
class TiledExpertSource : public model::CostSource {
 public:
  explicit TiledExpertSource(const model::CostSource& base) : base_(base) {}
  std::string name() const override { return "tiled-experts"; }
  std::string device() const override { return base_.device(); }
  std::string compute_dtype() const override { return base_.compute_dtype(); }
  model::ForwardCost Forward(const model::MoeModelSpec& model,
                             const model::ForwardShape& shape) const override {
    return base_.Forward(model, shape);
  }
  double ExpertSeconds(const model::MoeModelSpec&, int64_t tokens, double) const override {
    return 1e-3 * static_cast<double>((tokens + 15) / 16);
  }
  double RejectSeconds(const model::MoeModelSpec& target, int64_t batch,
                       int64_t gamma) const override {
    return base_.RejectSeconds(target, batch, gamma);
  }
  model::MemoryFootprint Memory(const model::MoeModelSpec& model, double kv) const override {
    return base_.Memory(model, kv);
  }
  nlohmann::json Describe() const override { return {{"cost_source", name()}}; }

 private:
  const model::CostSource& base_;
};

// Mixtral on 2 ranks priced by another machine's curves (a --profile's: the node's SMs do not
// tile the GEMMs), dense GEMMs without launches: validate --cases ep's setting.
EpConfig TwoRankMixtral(EpWorkload workload, int64_t batch, int64_t tokens) {
  EpConfig config = DeepSeekPrefill();
  config.model = Presets().LoadModel("mixtral-8x7b");
  config.node = Presets().LoadHardware("2xh800");
  config.ep = 2;
  config.workload = workload;
  config.batch = batch;
  config.tokens = tokens;
  config.gemm = GemmChoice::kDense;
  config.kernel_launch_s = 0;
  config.compute_on_node = false;
  return config;
}

// Mixtral prefill of 2 x 96 tokens on 2 ranks: each of a rank's 4 experts gets Binomial(192, 1/4)
// tokens, mean 48. At the mean every expert would cost 3 tiles (12 ms); the spread's quartile
// midpoints (41, 46, 50, 55 tokens) put two of them past 48 into a fourth tile: 14 ms, what the
// executor pays (validate --cases ep measured its experts 25-30 % above 4 x f(48)).
TEST(SimEp, ExpertsArePricedOverTheSpreadOfTheirTokensNotAtTheMean) {
  EpConfig config = TwoRankMixtral(EpWorkload::kPrefill, 2, 96);
  config.chunks = 1;
  const auto roofline = OneDevice(config.node);
  const TiledExpertSource tiled(*roofline);
  const auto links = model::LinkCollectiveCost::ForNode(config.node);
  const EpResult r = SimulateEp(config, tiled, *links);
  ASSERT_EQ(r.active_local_experts, 4);
  ASSERT_EQ(r.tokens_per_expert, 48);
  EXPECT_NEAR(r.no_pipeline.mean_rank_compute_s, 14e-3, 1e-12);
  // Two chunks of two experts each: every expert keeps its tokens, so the same 14 ms in all.
  config.chunks = 2;
  const EpResult two = SimulateEp(config, tiled, *links);
  EXPECT_NEAR(two.chosen.mean_rank_compute_s, 14e-3, 1e-12);
}

// The same prefill: one rank's 4 experts receive 192 rows on average, but the layer waits for the
// busier rank, which receives model::BusiestRankExcessRows more (7.2). Each costs what a row
// costs between the experts' rows and twice them (41, 46, 50, 55 -> 82, 92, 100, 110 tokens:
// 14 -> 26 tiles, 12 ms for 192 rows), whatever the chunks, since a rank may run a chunk ahead and
// only the layer's last combines wait. Without expert parallelism there is no busier rank.
TEST(SimEp, TheBusiestRanksExtraRowsAreWaitedForWhateverTheChunks) {
  EpConfig config = TwoRankMixtral(EpWorkload::kPrefill, 2, 96);
  const auto roofline = OneDevice(config.node);
  const TiledExpertSource tiled(*roofline);
  const auto links = model::LinkCollectiveCost::ForNode(config.node);
  const double excess_rows = model::BusiestRankExcessRows(192, 8, 2, 4, 2);
  ASSERT_NEAR(excess_rows, 7.24, 0.01);
  for (const int64_t chunks : {1, 2, 4}) {
    config.chunks = chunks;
    const EpResult r = SimulateEp(config, tiled, *links);
    EXPECT_NEAR(r.chosen.busiest_excess_s, 12e-3 * excess_rows / 192, 1e-12) << "N=" << chunks;
    EXPECT_NEAR(r.chosen.expert_compute_s, 14e-3 + r.chosen.busiest_excess_s, 1e-12);
  }
  config.ep = 1;  // two replicas of every expert on the 2 devices
  config.chunks = 1;
  EXPECT_EQ(SimulateEp(config, tiled, *links).chosen.busiest_excess_s, 0.0);
}

// The MoE block's row copies at --copy-bandwidth: each of a device's rows (96 tokens x top-2)
// packed and combined once outside the pipeline, and gathered into and scattered out of its
// expert's GEMM inside it, 4096 values of 16 bits a row. Unpriced without a bandwidth when
// another machine computes, and said so.
TEST(SimEp, RowCopiesArePricedAtTheCopyBandwidth) {
  EpConfig config = TwoRankMixtral(EpWorkload::kPrefill, 2, 96);
  config.chunks = 2;
  const auto roofline = OneDevice(config.node);
  const TiledExpertSource tiled(*roofline);
  const auto links = model::LinkCollectiveCost::ForNode(config.node);
  const EpResult unpriced = SimulateEp(config, tiled, *links);
  EXPECT_EQ(unpriced.chosen.pack_combine_s, 0.0);
  EXPECT_EQ(unpriced.chosen.row_gather_scatter_s, 0.0);
  EXPECT_NE(unpriced.row_copies_from.find("not priced"), std::string::npos);
  config.copy_bytes_per_s = 1e10;
  const EpResult r = SimulateEp(config, tiled, *links);
  const double row_s = 4096 * 2 / 1e10;
  EXPECT_NEAR(r.chosen.pack_combine_s, 2 * 96 * 2 * row_s, 1e-15);
  // The spread's 41 + 46 + 50 + 55 = 192 rows, in and out.
  EXPECT_NEAR(r.chosen.row_gather_scatter_s, 2 * 192 * row_s, 1e-15);
  EXPECT_NEAR(r.chosen.expert_compute_s,
              unpriced.chosen.expert_compute_s + r.chosen.row_gather_scatter_s, 1e-12);
  const double moe_layers = static_cast<double>(config.model.num_moe_layers());
  EXPECT_NEAR(
      r.chosen.step_s - unpriced.chosen.step_s,
      moe_layers * (r.chosen.moe_block_s - unpriced.chosen.moe_block_s + r.chosen.pack_combine_s),
      1e-12);
  EXPECT_EQ(r.row_copies_from, "--copy-bandwidth");
  config.copy_bytes_per_s = -1;
  EXPECT_THROW(SimulateEp(config, tiled, *links), base::Error);
}

// A decode of 8 sequences on 2 ranks: each of a rank's 4 experts is active with probability
// P = 1 - (6/8)^8 (16 routings), so a layer often runs 3 of them; the layer waits for the busier
// rank. One chunk calls each active expert once: E[max(a0, a1)] calls, a binomial given a >= 1.
// Four chunks call 4 whatever a is: with fewer active experts the executor splits one's rows over
// two chunks and reads its weights twice. (Priced at the rounded mean, 4 active, both were 4.)
TEST(SimEp, MoreChunksThanActiveExpertsSplitAnExpertAndReadItTwice) {
  EpConfig config = TwoRankMixtral(EpWorkload::kDecode, 8, 32);
  const auto roofline = OneDevice(config.node);
  const TiledExpertSource tiled(*roofline);  // 1 ms an expert call of up to 16 tokens
  const auto links = model::LinkCollectiveCost::ForNode(config.node);
  const double p = 1 - std::pow(6.0 / 8.0, 16.0 / 2.0);
  double at_most[5] = {0, 0, 0, 0, 0}, busier_calls = 0;  // P(a <= n | a >= 1), then E[max]
  for (int n = 1; n <= 4; ++n) {
    for (int a = 1; a <= n; ++a) {
      at_most[n] += std::tgamma(5) / (std::tgamma(a + 1) * std::tgamma(5 - a)) * std::pow(p, a) *
                    std::pow(1 - p, 4 - a) / (1 - std::pow(1 - p, 4));
    }
    busier_calls += n * (std::pow(at_most[n], 2) - std::pow(at_most[n - 1], 2));
  }
  EXPECT_GT(busier_calls, 4 * p / (1 - std::pow(1 - p, 4)));  // above one rank's mean (3.6)
  config.chunks = 1;
  EXPECT_NEAR(SimulateEp(config, tiled, *links).chosen.expert_compute_s, 1e-3 * busier_calls,
              1e-12);
  config.chunks = 4;
  EXPECT_NEAR(SimulateEp(config, tiled, *links).chosen.expert_compute_s, 4e-3, 1e-12);
}

TEST(SimEp, AutoIsNeverSlowerThanNoPipelineAndGainsWhenBothPhasesExist) {
  for (const auto workload : {EpWorkload::kPrefill, EpWorkload::kDecode}) {
    EpConfig config = DeepSeekPrefill();
    config.workload = workload;
    if (workload == EpWorkload::kDecode) config.batch = 256;
    const EpResult r = Simulate(config);
    ASSERT_GT(r.no_pipeline.dispatch_s, 0);
    ASSERT_GT(r.no_pipeline.expert_compute_s, 0);
    EXPECT_LE(r.chosen.step_s, r.no_pipeline.step_s);
    EXPECT_GE(r.gain_vs_no_pipeline(), 1.0);
    EXPECT_DOUBLE_EQ(r.chosen.tokens_per_s,
                     r.tokens_per_step * static_cast<double>(r.replicas) / r.chosen.step_s);
  }
  const EpResult prefill = Simulate(DeepSeekPrefill());
  EXPECT_GT(prefill.gain_vs_no_pipeline(), 1.0);
  EXPECT_GT(prefill.chosen.chunks, 1);
}

TEST(SimEp, WithoutCommunicationTheGainIsOne) {
  EpConfig config = DeepSeekPrefill();
  // One rank holds every expert: a model that fits one H800 (DeepSeek-V2 needs 471 GB).
  config.model = Presets().LoadModel("deepseek-v2-lite");
  config.ep = 1;
  config.batch = 2;
  const EpResult r = Simulate(config);
  EXPECT_EQ(r.no_pipeline.dispatch_s, 0.0);
  EXPECT_EQ(r.chosen.chunks, 1);
  EXPECT_DOUBLE_EQ(r.gain_vs_no_pipeline(), 1.0);
  EXPECT_EQ(r.replicas, 8);
}

TEST(SimEp, TheOptimumIsTheBestOfABruteForceSweep) {
  for (const int64_t tokens : {512, 4096}) {
    EpConfig config = DeepSeekPrefill();
    config.tokens = tokens;
    const EpResult automatic = Simulate(config);
    double best_step = 1e300;
    int64_t best_chunks = 0;
    for (int64_t n = 1; n <= config.max_chunks; ++n) {
      config.chunks = n;
      try {
        const EpResult fixed = Simulate(config);
        EXPECT_EQ(fixed.chosen.chunks, n);
        if (fixed.chosen.step_s < best_step) {
          best_step = fixed.chosen.step_s;
          best_chunks = n;
        }
      } catch (const base::Error&) {
        // not a valid split of this layer's experts: the sweep skips it as well
      }
    }
    EXPECT_EQ(automatic.chosen.chunks, best_chunks) << tokens;
    EXPECT_DOUBLE_EQ(automatic.chosen.step_s, best_step);
  }
}

TEST(SimEp, TheClosedFormUsesTheSimulatorsOwnTerms) {
  const EpResult r = Simulate(DeepSeekPrefill());
  EXPECT_DOUBLE_EQ(r.closed_form.communication_s,
                   r.no_pipeline.dispatch_s + r.no_pipeline.combine_s);
  EXPECT_GT(r.closed_form.overhead_per_chunk_s, 0);
  ASSERT_TRUE(r.closed_form.optimal_chunks.has_value());
  EXPECT_GE(*r.closed_form.optimal_chunks, 1);
}

TEST(SimEp, BadLayoutsAreRefusedByOption) {
  auto message = [](EpConfig config) {
    try {
      Simulate(config);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EpConfig config = DeepSeekPrefill();
  config.ep = 3;  // 160 experts
  EXPECT_NE(message(config).find("--ep 3"), std::string::npos) << message(config);
  config = DeepSeekPrefill();
  config.tp = 2;  // 16 devices on 8
  EXPECT_NE(message(config).find("16 devices"), std::string::npos) << message(config);
  config = DeepSeekPrefill();
  config.chunks = 21;  // 20 local experts
  EXPECT_NE(message(config).find("--ep-chunks 21"), std::string::npos) << message(config);
  config = DeepSeekPrefill();
  config.batch = 4;
  EXPECT_NE(message(config).find("--batch 4"), std::string::npos) << message(config);
  config = DeepSeekPrefill();
  config.tokens = 200000;  // DeepSeek-V2: 163,840 positions
  EXPECT_NE(message(config).find("max_position_embeddings"), std::string::npos) << message(config);
  config = DeepSeekPrefill();
  config.batch = int64_t{1} << 40;  // batch x tokens would overflow int64
  EXPECT_NE(message(config).find("--batch"), std::string::npos) << message(config);
}

}  // namespace
}  // namespace moelab::sim
