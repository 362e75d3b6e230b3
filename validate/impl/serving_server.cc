#include "validate/impl/serving_server.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "executor/generation.h"
#include "executor/serving_model.h"
#include "loadgen/load_generator.h"

namespace moelab::validate::impl {

ServedModelUnderTest::ServedModelUnderTest(const executor::RunRequest& run,
                                           const scheduler::SchedulerConfig& config,
                                           const model::PresetStore& presets)
    : config_(config), model_(executor::BuildServingModel(run, config, presets)) {
  forward_ = model_->model.get();
  vocab_ = forward_->config().vocab_size;
  if (config_.max_sequence_tokens == 0) {  // moelab serve's default: what the KV budget holds
    config_.max_sequence_tokens =
        std::min(config_.kv_blocks * config_.kv_block_tokens, forward_->config().max_positions);
  }
}

ServedModelUnderTest::~ServedModelUnderTest() {
  if (http_) http_->Shutdown(executor::ServingEngine::StopMode::kFinish);
  if (serve_thread_.joinable()) serve_thread_.join();
  http_.reset();
  if (engine_) engine_->Stop(executor::ServingEngine::StopMode::kAbort);
}

void ServedModelUnderTest::Start(int64_t http_threads) {
  const executor::ExecutorConfig& config = forward_->config();
  const server::ServedModel served{config.name,
                                   config.vocab_size,
                                   config_.max_sequence_tokens,
                                   {{"scheduler", config_.ToJson()}}};
  engine_ = std::make_unique<executor::ServingEngine>(std::move(model_), config_);
  server::ServerOptions options;
  options.port = 0;
  options.http_threads = static_cast<int>(http_threads);
  http_ = std::make_unique<server::CompletionServer>(*engine_, served, options);
  port_ = http_->Bind();
  engine_->Start();
  serve_thread_ = std::thread([this] { http_->Serve(); });
}

void ServedModelUnderTest::WaitIdle() const {
  // The last token reaches the client just before the engine records the request finished.
  for (int i = 0; i < 2000; ++i) {
    const executor::EngineSnapshot snapshot = engine_->Snapshot();
    if (snapshot.state.running == 0 && snapshot.state.waiting == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw base::Error(
      "validate --cases serving: the engine still runs requests 10 s after the "
      "load ended");
}

std::vector<serving::RequestOutcome> ServedModelUnderTest::Serve(
    const std::vector<serving::RequestSpec>& requests, int64_t* late_sends, uint64_t seed,
    executor::EngineRecording* recording) {
  if (!engine_) throw base::Error("internal: Serve before Start");
  if (recording) engine_->StartRecording();
  loadgen::LoadgenOptions options;
  options.completion.url = loadgen::ParseServerUrl("http://127.0.0.1:" + std::to_string(port_));
  options.completion.vocab = vocab_;
  options.completion.seed = seed;
  options.concurrency_max =
      std::min<int64_t>(loadgen::kMaxConcurrency, static_cast<int64_t>(requests.size()));
  loadgen::LoadgenResult result = loadgen::RunLoad(options, requests);
  if (late_sends) *late_sends = result.late_sends;
  WaitIdle();
  if (recording) *recording = engine_->StopRecording();
  return std::move(result.outcomes);
}

double ServedModelUnderTest::RunDecodeTokensPerS(int64_t batch, int64_t prompt_tokens,
                                                 int64_t output_tokens, uint64_t seed) {
  if (engine_) WaitIdle();
  executor::DecodeOptions options;
  options.output_tokens = output_tokens;
  options.seed = seed;
  const executor::DecodeResult result = executor::RunDecode(
      *forward_, executor::SyntheticPrompts(batch, prompt_tokens, vocab_, seed), options);
  if (!(result.decode_s > 0)) throw base::Error("serving overhead: the decode took no time");
  return static_cast<double>(batch * (output_tokens - 1)) / result.decode_s;
}

}  // namespace moelab::validate::impl
