// Kernel benchmarks judged against this machine's limits, measured in the same binary:
//   DramRead        read bandwidth of all threads streaming a 1 GiB buffer (bytes_per_second)
//   Bf16Peak        vdpbf16ps throughput of all threads on registers (FLOP/s)
//   Fp32Peak        256-bit fp32 FMA throughput of all threads on registers (FLOP/s): the peak of
//                   the AVX2 / AVX-512F paths, which multiply bf16 weights in fp32
//   Int8Peak        the quantized kernels' integer dot product (vpdpbusd, or AVX2's vpmaddubsw +
//                   vpmaddwd) on registers, all threads (ops/s, 2 per byte multiply-add)
//   ExpertFfn/T/B   the executor's expert FFN (kernels/expert_ffn.h) on T tokens of the default
//                   model's expert shape (hidden 1024, width 3584: 22 MB of bf16 weights) stored in
//                   B bits (16 bf16, 8 q8_0, 4 q4_0), cycling through enough experts to exceed
//                   twice the last-level cache (profiler/profile_grid.h: >= 512 MB, more where the
//                   CPU reports a larger L3) in every format, so weights come from DRAM as in
//                   decode; weight_bytes_per_s counts stored bytes
//   DecodeStep      one decode step of the default model at batch 1 through the executor
//   DecodeByFormat/B/L  the same with the routed experts in B bits (16, 8 q8_0, 4 q4_0) and L
//                   layers (8 default, 16 issue 11's shape)
//   AttentionPrefill/T  the attention core of one layer's causal prefill of T tokens (FLOP/s)
// scripts/bench.sh turns the JSON into the ratios in results/.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/generation.h"
#include "executor/run_workload.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/expert_ffn.h"
#include "kernels/weight_matrix.h"
#include "model/preset_store.h"
#include "profiler/machine_info.h"
#include "profiler/machine_limits.h"
#include "profiler/profile_grid.h"

