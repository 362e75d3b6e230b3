// The serving engine: scheduler-driven iterations (mixed prefill chunks and decodes, preemption by
// recompute) give every request exactly the tokens plain greedy decoding of its prompt gives; the
// threaded engine streams them, cancels, and refuses what the scheduler refuses.
#include "executor/serving_engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "executor/serving_replay.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::executor {
namespace {

TokenIds Greedy(ForwardModel& model, const TokenIds& prompt, int64_t tokens) {
  DecodeOptions options;
  options.output_tokens = tokens;
  return RunDecode(model, {prompt}, options).outputs.at(0);
}

scheduler::SchedulerConfig SmallScheduler(int64_t kv_blocks) {
  scheduler::SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = kv_blocks;
  config.max_running_sequences = 4;
  config.max_batched_tokens = 9;  // prompts of 6-13 tokens are cut into chunks beside decodes
  config.prefill_chunk_tokens = 5;
  config.max_sequence_tokens = 64;
  return config;
}

// Requests of varied lengths arriving over the first iterations.
std::vector<ReplayArrival> Arrivals(int64_t vocab, int64_t count, int64_t max_tokens) {
  std::vector<ReplayArrival> arrivals;
  for (int64_t i = 0; i < count; ++i) {
    ReplayArrival a;
    a.request.id = 100 + i;
    a.request.prompt = SyntheticPrompts(1, 6 + (i * 5) % 8, vocab, 40 + i)[0];
    a.request.max_tokens = max_tokens - i % 3;
    a.request.arrival_s = static_cast<double>(i);
    a.submit_before_iteration = i % 3 == 0 ? 0 : i;
    arrivals.push_back(a);
  }
  return arrivals;
}

struct TinyServing {
  explicit TinyServing(executor::ExecutorConfig config)
      : pool(2), weights(MakeSyntheticWeights(config, 17, pool)), model(weights, pool) {}
  kernels::ThreadPool pool;
  ModelWeights weights;
  Transformer model;
};

void ExpectGreedyTokens(TinyServing& s, const std::vector<ReplayArrival>& arrivals,
                        const ReplayResult& replay) {
  ASSERT_TRUE(replay.refusals.empty());
  for (const ReplayArrival& a : arrivals) {
    const TokenIds expected = Greedy(s.model, a.request.prompt, a.request.max_tokens);
    EXPECT_EQ(replay.tokens.at(a.request.id), expected) << "request " << a.request.id;
  }
}

TEST(ServingEngine, ChunkedMixedBatchesGiveGreedyDecodingsTokens) {
  TinyServing s(testing::TinyMixtral(41));
  const auto arrivals = Arrivals(41, 6, 12);
  const ReplayResult replay = ReplayByIteration(s.model, SmallScheduler(200), arrivals);
  ExpectGreedyTokens(s, arrivals, replay);
  // Chunked prefills ran beside decodes: some iteration mixes them.
  bool mixed = false;
  for (const scheduler::IterationPlan& plan : replay.plans) {
    bool prefill = false, decode = false;
    for (const scheduler::BatchEntry& e : plan.batch) (e.prefill ? prefill : decode) = true;
    mixed = mixed || (prefill && decode);
    EXPECT_LE(plan.batched_tokens(), 9);
  }
  EXPECT_TRUE(mixed);
}

TEST(ServingEngine, PreemptedRequestsKeepTheirTokensBitForBit) {
  // bf16 with shared experts and a dense first layer; block-quantized experts and attention.
  ExecutorConfig quantized = testing::TinyMixtral(41);
  quantized.name = "tiny-mixtral-q4_0-experts-q8_0-attention";
  quantized.expert_format = kernels::WeightFormat::kQ4_0;
  quantized.attention_format = kernels::WeightFormat::kQ8_0;
  for (const ExecutorConfig& config : {testing::TinyQwenMoe(41), quantized}) {
    TinyServing s(config);
    // 12 blocks of 4 tokens hold about two of these sequences: the others are preempted and
    // recomputed as the running ones grow.
    const auto arrivals = Arrivals(41, 5, 18);
    const ReplayResult replay = ReplayByIteration(s.model, SmallScheduler(12), arrivals);
    int64_t preemptions = 0;
    for (const scheduler::IterationPlan& plan : replay.plans) {
      preemptions += static_cast<int64_t>(plan.preempted.size());
      EXPECT_LE(plan.kv_blocks_used, 12);
    }
    EXPECT_GT(preemptions, 0) << config.name << ": the budget should force preemptions";
    ExpectGreedyTokens(s, arrivals, replay);
  }
}

TEST(ServingEngine, RefusesWhatItCannotRun) {
  TinyServing s(testing::TinyMixtral(41));  // max_positions 128
  scheduler::SchedulerConfig config = SmallScheduler(100);
  config.max_sequence_tokens = 200;
  EXPECT_NE(testing::ErrorOf([&] { ServingCore core(s.model, config); }).find("max_positions 128"),
            std::string::npos);
  config = SmallScheduler(100);
  config.decode_tokens_per_step = 2;  // 4 running x 2 within the 9-token budget
  EXPECT_NE(testing::ErrorOf([&] { ServingCore core(s.model, config); }).find("speculative"),
            std::string::npos);
  ServingCore core(s.model, SmallScheduler(100));
  EXPECT_NE(testing::ErrorOf([&] {
              core.Submit({1, {5, 41}, 3});
            }).find("prompt: token id 41"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              core.Submit({2, {5}, 0});
            }).find("max_tokens"),
            std::string::npos);
  ServingRequest too_long{3, TokenIds(60, 1), 10};
  EXPECT_EQ(core.Submit(too_long).refusal, scheduler::Refusal::kTooLong);
}

