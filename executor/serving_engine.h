#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "executor/serving_core.h"
#include "executor/serving_model.h"

namespace moelab::executor {

using ServingClock = std::chrono::steady_clock;

// What happens to a request, in order: its tokens, then exactly one end (finished, refused,
// cancelled or failed).
struct StreamEvent {
  enum class Kind { kToken, kFinished, kRefused, kCancelled, kFailed };
  Kind kind = Kind::kToken;
  int32_t token = 0;                                       // kToken
  ServingClock::time_point at;                             // when the engine emitted it
  scheduler::Refusal refusal = scheduler::Refusal::kNone;  // kRefused
  std::string message;                                     // kRefused, kCancelled, kFailed: why
  bool end() const { return kind != Kind::kToken; }
};

// One request's events from the engine thread to the thread serving its client (a mutex and a
// condition variable: the waiting thread sleeps).
class RequestStream {
 public:
  explicit RequestStream(int64_t id) : id_(id) {}
  int64_t id() const { return id_; }
  // The next event, waiting at most `timeout`; nullopt when none came in time.
  std::optional<StreamEvent> Next(std::chrono::milliseconds timeout);
  void Push(StreamEvent event);

 private:
  const int64_t id_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
};

// The scheduler's counters as of the last iteration, for /metrics and /health.
// The offload runtime's counters since the engine started (moelab serve --offload), for
// /metrics: how often the experts were where the policy wanted them, and what the storage tier
// delivered (its bytes over its busy seconds is the bandwidth the served reads got).
struct OffloadCounters {
  int64_t activations = 0, hits = 0, demand_fetches = 0, prefetches = 0, reads = 0;
  double storage_read_bytes = 0;
  double stall_s = 0;         // computation waiting for reads
  double storage_busy_s = 0;  // at least one read in flight (copy_busy_s)
  double copied_bytes = 0;    // the finished copies' blocks, the initial placement's included
};

struct EngineSnapshot {
  scheduler::SchedulerState state;
  std::optional<OffloadCounters> offload;  // with an offloading model
  int64_t iterations = 0;
  bool running = false;  // the engine thread is up and has not stopped
  std::string failure;   // why the engine thread stopped on an error (empty: it did not)
};

// What the engine did while recording (ServingEngine::StartRecording): every iteration's plan and
// wall-clock span, and every request submitted meanwhile with the engine-side times of its
// tokens. Seconds on the engine's clock (since its construction). validate --cases serving
// compares it with the client's view (what HTTP and the load generator add) and with the
// simulator's price of each plan (what the composition misses on served batches).
struct EngineRecording {
  struct Iteration {
    double start_s = 0, end_s = 0;
    scheduler::IterationPlan plan;
  };
  struct Request {
    int64_t id = 0;
    double arrival_s = 0;  // when Submit queued it
    int64_t prompt_tokens = 0;
    std::vector<double> token_times_s;  // when the engine emitted each token
    bool finished = false;              // its last token emitted while recording
  };
  std::vector<Iteration> iterations;
  std::vector<Request> requests;  // in submission order
};

// The serving engine: a ServingCore run by one engine thread, fed by any number of client threads.
// Submit queues a request and returns its stream; the engine thread admits it before its next
// iteration (a refusal arrives on the stream), runs iterations while anything waits or runs, and
// sleeps on a condition variable when idle. Cancel (a client gone) drops the request and frees its
// KV cache before the next iteration.
class ServingEngine {
 public:
  // Validates the configuration (ServingCore's refusals) before any thread starts.
  ServingEngine(std::unique_ptr<ServingModel> model, scheduler::SchedulerConfig config);
  ~ServingEngine();  // Stop(kAbort) if still running
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  // Starts the engine thread, which first reserves a pass of max_batched_tokens (so the first
  // requests do not pay the scratch allocations).
  void Start();

  // Queues a request (ids are the engine's: 0, 1, ...); after Stop, the stream's only event is
  // a refusal saying the server is shutting down. Token ids are checked on the engine thread
  // (a kFailed event names the field).
  std::shared_ptr<RequestStream> Submit(TokenIds prompt, int64_t max_tokens, int64_t priority = 0);
  void Cancel(int64_t request_id);

  enum class StopMode { kFinish, kAbort };
  // Refuses new requests; kFinish runs what was submitted to its end, kAbort cancels it; joins the
  // engine thread. Idempotent.
  void Stop(StopMode mode);
  // Switches a Stop(kFinish) in progress (on another thread) to aborting.
  void Abort();

  EngineSnapshot Snapshot() const;
  // Records from now on (EngineRecording); a recording in progress starts over.
  void StartRecording();
  // Ends the recording and returns it (empty when none was started).
  EngineRecording StopRecording();
  const ExecutorConfig& model_config() const { return model_->model->config(); }
  const scheduler::SchedulerConfig& scheduler_config() const { return config_; }
  int64_t max_sequence_tokens() const { return max_sequence_tokens_; }

 private:
  struct Pending {
    ServingRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  void Loop();
  // Takes what client threads queued; false when the loop should end.
  bool TakeWork(ServingCore& core);
  void Publish(const IterationOutcome& outcome, ServingCore& core,
               ServingClock::time_point step_start);
  void Record(const IterationOutcome& outcome, ServingClock::time_point step_start,
              ServingClock::time_point step_end);
  double SecondsSinceStart(ServingClock::time_point at) const;
  void EndAll(StreamEvent::Kind kind, const std::string& message);

  std::unique_ptr<ServingModel> model_;
  const scheduler::SchedulerConfig config_;
  int64_t max_sequence_tokens_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::vector<Pending> inbox_;                // guarded by mutex_
  std::vector<int64_t> cancels_;              // guarded by mutex_
  bool accepting_ = true;                     // guarded by mutex_
  bool stopping_ = false, aborting_ = false;  // guarded by mutex_
  bool busy_ = false;        // guarded by mutex_: the core has work (the loop must not sleep)
  int64_t next_id_ = 0;      // guarded by mutex_
  EngineSnapshot snapshot_;  // guarded by mutex_
  // guarded by mutex_: the recording, and each recorded request's index in it by engine id
  std::optional<EngineRecording> recording_;
  std::map<int64_t, size_t> recorded_request_index_;
  // Engine thread only: the streams of requests the core holds.
  std::map<int64_t, std::shared_ptr<RequestStream>> streams_;
  const ServingClock::time_point start_ = ServingClock::now();
};

}  // namespace moelab::executor
