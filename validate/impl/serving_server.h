#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "executor/serving_engine.h"
#include "model/preset_store.h"
#include "scheduler/scheduler_config.h"
#include "server/completion_server.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"

namespace moelab::validate::impl {

// The model `moelab serve` would serve, built once for all of validate --cases serving's runs: one
// CompletionServer on a free loopback port for every measured run, and RunDecode on the same
// ForwardModel between runs (while the engine idles: nothing else uses the model then).
class ServedModelUnderTest {
 public:
  ServedModelUnderTest(const executor::RunRequest& run, const scheduler::SchedulerConfig& config,
                       const model::PresetStore& presets);
  ~ServedModelUnderTest();  // stops the server (finishing what runs) and the engine

  // Moves the model into the engine, binds the server and starts serving.
  void Start(int64_t http_threads);

  // `requests` through loadgen::RunLoad against the server (open loop, each sent at its arrival);
  // with `recording`, what the engine recorded meanwhile (until the last request left it).
  std::vector<serving::RequestOutcome> Serve(const std::vector<serving::RequestSpec>& requests,
                                             int64_t* late_sends, uint64_t seed,
                                             executor::EngineRecording* recording = nullptr);
  // `moelab run`'s decode on the same model: `batch` seeded prompts of `prompt_tokens`, output
  // `output_tokens`; decode tokens/s over the decode steps. Only between Serve calls.
  double RunDecodeTokensPerS(int64_t batch, int64_t prompt_tokens, int64_t output_tokens,
                             uint64_t seed);

  int64_t vocab() const { return vocab_; }
  // The scheduler settings served (max_sequence_tokens resolved as moelab serve does).
  const scheduler::SchedulerConfig& config() const { return config_; }

 private:
  void WaitIdle() const;

  scheduler::SchedulerConfig config_;
  std::unique_ptr<executor::ServingModel> model_;  // until Start
  executor::ForwardModel* forward_ = nullptr;      // the engine's after Start
  int64_t vocab_ = 0;
  std::unique_ptr<executor::ServingEngine> engine_;
  std::unique_ptr<server::CompletionServer> http_;
  std::thread serve_thread_;
  int port_ = 0;
};

}  // namespace moelab::validate::impl