// All events of a stream up to its end.
std::vector<StreamEvent> Drain(RequestStream& stream) {
  std::vector<StreamEvent> events;
  while (events.empty() || !events.back().end()) {
    if (auto e = stream.Next(std::chrono::milliseconds(60000)))
      events.push_back(*e);
    else
      ADD_FAILURE() << "no event in 60 s";
  }
  return events;
}

TEST(ServingEngine, ThreadedEngineStreamsCancelsAndRefuses) {
  const ExecutorConfig config = testing::TinyMixtral(41);
  kernels::ThreadPool reference_pool(1);
  const ModelWeights reference_weights = MakeSyntheticWeights(config, 17, reference_pool);
  Transformer reference(reference_weights, reference_pool);
  scheduler::SchedulerConfig scheduler = SmallScheduler(200);
  scheduler.max_waiting_requests = 8;
  ServingEngine engine(MakeCpuServingModel(MakeSyntheticWeights(config, 17, reference_pool), 2),
                       scheduler);
  const auto prompts = SyntheticPrompts(3, 7, 41, 5);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const TokenIds& prompt : prompts) streams.push_back(engine.Submit(prompt, 10));
  const auto cancelled = engine.Submit(prompts[0], 50);
  const auto too_long = engine.Submit(TokenIds(60, 3), 10);
  engine.Cancel(cancelled->id());
  // Started after the cancel, so the engine takes both in one round (submissions first) whatever
  // a stall of this thread: a cancel sent after Start could land after the request's 50 tokens.
  // Cancelling a request mid-stream: serve_cli_test's disconnects, with seconds to spare.
  engine.Start();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<StreamEvent> events = Drain(*streams[i]);
    ASSERT_EQ(events.back().kind, StreamEvent::Kind::kFinished);
    TokenIds tokens;
    for (size_t e = 0; e + 1 < events.size(); ++e) tokens.push_back(events[e].token);
    EXPECT_EQ(tokens, Greedy(reference, prompts[i], 10)) << "request " << i;
  }
  EXPECT_EQ(Drain(*cancelled).back().kind, StreamEvent::Kind::kCancelled);
  const StreamEvent refused = Drain(*too_long).back();
  EXPECT_EQ(refused.kind, StreamEvent::Kind::kRefused);
  EXPECT_EQ(refused.refusal, scheduler::Refusal::kTooLong);
  engine.Stop(ServingEngine::StopMode::kFinish);
  const EngineSnapshot last = engine.Snapshot();
  EXPECT_EQ(last.state.running, 0);
  EXPECT_EQ(last.state.kv_blocks_used, 0);
  EXPECT_FALSE(last.running);
  EXPECT_EQ(Drain(*engine.Submit(prompts[0], 2)).back().kind, StreamEvent::Kind::kRefused);
}

