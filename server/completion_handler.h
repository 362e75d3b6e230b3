#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <httplib.h>

#include "executor/serving_engine.h"
#include "server/completion_api.h"
#include "server/server_metrics.h"

namespace moelab::server::internal {

// What every handler thread shares.
struct ServerState {
  ServerState(executor::ServingEngine& engine, ServedModel model)
      : engine(engine), model(std::move(model)) {}
  executor::ServingEngine& engine;
  ServedModel model;
  int64_t created_unix_s = 0;  // the server's start (the served model's `created`)
  int64_t max_body_bytes = 1 << 20;
  ServerMetrics metrics;
  std::atomic<bool> draining{false};  // shutting down: new completions get 503
  std::mutex mutex;
  std::condition_variable answered;
  int64_t answers_in_flight = 0;  // guarded by mutex: completions not yet fully written
};

void ReplyError(httplib::Response& response, const ApiError& error);

// POST /v1/completions: parse, submit, wait for the first event (a refusal becomes the error
// answer), then the whole answer (JSON) or a chunked stream of server-sent events.
void HandleCompletion(ServerState& state, const httplib::Request& request, const std::string& body,
                      httplib::Response& response);

// The request's body, read through the content reader so that max_body_bytes bounds every
// transfer encoding (httplib 0.11 bounds a declared length only: a chunked body grew without
// limit; one over it is read and dropped up to 64 MiB, then cut off) and no content type is
// parsed on the way (httplib refuses a form-encoded body over 8 KiB
// with its own 413, which curl -d sends). nullopt: the error answer is in `response`.
std::optional<std::string> ReadBody(ServerState& state, const httplib::ContentReader& content,
                                    httplib::Response& response);

}  // namespace moelab::server::internal
