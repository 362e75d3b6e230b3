#include "executor/serving_engine.h"

#include <exception>
#include <utility>

#include "base/error.h"

namespace moelab::executor {

std::optional<StreamEvent> RequestStream::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

void RequestStream::Push(StreamEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

namespace {

StreamEvent EndEvent(StreamEvent::Kind kind, std::string message) {
  StreamEvent event;
  event.kind = kind;
  event.at = ServingClock::now();
  event.message = std::move(message);
  return event;
}

}  // namespace

ServingEngine::ServingEngine(std::unique_ptr<ServingModel> model, scheduler::SchedulerConfig config)
    : model_(std::move(model)), config_(std::move(config)) {
  // The core's refusals (settings the engine cannot run) surface here, before any thread.
  const ServingCore probe(*model_->model, config_, model_->speculation);
  max_sequence_tokens_ = probe.max_sequence_tokens();
  snapshot_.state = probe.State();
}

ServingEngine::~ServingEngine() { Stop(StopMode::kAbort); }

void ServingEngine::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable() || stopping_) throw base::Error("serving engine started twice");
  snapshot_.running = true;
  thread_ = std::thread([this] { Loop(); });
}

std::shared_ptr<RequestStream> ServingEngine::Submit(TokenIds prompt, int64_t max_tokens,
                                                     int64_t priority) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto stream = std::make_shared<RequestStream>(next_id_);
  if (!accepting_) {
    StreamEvent refused = EndEvent(StreamEvent::Kind::kRefused, "the server is shutting down");
    refused.refusal = scheduler::Refusal::kQueueFull;
    stream->Push(std::move(refused));
    return stream;
  }
  ServingRequest request;
  request.id = next_id_++;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.priority = priority;
  request.arrival_s = SecondsSinceStart(ServingClock::now());
  if (recording_) {
    recorded_request_index_[request.id] = recording_->requests.size();
    recording_->requests.push_back(
        {request.id, request.arrival_s, static_cast<int64_t>(request.prompt.size()), {}, false});
  }
  inbox_.push_back({std::move(request), stream});
  work_.notify_one();
  return stream;
}

void ServingEngine::Cancel(int64_t request_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancels_.push_back(request_id);
  work_.notify_one();
}

void ServingEngine::Abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  accepting_ = false;
  stopping_ = aborting_ = true;
  work_.notify_one();
}

void ServingEngine::Stop(StopMode mode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
    stopping_ = true;
    if (mode == StopMode::kAbort) aborting_ = true;
    work_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

EngineSnapshot ServingEngine::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

double ServingEngine::SecondsSinceStart(ServingClock::time_point at) const {
  return std::chrono::duration<double>(at - start_).count();
}

void ServingEngine::StartRecording() {
  std::lock_guard<std::mutex> lock(mutex_);
  recording_.emplace();
  recorded_request_index_.clear();
}

// Before the streams hear of the iteration: a client that saw its request end and then started a
// recording must not find that iteration in it.
void ServingEngine::Record(const IterationOutcome& outcome, ServingClock::time_point step_start,
                           ServingClock::time_point step_end) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!recording_) return;
  const double end_s = SecondsSinceStart(step_end);
  recording_->iterations.push_back({SecondsSinceStart(step_start), end_s, outcome.plan});
  for (const EmittedToken& emitted : outcome.emitted) {
    const auto index = recorded_request_index_.find(emitted.request_id);
    if (index != recorded_request_index_.end())
      recording_->requests[index->second].token_times_s.push_back(end_s);
  }
  for (int64_t id : outcome.finished) {
    const auto index = recorded_request_index_.find(id);
    if (index != recorded_request_index_.end()) recording_->requests[index->second].finished = true;
  }
}

EngineRecording ServingEngine::StopRecording() {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineRecording recording = recording_ ? std::move(*recording_) : EngineRecording{};
  recording_.reset();
  recorded_request_index_.clear();
  return recording;
}