namespace moelab::bench {
namespace {

kernels::ThreadPool& Pool() {
  static kernels::ThreadPool pool(kernels::DefaultThreadCount());
  return pool;
}

void DramRead(benchmark::State& state) {
  constexpr size_t kBytes = size_t{1} << 30;
  std::unique_ptr<char, decltype(&std::free)> buffer(
      static_cast<char*>(std::aligned_alloc(64, kBytes)), &std::free);
  std::memset(buffer.get(), 1, kBytes);
  kernels::ThreadPool& pool = Pool();
  const int threads = pool.size();
  std::vector<float> sinks(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.Run(threads, [&](int64_t task, int) {
      const size_t chunk = kBytes / static_cast<size_t>(threads);
      sinks[task] = profiler::ReadStream(buffer.get() + static_cast<size_t>(task) * chunk, chunk);
    });
    benchmark::DoNotOptimize(sinks.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
  state.counters["threads"] = threads;
}

// Every pool thread runs loop(4M iterations) on registers; counter "flops".
void PeakBench(benchmark::State& state, float (*loop)(int64_t), double flops_per_iteration) {
  kernels::ThreadPool& pool = Pool();
  const int threads = pool.size();
  constexpr int64_t kIterations = 4'000'000;
  std::vector<float> sinks(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.Run(threads, [&](int64_t task, int) { sinks[task] = loop(kIterations); });
    benchmark::DoNotOptimize(sinks.data());
  }
  state.counters["flops"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * threads * kIterations * flops_per_iteration,
      benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

void Bf16Peak(benchmark::State& state) {
  if (kernels::ActiveIsa() != kernels::Isa::kAvx512Bf16) {
    state.SkipWithError("needs AVX512-BF16");
    return;
  }
  PeakBench(state, profiler::Bf16DotLoop, profiler::kBf16DotLoopFlopsPerIteration);
}

void Fp32Peak(benchmark::State& state) {
  if (kernels::ActiveIsa() == kernels::Isa::kScalar) {
    state.SkipWithError("needs AVX2+FMA");
    return;
  }
  PeakBench(state, profiler::Fp32FmaLoop, profiler::kFp32FmaLoopFlopsPerIteration);
}

// The integer dot product the quantized kernels run (kernels::ActiveQuantizedKernel()): counter
// "flops" holds operations, two per byte multiply-add, as the quantized ExpertFfn's "flops" do.
void Int8Peak(benchmark::State& state) {
  switch (kernels::ActiveQuantizedKernel()) {
    case kernels::QuantizedKernel::kAvx512Vnni:
      PeakBench(state, profiler::Int8DotLoopVnni, profiler::kInt8DotLoopOpsPerIteration);
      break;
    case kernels::QuantizedKernel::kAvx2:
      PeakBench(state, profiler::Int8DotLoopAvx2, profiler::kInt8DotLoopOpsPerIteration);
      break;
    case kernels::QuantizedKernel::kScalar:
      state.SkipWithError("needs AVX2 (the scalar quantized kernel has no vector peak)");
      return;
  }
  state.SetLabel(ToString(kernels::ActiveQuantizedKernel()));
}

constexpr int64_t kHidden = 1024;
constexpr int64_t kWidth = 3584;

// The experts as the executor holds them: gate|up and down in one format (kernels/weight_matrix.h;
// quantized formats quantize the same bf16 values).
struct Expert {
  kernels::WeightMatrix gate_up, down;
  double StoredBytes() const { return gate_up.StoredBytes() + down.StoredBytes(); }
};

const std::vector<Expert>& ExpertWeights(kernels::WeightFormat format) {
  static std::map<kernels::WeightFormat, std::vector<Expert>> cache;
  std::vector<Expert>& experts = cache[format];
  if (!experts.empty()) return experts;
  std::vector<kernels::Bf16> w(static_cast<size_t>(3 * kHidden * kWidth));
  const double expert_bytes =
      static_cast<double>(w.size()) * kernels::StoredBitsPerWeight(format) / 8.0;
  const int64_t count = profiler::CyclingBlocks(
      static_cast<int64_t>(expert_bytes), profiler::EffectiveCacheBytes(profiler::L3CacheBytes()));
  for (int64_t e = 0; e < count; ++e) {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = kernels::FloatToBf16(
          static_cast<float>(static_cast<int>((static_cast<size_t>(e) * w.size() + i) % 17) - 8) *
          0.01f);
    }
    Expert expert{kernels::WeightMatrix(format, 2 * kWidth, kHidden),
                  kernels::WeightMatrix(format, kHidden, kWidth)};
    expert.gate_up.PackRows(0, 2 * kWidth, w.data());
    expert.down.PackRows(0, kHidden, w.data() + 2 * kWidth * kHidden);
    experts.push_back(std::move(expert));
  }
  return experts;
}

// The timed loop: one expert FFN call of `tokens` rows per iteration, on the first `cycled` experts
// in turn; its weight bytes per second as the counter weight_bytes_per_s.
void TimeExpertFfnCalls(benchmark::State& state, const std::vector<Expert>& experts, int64_t cycled,
                        int64_t tokens) {
  std::vector<float> x(static_cast<size_t>(tokens * kHidden), 0.01f), out(x.size());
  kernels::ExpertFfnScratch scratch;
  int64_t expert = 0;
  for (auto _ : state) {
    const Expert& weights = experts[static_cast<size_t>(expert)];
    kernels::ExpertFfn(x.data(), tokens, weights.gate_up, weights.down, out.data(), Pool(),
                       scratch);
    benchmark::DoNotOptimize(out.data());
    expert = (expert + 1) % cycled;
  }
  state.counters["weight_bytes_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * experts[0].StoredBytes(),
                         benchmark::Counter::kIsRate);
}

// Args: tokens, weight bits (16 bf16, 8 q8_0, 4 q4_0).
void ExpertFfnBench(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  const kernels::WeightFormat format =
      kernels::WeightFormatFromBits(static_cast<int>(state.range(1)), "bits");
  const std::vector<Expert>& experts = ExpertWeights(format);
  TimeExpertFfnCalls(state, experts, static_cast<int64_t>(experts.size()), tokens);
  const double iterations = static_cast<double>(state.iterations());
  state.counters["flops"] = benchmark::Counter(
      iterations * kernels::ExpertFfnFlops(tokens, kHidden, kWidth), benchmark::Counter::kIsRate);
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["experts_cycled"] = static_cast<double>(experts.size());
  // Appended piece by piece: " " + a temporary string trips GCC 12's -Wrestrict false positive
  // (GCC bug 105329).
  std::string label = ToString(format) + " " + ToString(kernels::ActiveIsa());
  if (format != kernels::WeightFormat::kBf16) {
    label += ' ';
    label += ToString(kernels::ActiveQuantizedKernel());
  }
  state.SetLabel(label);
}

// Args: tokens, experts cycled (bf16, 22 MB each at 1024 x 3584; at most the experts ExpertWeights
// builds, twice the cache: the working_set_bytes counter says what ran): the same kernel with its
// weights cycled over a working set from well inside the last-level cache to past it. The profile's
// expert_ffn cycles more than twice the cache (every call from DRAM); a model whose weights fit in
// the cache runs its decode from it (results/offload-runtime.md: 2.17 ms against 2.83 ms priced).
void ExpertFfnWorkingSetBench(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  const std::vector<Expert>& all = ExpertWeights(kernels::WeightFormat::kBf16);
  const int64_t cycled = std::min<int64_t>(state.range(1), static_cast<int64_t>(all.size()));
  TimeExpertFfnCalls(state, all, cycled, tokens);
  state.counters["working_set_bytes"] = static_cast<double>(cycled) * all[0].StoredBytes();
  state.counters["llc_bytes"] = static_cast<double>(profiler::L3CacheBytes());
  state.SetLabel(ToString(kernels::ActiveIsa()));
}

// Decode steps at batch 1 on `weights`: a 32-token prompt, then one token per iteration (the KV
// cache kept between 32 and 256 positions so weights dominate); counters weight_bytes_per_token
// and weight_bytes_per_s (stored bytes: quants and scales for quantized experts).
void TimeDecodeSteps(benchmark::State& state, const executor::ModelWeights& weights) {
  const executor::ExecutorConfig& config = weights.config;
  executor::Transformer model(weights, Pool());
  executor::KvCache cache(config, 4096);
  std::vector<float> logits;
  std::vector<executor::SequenceInput> batch = {
      {&cache, executor::SyntheticPrompts(1, 32, config.vocab_size, 1)[0]}};
  model.Forward(batch, {executor::LogitRows::kLastPerSequence, nullptr, nullptr, "prefill"},
                logits);
  int32_t token = 1;
  for (auto _ : state) {
    if (cache.length() >= 256) cache.Truncate(32);
    batch[0].tokens = {token};
    model.Forward(batch, {executor::LogitRows::kLastPerSequence, nullptr, nullptr, "decode"},
                  logits);
    token = static_cast<int32_t>(kernels::ArgMax(logits.data(), config.vocab_size));
  }
  state.counters["weight_bytes_per_token"] = weights.BytesPerToken();
  state.counters["weight_bytes_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * weights.BytesPerToken(),
                         benchmark::Counter::kIsRate);
}

executor::ExecutorConfig DefaultModelConfig() {
  return executor::ExecutorConfigFromSpec(model::PresetStore::Default().LoadModel("mixtral-8x7b"),
                                          model::DefaultTargetShape());
}

void DecodeStep(benchmark::State& state) {
  static const executor::ModelWeights weights =
      executor::MakeSyntheticWeights(DefaultModelConfig(), 1, Pool());
  TimeDecodeSteps(state, weights);
}

// Args: expert bits (16 bf16, 8 q8_0, 4 q4_0), layers (8: the default model; 16: issue 11's
// shape). The default model with its routed experts in that format; weights are built once per
// (bits, layers) and those of other layer counts dropped, so one shape's three formats (3.1 GB
// at 8 layers, 6 GB at 16) are held at a time. scripts/decode-vs-dram.sh runs it interleaved with
// DramRead (the quantized decode's ratio to the DRAM bound, issue 42).
void DecodeByFormat(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const int64_t layers = state.range(1);
  static std::map<std::pair<int, int64_t>, std::unique_ptr<executor::ModelWeights>> built;
  std::erase_if(built, [&](const auto& entry) { return entry.first.second != layers; });
  std::unique_ptr<executor::ModelWeights>& weights = built[{bits, layers}];
  if (!weights) {
    model::ShapeOverrides shape = model::DefaultTargetShape();
    shape.layers = layers;
    executor::ExecutorConfig config = executor::ExecutorConfigFromSpec(
        model::PresetStore::Default().LoadModel("mixtral-8x7b"), shape);
    config.expert_format = kernels::WeightFormatFromBits(bits, "bits");
    weights =
        std::make_unique<executor::ModelWeights>(executor::MakeSyntheticWeights(config, 1, Pool()));
  }
  TimeDecodeSteps(state, *weights);
  std::string label =
      ToString(weights->config.expert_format) + " " + ToString(kernels::ActiveIsa());
  if (bits != 16) {
    label += ' ';
    label += ToString(kernels::ActiveQuantizedKernel());
  }
  state.SetLabel(label);
}

// The attention core of one layer's causal prefill of T tokens (kernels::AttendHeadGroup per
// token and KV head, split over the pool as the Transformer splits it) on the default model's
// attention shape (16 query heads, 4 KV heads, head_dim 64), the KV cache filled: scores, softmax
// and the weighted values, not the projections (those are Matmul). Counter "flops": 2 x head_dim
// per query head and visible position for q . k, the same for the values. Its multiplies and adds
// are separate (no FMA: the same bits on every instruction set), so its ceiling is half of
// Fp32Peak's FLOP/s.
void AttentionPrefill(benchmark::State& state) {
  constexpr int64_t kHeads = 16, kKvHeads = 4, kHeadDim = 64, kGroup = kHeads / kKvHeads;
  const int64_t tokens = state.range(0);
  const int64_t q_width = kHeads * kHeadDim, kv_width = kKvHeads * kHeadDim;
  std::vector<float> q(static_cast<size_t>(tokens * q_width)),
      keys(static_cast<size_t>(tokens * kv_width)), values(keys.size()), out(q.size());
  uint32_t seed = 1;
  const auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  };
  for (float& v : q) v = next();
  for (float& v : keys) v = next();
  for (float& v : values) v = next();
  kernels::ThreadPool& pool = Pool();
  std::vector<std::vector<float>> scores(static_cast<size_t>(pool.size()),
                                         std::vector<float>(static_cast<size_t>(kGroup * tokens)));
  const float scale = 0.125f;
  const int64_t groups_total = tokens * kKvHeads;
  const int64_t work = tokens * (tokens + 1) / 2 * kHeads * kHeadDim;
  const int64_t tasks = std::clamp<int64_t>(work >> 15, 1, groups_total);
  for (auto _ : state) {
    pool.Run(tasks, [&](int64_t task_index, int thread) {
      for (int64_t task = task_index * groups_total / tasks;
           task < (task_index + 1) * groups_total / tasks; ++task) {
        const int64_t t = task / kKvHeads, kv_head = task % kKvHeads;
        kernels::AttendHeadGroup(q.data() + t * q_width + kv_head * kGroup * kHeadDim, kGroup,
                                 keys.data() + kv_head * kHeadDim,
                                 values.data() + kv_head * kHeadDim, kv_width, kHeadDim, 0, t,
                                 scale, scores[static_cast<size_t>(thread)].data(),
                                 out.data() + t * q_width + kv_head * kGroup * kHeadDim);
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flops"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 4.0 * static_cast<double>(work),
                         benchmark::Counter::kIsRate);
  state.counters["tokens"] = static_cast<double>(tokens);
}

BENCHMARK(DramRead)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(Bf16Peak)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Fp32Peak)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Int8Peak)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ExpertFfnBench)
    ->Name("ExpertFfn")
    ->ArgsProduct({{1, 2, 4, 8, 9, 12, 16, 32, 64, 128, 256, 512, 1024}, {16, 8, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);
BENCHMARK(ExpertFfnWorkingSetBench)
    ->Name("ExpertFfnWorkingSet")
    ->ArgsProduct({{1, 4}, {2, 4, 8, 16, 32, 64}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(DecodeStep)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(DecodeByFormat)
    ->ArgsProduct({{16, 8, 4}, {8, 16}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(AttentionPrefill)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace
}  // namespace moelab::bench

// main: bench_main.cc (stamps provenance).
