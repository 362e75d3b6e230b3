#include "server/completion_handler.h"

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/client_connection.h"

namespace moelab::server::internal {
namespace {

using executor::RequestStream;
using executor::ServingClock;
using executor::StreamEvent;

constexpr std::chrono::milliseconds kWaitSlice(1000);
// The longest a whole (non-streaming) answer waits for an event before looking again whether its
// client is still connected: a client gone is noticed within this, and its sequence cancelled.
constexpr std::chrono::milliseconds kConnectionCheckSlice(50);

StreamEvent NextEvent(RequestStream& stream) {
  for (;;) {
    if (std::optional<StreamEvent> event = stream.Next(kWaitSlice)) return std::move(*event);
  }
}

// Counts an answer in flight from construction to destruction (the last copy of the guard, held
// by the streaming provider until the response is written), so shutdown can wait for answers.
class AnswerGuard {
 public:
  explicit AnswerGuard(ServerState& state) : state_(state) {
    std::lock_guard<std::mutex> lock(state_.mutex);
    ++state_.answers_in_flight;
  }
  ~AnswerGuard() {
    {
      std::lock_guard<std::mutex> lock(state_.mutex);
      --state_.answers_in_flight;
    }
    state_.answered.notify_all();
  }
  AnswerGuard(const AnswerGuard&) = delete;
  AnswerGuard& operator=(const AnswerGuard&) = delete;

