#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <string>
#include <ctime>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/command.h"
#include "cli/offload_options.h"
#include "cli/options.h"
#include "cli/serving_options.h"
#include "cli/shape_options.h"
#include "executor/serving_engine.h"
#include "server/completion_server.h"

namespace moelab::cli {

namespace {

constexpr const char* kUsage =
    "usage: moelab serve --model M [shape overrides] [--weights FILE] [--expert-bits B] "
    "[--attention-bits B] [--device cpu|gpu] [--seed S] [--host 127.0.0.1] [--port 8000] "
    "[--kv-blocks N] [--kv-block-tokens T] [--max-running N] [--max-batched-tokens T] "
    "[--prefill-chunk T] [--max-waiting N] [--max-sequence-tokens T] [--queue-order "
    "fcfs|priority] [--gamma G [--draft D] [--draft-weights F] [--alpha A] [draft shape]] "
    "[--offload POLICY --expert-memory BYTES [offload options as run]]\n\n"
    "Serves the executor behind OpenAI's completions API (docs/serving.md): GET /v1/models, POST "
    "/v1/completions (prompt a string or a list of token ids, max_tokens, stream), GET /health, "
    "GET /metrics. Continuous batching with chunked prefill and recompute preemption over a paged "
    "KV budget (scheduler/); --gamma: speculative decoding with a fixed gamma per iteration. "
    "Greedy decoding; synthetic weights have no end token, so every "
    "request generates max_tokens. A string prompt is tokenized byte by byte: each UTF-8 byte b is "
    "token b mod vocab; generated ids in [32, 127) are written as that ASCII character, others as "
    "\"<ID>\". Prints \"listening on http://HOST:PORT\" when ready. SIGINT or SIGTERM: new "
    "requests get 503, running ones finish, exit 0; a second signal cancels them.";

struct ServeFlags {
  executor::RunRequest model;
  OffloadFlags offload;
  scheduler::SchedulerConfig scheduler;
  server::ServerOptions server;
};

void AddServeOptions(po::options_description& options, ServeFlags& flags) {
  flags.scheduler.kv_blocks = 1024;  // 16,384 positions of 16-token blocks
  // clang-format off
  options.add_options()
      ("model", Into(&flags.model.model), "model preset or path (shape overrides below apply)")
      ("weights", Into(&flags.model.weights), "Hugging Face safetensors file or folder (default: seeded synthetic weights)")
      ("expert-bits", Into(&flags.model.expert_bits), "routed expert weights: 16 (bf16), 8 (q8_0) or 4 (q4_0)")
      ("attention-bits", Into(&flags.model.attention_bits), "attention q|k|v and o weights: 16, 8 or 4 bits")
      ("seed", Into(&flags.model.seed), "seed of the synthetic weights")
      ("threads", Into(&flags.model.threads), "compute threads (default: MOELAB_THREADS or all cores)")
      ("device", Into(&flags.model.device), "where the forward passes run: cpu or gpu (CUDA builds)")
      ("gpu", Into(&flags.model.gpu_index), "which GPU with --device gpu")
      ("gamma", po::value<int64_t>(), "speculative decoding: draft tokens each decode verifies (default: none)")
      ("draft-weights", Into(&flags.model.draft_weights), "with --gamma: safetensors for the draft (default: seeded synthetic, seed + 1)")
      ("alpha", NumberInto(&flags.model.alpha, "alpha"), "with --gamma: accept each draft by a seeded coin at this rate, [0, 1) (synthetic weights; outputs then differ from greedy); default: greedy acceptance, outputs equal plain greedy serving")
      ("host", Into(&flags.server.host), "address to listen on (loopback by default; 0.0.0.0 for every interface)")
      ("port", Into(&flags.server.port), "TCP port (0: any free port, printed when ready)")
      ("max-body-bytes", Into(&flags.server.max_body_bytes), "request bodies larger than this get HTTP 413")
      ("http-threads", po::value<int>(), "threads answering HTTP requests; a streaming answer holds one (default: --max-running + --max-waiting + 8)")
      ("listen-backlog", Into(&flags.server.listen_backlog), "connections the kernel queues before the server accepts them (default 4096; capped by net.core.somaxconn, said on stderr)")
      ("drain-seconds", Into(&flags.server.drain_s), "on SIGINT/SIGTERM, how long answers still being written may take after the engine stopped");
  // clang-format on
  AddDraftModelOptions(
      options, &flags.model.draft,
      "with --gamma: the draft model preset or path (draft shape overrides below)");
  AddSchedulerOptions(options, flags.scheduler, SchedulerHost::kEngine);
  AddOffloadOptions(options, flags.offload);
  po::options_description shape(
      "shape (defaults: Mixtral-8x7B scaled to 1.6 GB, docs/executor.md)");
  AddShapeOptions(shape, "", model::DefaultTargetShape());
  po::options_description draft_shape("draft shape (with --gamma)");
  AddShapeOptions(draft_shape, "draft-", model::DefaultDraftShape());
  options.add(shape).add(draft_shape);
}

// --gamma G: speculative decoding in serving (scheduler decodes of gamma + 1 positions); the
// draft options without it are refused by name.
void ApplySpeculationFlags(const po::variables_map& values, ServeFlags& flags) {
  if (!values.count("gamma")) {
    // The draft's model, weights, acceptance and shape (--draft-layers, ...): a draft shape given
    // without --gamma started a server with no draft at all.
    for (const auto& [name, value] : values) {
      const bool sd_only = name == "draft" || name.starts_with("draft-") || name == "alpha";
      if (sd_only && !value.defaulted())
        throw base::Error("--" + name + " applies with --gamma G only");
    }
    return;
  }
  flags.model.gamma = values["gamma"].as<int64_t>();
  if (flags.model.gamma < 1 || flags.model.gamma + 1 > scheduler::kMaxDecodeTokensPerStep) {
    throw base::Error("--gamma " + std::to_string(flags.model.gamma) + ": expected 1 to " +
                      std::to_string(scheduler::kMaxDecodeTokensPerStep - 1));
  }
  flags.model.workload = executor::Workload::kSpeculative;
  flags.model.acceptance = values["alpha"].defaulted() ? executor::Acceptance::kGreedy
                                                       : executor::Acceptance::kCoinAlpha;
  flags.model.draft_shape = ShapeFrom(
      values, "draft-",
      flags.model.draft_weights.empty() ? model::DefaultDraftShape() : model::ShapeOverrides{});
  flags.scheduler.decode_tokens_per_step = flags.model.gamma + 1;
}

// The engine's settings as data (GET /v1/models' `moelab`, and the start-up line): the scheduler
// as every serving report prints it, where and on how many threads the passes run, speculative
// decoding and offloading where asked for.
nlohmann::json ServedSettings(const ServeFlags& flags, int threads) {
  nlohmann::json settings = {{"scheduler", flags.scheduler.ToJson()},
                             {"device", flags.model.device},
                             {"threads", threads},
                             {"expert_bits", flags.model.expert_bits},
                             {"attention_bits", flags.model.attention_bits},
                             {"weights", flags.model.weights.empty() ? "synthetic" : "file"},
                             {"seed", flags.model.seed}};
  if (flags.model.device == "gpu") settings["gpu"] = flags.model.gpu_index;
  if (flags.model.workload == executor::Workload::kSpeculative) {
    nlohmann::json speculative = {{"gamma", flags.model.gamma},
                                  {"draft", flags.model.draft},
                                  {"acceptance", executor::ToString(flags.model.acceptance)}};
    if (flags.model.acceptance == executor::Acceptance::kCoinAlpha)
      speculative["alpha"] = flags.model.alpha;
    settings["speculative"] = speculative;
  }
  if (flags.model.offload) {
    const executor::offload::OffloadOptions& offload = *flags.model.offload;
    settings["offload"] = {{"policy", offload.policy},
                           {"expert_memory_bytes", offload.expert_memory_bytes},
                           {"readers", offload.reader_threads},
                           {"reader", executor::offload::ToString(offload.reader)}};
  }
  return settings;
}

// SIGINT/SIGTERM are blocked in every thread (the mask is inherited, so this runs before any
// thread starts) and taken by `Watch` with sigtimedwait.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not a dead server
  return signals;
}

// The first signal shuts the server down gracefully (on its own thread, so a second signal is
// still heard); the second aborts what runs.
void Watch(const sigset_t& signals, const std::atomic<bool>& served, server::CompletionServer& http,
           executor::ServingEngine& engine) {
  std::thread shutdown;
  int received = 0;
  bool engine_failed = false;
  while (!served) {
    const timespec slice{0, 200'000'000};
    const int signal_number = sigtimedwait(&signals, nullptr, &slice);
    if (signal_number < 0) {
      // An engine that failed (a pass threw: its requests got 500) serves nothing more: the
      // server shuts down and exits 1 with the reason, instead of answering every later request
      // "shutting down, retry" for good.
      if (!engine_failed && received == 0 && !engine.Snapshot().failure.empty()) {
        engine_failed = true;
        ++received;
        std::cerr << "moelab serve: the serving engine failed: refusing new requests and "
                     "shutting down\n";
        shutdown =
            std::thread([&http] { http.Shutdown(executor::ServingEngine::StopMode::kAbort); });
      }
      continue;
    }
    if (++received == 1) {
      std::cerr << "moelab serve: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
                << ": refusing new requests, finishing the running ones (again: cancel them)\n";
      shutdown =
          std::thread([&http] { http.Shutdown(executor::ServingEngine::StopMode::kFinish); });
    } else {
      engine.Abort();
    }
  }
  if (shutdown.joinable()) shutdown.join();
}

}  // namespace