// A client that saw its request end finds that request's last iteration in the snapshot (what
// /metrics prints): the snapshot is published before the streams hear of the iteration.
TEST(ServingEngine, SnapshotHoldsAnIterationBeforeItsStreamsHearOfIt) {
  const ExecutorConfig config = testing::TinyMixtral(41);
  kernels::ThreadPool pool(1);
  ServingEngine engine(MakeCpuServingModel(MakeSyntheticWeights(config, 17, pool), 2),
                       SmallScheduler(200));
  engine.Start();
  const TokenIds prompt = SyntheticPrompts(1, 7, 41, 5)[0];
  int64_t iterations_before = 0;
  for (int round = 0; round < 100; ++round) {
    ASSERT_EQ(Drain(*engine.Submit(prompt, 4)).back().kind, StreamEvent::Kind::kFinished);
    const EngineSnapshot seen = engine.Snapshot();
    EXPECT_EQ(seen.state.running, 0) << "round " << round;
    EXPECT_EQ(seen.state.kv_blocks_used, 0) << "round " << round;
    // 7 prompt tokens in chunks of 5 and 2 (the second emits the first token), then 3 decodes.
    EXPECT_EQ(seen.iterations - iterations_before, 5) << "round " << round;
    iterations_before = seen.iterations;
  }
  engine.Stop(ServingEngine::StopMode::kFinish);
}

// The recording holds exactly what ran while it was on: every iteration's plan in order and
// within its span, each request submitted meanwhile with one emit time per streamed token, its
// first token no earlier than its arrival; a request submitted before it started is not in it.
TEST(ServingEngine, RecordsIterationsAndRequestsWhileRecording) {
  const ExecutorConfig config = testing::TinyMixtral(41);
  kernels::ThreadPool pool(1);
  ServingEngine engine(MakeCpuServingModel(MakeSyntheticWeights(config, 17, pool), 2),
                       SmallScheduler(200));
  engine.Start();
  const auto prompts = SyntheticPrompts(3, 7, 41, 5);
  EXPECT_TRUE(engine.StopRecording().iterations.empty());  // none started
  Drain(*engine.Submit(prompts[0], 4));                    // before the recording
  engine.StartRecording();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const TokenIds& prompt : prompts) streams.push_back(engine.Submit(prompt, 6));
  std::vector<size_t> streamed;
  for (const auto& stream : streams) streamed.push_back(Drain(*stream).size() - 1);
  const EngineRecording recording = engine.StopRecording();
  engine.Stop(ServingEngine::StopMode::kFinish);

  ASSERT_EQ(recording.requests.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const EngineRecording::Request& request = recording.requests[i];
    EXPECT_EQ(request.id, streams[i]->id());
    EXPECT_EQ(request.prompt_tokens, 7);
    EXPECT_TRUE(request.finished);
    ASSERT_EQ(request.token_times_s.size(), streamed[i]);
    EXPECT_GE(request.token_times_s.front(), request.arrival_s);
    EXPECT_TRUE(std::is_sorted(request.token_times_s.begin(), request.token_times_s.end()));
  }
  ASSERT_FALSE(recording.iterations.empty());
  int64_t emitted = 0, previous_end_iteration = -1;
  double previous_end_s = 0;
  for (const EngineRecording::Iteration& iteration : recording.iterations) {
    EXPECT_LE(iteration.start_s, iteration.end_s);
    EXPECT_GE(iteration.start_s, previous_end_s);
    EXPECT_GT(iteration.plan.iteration, previous_end_iteration);
    previous_end_s = iteration.end_s;
    previous_end_iteration = iteration.plan.iteration;
    for (const scheduler::BatchEntry& entry : iteration.plan.batch)
      emitted += (!entry.prefill || entry.emits_token) ? 1 : 0;
  }
  EXPECT_EQ(emitted, 3 * 6);  // one token per decode and per prefill-ending chunk
  EXPECT_TRUE(engine.StopRecording().requests.empty());  // a stopped recording is gone
}

}  // namespace
}  // namespace moelab::executor