bool ServingEngine::TakeWork(ServingCore& core) {
  std::vector<Pending> inbox;
  std::vector<int64_t> cancels;
  bool aborting = false, stopping = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    work_.wait(lock, [&] { return busy_ || stopping_ || !inbox_.empty() || !cancels_.empty(); });
    inbox.swap(inbox_);
    cancels.swap(cancels_);
    aborting = aborting_;
    stopping = stopping_;
  }
  // Submissions first: a Cancel may name a request queued in the same round.
  for (Pending& pending : inbox) {
    scheduler::AdmitResult admit;
    try {
      admit = core.Submit(pending.request);
    } catch (const base::Error& error) {
      pending.stream->Push(EndEvent(StreamEvent::Kind::kFailed, error.what()));
      continue;
    }
    if (admit.refusal != scheduler::Refusal::kNone) {
      StreamEvent refused = EndEvent(StreamEvent::Kind::kRefused, admit.message);
      refused.refusal = admit.refusal;
      pending.stream->Push(std::move(refused));
      continue;
    }
    streams_.emplace(pending.request.id, pending.stream);
  }
  for (int64_t id : cancels) {
    const auto stream = streams_.find(id);
    if (stream == streams_.end()) continue;  // already ended
    core.Cancel(id);
    stream->second->Push(EndEvent(StreamEvent::Kind::kCancelled, "cancelled by the client"));
    streams_.erase(stream);
  }
  if (aborting) {
    for (const auto& [id, stream] : streams_) core.Cancel(id);
    EndAll(StreamEvent::Kind::kCancelled, "the server is shutting down");
    return false;
  }
  return !(stopping && core.Idle());
}

void ServingEngine::EndAll(StreamEvent::Kind kind, const std::string& message) {
  for (const auto& [id, stream] : streams_) stream->Push(EndEvent(kind, message));
  streams_.clear();
}

// The snapshot before the streams: a client that saw its request end and then read /metrics must
// find that iteration's counters there.
void ServingEngine::Publish(const IterationOutcome& outcome, ServingCore& core,
                            ServingClock::time_point step_start) {
  Record(outcome, step_start, ServingClock::now());
  std::optional<OffloadCounters> offload;
  if (model_->offload_runtime) {
    const offload::OffloadStats stats = model_->offload_runtime->Stats();
    offload.emplace();
    offload->activations = stats.activations;
    offload->hits = stats.hits + stats.inflight_hits;
    offload->demand_fetches = stats.demand_fetches + stats.transient_fetches;
    offload->prefetches = stats.prefetches;
    offload->reads = stats.reads;
    offload->storage_read_bytes = stats.bytes_read_storage;
    offload->stall_s = stats.stall_s;
    offload->storage_busy_s = stats.copy_busy_s.value_or(0);
    offload->copied_bytes = static_cast<double>(stats.copies_done) * stats.copy_block_bytes;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot_.state = core.State();
    snapshot_.offload = offload;
    ++snapshot_.iterations;
    // An empty batch while work remains would repeat itself: sleep until something changes.
    busy_ = !core.Idle() && !outcome.plan.batch.empty();
  }
  for (const EmittedToken& emitted : outcome.emitted) {
    StreamEvent event;
    event.token = emitted.token;
    event.at = ServingClock::now();
    streams_.at(emitted.request_id)->Push(std::move(event));
  }
  for (int64_t id : outcome.finished) {
    streams_.at(id)->Push(EndEvent(StreamEvent::Kind::kFinished, ""));
    streams_.erase(id);
  }
}

void ServingEngine::Loop() {
  ServingCore core(*model_->model, config_, model_->speculation);
  try {
    // On this thread: the matmul scratch is per thread.
    model_->model->ReservePass(config_.max_batched_tokens);
    if (model_->draft) model_->draft->ReservePass(config_.max_batched_tokens);
    while (TakeWork(core)) {
      if (core.Idle()) {
        std::lock_guard<std::mutex> lock(mutex_);
        snapshot_.state = core.State();
        busy_ = false;
        continue;
      }
      const ServingClock::time_point step_start = ServingClock::now();
      Publish(core.Step(), core, step_start);
    }
  } catch (const std::exception& error) {
    // A failed pass leaves the sequences' caches undefined: every request ends, none hangs.
    EndAll(StreamEvent::Kind::kFailed, std::string("serving engine failed: ") + error.what());
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot_.failure = error.what();
    accepting_ = false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot_.state = core.State();
  snapshot_.running = false;
  // Requests queued after the last look: refused, so no client waits forever.
  for (Pending& pending : inbox_) {
    StreamEvent refused = EndEvent(StreamEvent::Kind::kRefused, "the server is shutting down");
    refused.refusal = scheduler::Refusal::kQueueFull;
    pending.stream->Push(std::move(refused));
  }
  inbox_.clear();
  accepting_ = false;
}

}  // namespace moelab::executor