 private:
  ServerState& state_;
};

double Seconds(ServingClock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

// A request's answer so far: its tokens, its first token's time; records its latencies once.
struct Answer {
  std::string id;
  int64_t created_unix_s = 0;  // when the request arrived (OpenAI's `created`)
  int64_t prompt_tokens = 0;
  ServingClock::time_point arrival, first_token, last_token;
  std::vector<int32_t> tokens;
  bool ended = false;

  void Add(const StreamEvent& event, ServerMetrics& metrics) {
    if (tokens.empty()) {
      first_token = event.at;
      metrics.ObserveTimeToFirstToken(Seconds(first_token - arrival));
    }
    last_token = event.at;
    tokens.push_back(event.token);
  }
  void Finish(ServerMetrics& metrics) {
    ended = true;
    metrics.Count(RequestOutcome::kCompleted);
    if (tokens.size() >= 2) {
      metrics.ObserveTimePerOutputToken(Seconds(last_token - first_token) /
                                        static_cast<double>(tokens.size() - 1));
    }
  }
};

// The error answer of a request that ended before its first token.
ApiError EndedEarly(const StreamEvent& event, const CompletionRequest& request,
                    const ServedModel& model, ServerMetrics& metrics) {
  if (event.kind == StreamEvent::Kind::kRefused && event.refusal == scheduler::Refusal::kTooLong) {
    metrics.Count(RequestOutcome::kTooLong);
    const bool prompt_alone =
        static_cast<int64_t>(request.prompt.size()) >= model.max_sequence_tokens;
    return ApiError(400, event.message, prompt_alone ? "prompt" : "max_tokens");
  }
  if (event.kind == StreamEvent::Kind::kRefused || event.kind == StreamEvent::Kind::kCancelled) {
    metrics.Count(RequestOutcome::kQueueFull);
    return ApiError(503, event.message, "", "server_overloaded");
  }
  metrics.Count(RequestOutcome::kFailed);
  return ApiError(500, event.message, "", "server_error");
}

// The stream's next event, looking between waits whether the client is still connected; nullopt
// when it left first, the request then cancelled (a whole answer writes nothing before its end,
// so no failed write would say the client is gone).
std::optional<StreamEvent> NextWhileConnected(ServerState& state, RequestStream& stream,
                                              const std::optional<ClientConnection>& client) {
  for (;;) {
    // Looked at before every event, not only when none comes: tokens can arrive faster than the
    // slice for as long as the request runs. (A poll of one socket: microseconds a token.)
    if (client && client->Closed()) {
      state.engine.Cancel(stream.id());
      state.metrics.Count(RequestOutcome::kCancelled);
      return std::nullopt;
    }
    if (std::optional<StreamEvent> event = stream.Next(kConnectionCheckSlice)) return event;
  }
}

void ReplyWhole(ServerState& state, Answer& answer, RequestStream& stream,
                const std::optional<ClientConnection>& client, httplib::Response& response) {
  for (;;) {
    std::optional<StreamEvent> next = NextWhileConnected(state, stream, client);
    if (!next) return;  // nobody reads the answer
    const StreamEvent event = std::move(*next);
    if (event.kind == StreamEvent::Kind::kToken) {
      answer.Add(event, state.metrics);
      continue;
    }
    if (event.kind == StreamEvent::Kind::kFinished) {
      answer.Finish(state.metrics);
      response.set_content(CompletionJson(answer.id, answer.created_unix_s, state.model.name,
                                          answer.tokens, answer.prompt_tokens, "length")
                               .dump(),
                           "application/json");
      return;
    }
    state.metrics.Count(event.kind == StreamEvent::Kind::kCancelled ? RequestOutcome::kCancelled
                                                                    : RequestOutcome::kFailed);
    return ReplyError(response, ApiError(503, event.message, "", "server_error"));
  }
}

// Writes one event of the stream; false when the client is gone.
bool WriteEvent(ServerState& state, Answer& answer, const StreamEvent& event,
                httplib::DataSink& sink) {
  std::string text;
  if (event.kind == StreamEvent::Kind::kToken) {
    answer.Add(event, state.metrics);
    text = ServerSentEvent(ChunkJson(answer.id, answer.created_unix_s, state.model.name,
                                     {event.token}, std::nullopt, std::nullopt));
  } else if (event.kind == StreamEvent::Kind::kFinished) {
    answer.Finish(state.metrics);
    // The last chunk: no new token, the finish reason and the usage.
    text = ServerSentEvent(
        ChunkJson(answer.id, answer.created_unix_s, state.model.name, {}, std::string("length"),
                  UsageJson(answer.prompt_tokens, static_cast<int64_t>(answer.tokens.size()))));
    text += kServerSentEventsDone;
  } else {
    answer.ended = true;
    state.metrics.Count(event.kind == StreamEvent::Kind::kCancelled ? RequestOutcome::kCancelled
                                                                    : RequestOutcome::kFailed);
    text = ServerSentEvent(ErrorJson(ApiError(503, event.message, "", "server_error")));
    text += kServerSentEventsDone;
  }
  if (!sink.write(text.data(), text.size())) return false;
  if (event.end()) sink.done();
  return true;
}

void ReplyStream(ServerState& state, std::shared_ptr<Answer> answer,
                 std::shared_ptr<RequestStream> stream, StreamEvent first,
                 std::shared_ptr<AnswerGuard> guard, httplib::Response& response) {
  auto pending = std::make_shared<std::optional<StreamEvent>>(std::move(first));
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [&state, answer, stream, pending](size_t, httplib::DataSink& sink) {
        StreamEvent event = *pending ? std::move(**pending) : NextEvent(*stream);
        pending->reset();
        return WriteEvent(state, *answer, event, sink);
      },
      [&state, answer, stream, guard](bool success) {
        // A failed write or a closed connection before the end: the client is gone.
        if (!success && !answer->ended) {
          state.engine.Cancel(stream->id());
          answer->ended = true;
          state.metrics.Count(RequestOutcome::kCancelled);
        }
      });
}

}  // namespace

void ReplyError(httplib::Response& response, const ApiError& error) {
  response.status = error.status;
  if (error.status == 503) response.set_header("Retry-After", "1");
  // Replacing what is not UTF-8: a message may quote the body's own bytes (a JSON parse error
  // names the byte it stopped at), and dumping them as they are throws (a 500 instead of the 400).
  response.set_content(
      ErrorJson(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "application/json");
}

std::optional<std::string> ReadBody(ServerState& state, const httplib::ContentReader& content,
                                    httplib::Response& response) {
  // Past the limit the rest is read and dropped, up to kDrainBytes, so that a client still
  // sending gets the 413 rather than a reset (as httplib drains a declared length); a body longer
  // than that is cut off.
  constexpr int64_t kDrainBytes = int64_t{64} << 20;
  std::string body;
  bool too_large = false;
  int64_t dropped = 0;
  const bool read = content([&](const char* data, size_t length) {
    if (!too_large && static_cast<int64_t>(body.size() + length) <= state.max_body_bytes) {
      body.append(data, length);
      return true;
    }
    too_large = true;
    body.clear();
    dropped += static_cast<int64_t>(length);
    return dropped <= kDrainBytes;
  });
  if (read && !too_large) return body;
  // A body cut off leaves the rest unread: the connection cannot carry another request.
  response.set_header("Connection", "close");
  state.metrics.Count(RequestOutcome::kInvalid);
  // httplib refuses a declared length over the limit itself (status 413, the receiver never
  // called); a chunked body is counted here as it arrives.
  if (too_large || response.status == 413) {
    ReplyError(response, ApiError(413, "the request body exceeds --max-body-bytes (" +
                                           std::to_string(state.max_body_bytes) + " bytes)"));
  } else {
    ReplyError(response, ApiError(400, "the request body could not be read"));
  }
  return std::nullopt;
}

void HandleCompletion(ServerState& state, const httplib::Request& http_request,
                      const std::string& body, httplib::Response& response) {
  auto guard = std::make_shared<AnswerGuard>(state);
  auto answer = std::make_shared<Answer>();
  answer->arrival = ServingClock::now();
  answer->created_unix_s = static_cast<int64_t>(std::time(nullptr));
  CompletionRequest request;
  try {
    if (state.draining) throw ApiError(503, "the server is shutting down", "", "server_overloaded");
    request = ParseCompletionRequest(body, state.model);
  } catch (const ApiError& error) {
    state.metrics.Count(error.status == 503 ? RequestOutcome::kQueueFull
                                            : RequestOutcome::kInvalid);
    return ReplyError(response, error);
  }
  answer->prompt_tokens = static_cast<int64_t>(request.prompt.size());
  std::shared_ptr<RequestStream> stream =
      state.engine.Submit(request.prompt, request.max_tokens, request.priority);
  answer->id = "cmpl-" + std::to_string(stream->id());
  const std::optional<ClientConnection> client = ClientConnection::Of(http_request);
  std::optional<StreamEvent> first = NextWhileConnected(state, *stream, client);
  if (!first) return;  // the client left while the request waited
  if (first->end())    // every request has max_tokens >= 1: an end first is a refusal or failure
    return ReplyError(response, EndedEarly(*first, request, state.model, state.metrics));
  if (!request.stream) {
    answer->Add(*first, state.metrics);
    return ReplyWhole(state, *answer, *stream, client, response);
  }
  ReplyStream(state, answer, stream, std::move(*first), guard, response);
}

}  // namespace moelab::server::internal