int Serve(const std::vector<std::string>& args) {
  ServeFlags flags;
  po::options_description options("moelab serve");
  AddServeOptions(options, flags);
  po::variables_map values;
  if (!ParseOptions(kUsage, options, args, values)) return 0;
  flags.model.shape = ShapeFrom(
      values, "",
      flags.model.weights.empty() ? model::DefaultTargetShape() : model::ShapeOverrides{});
  ApplySpeculationFlags(values, flags);
  if (flags.model.device != "gpu" && values.count("gpu") && !values["gpu"].defaulted())
    throw base::Error("--gpu applies with --device gpu only");
  ApplyOffloadFlags(values, flags.offload, flags.model);
  flags.server.http_threads = values.count("http-threads")
                                  ? values["http-threads"].as<int>()
                                  : static_cast<int>(flags.scheduler.max_running_sequences +
                                                     flags.scheduler.max_waiting_requests + 8);
  flags.scheduler.Validate();
  flags.scheduler.CheckSequenceFitsBudget();
  flags.server.Validate();
  const sigset_t signals = BlockShutdownSignals();
  std::unique_ptr<executor::ServingModel> model =
      executor::BuildServingModel(flags.model, flags.scheduler, model::PresetStore::Default());
  const executor::ExecutorConfig& config = model->model->config();
  if (flags.scheduler.max_sequence_tokens == 0) {
    // The documented default: what the KV budget holds, within the model's positions.
    flags.scheduler.max_sequence_tokens =
        std::min(flags.scheduler.kv_blocks * flags.scheduler.kv_block_tokens, config.max_positions);
  }
  const server::ServedModel served{config.name, config.vocab_size,
                                   flags.scheduler.max_sequence_tokens,
                                   ServedSettings(flags, model->pool->size())};
  executor::ServingEngine engine(std::move(model), flags.scheduler);
  server::CompletionServer http(engine, served, flags.server);
  const int port = http.Bind();
  if (http.EffectiveListenBacklog() < flags.server.listen_backlog) {
    std::cerr << "moelab serve: --listen-backlog " << flags.server.listen_backlog
              << " is capped by net.core.somaxconn at " << http.EffectiveListenBacklog()
              << std::endl;
  }
  engine.Start();
  std::atomic<bool> served_all{false};
  std::thread watcher([&] { Watch(signals, served_all, http, engine); });
  // The settings behind every number the server will produce, as sim serve's reports print them
  // (stderr: stdout's first line is the "listening on" line clients wait for).
  std::cerr << "moelab serve: " << served.name << ", settings " << served.settings.dump()
            << std::endl;
  std::cout << "listening on http://" << flags.server.host << ":" << port << std::endl;
  http.Serve();
  served_all = true;
  watcher.join();
  engine.Stop(executor::ServingEngine::StopMode::kAbort);
  const executor::EngineSnapshot last = engine.Snapshot();
  if (!last.failure.empty()) throw base::Error("serving engine failed: " + last.failure);
  return 0;
}

}  // namespace moelab::cli
