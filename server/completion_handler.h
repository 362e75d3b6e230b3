#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

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
  int64_t created_unix_s = 0;
  ServerMetrics metrics;
  std::atomic<bool> draining{false};  // shutting down: new completions get 503
  std::mutex mutex;
  std::condition_variable answered;
  int64_t answers_in_flight = 0;  // guarded by mutex: completions not yet fully written
};

void ReplyError(httplib::Response& response, const ApiError& error);

// POST /v1/completions: parse, submit, wait for the first event (a refusal becomes the error
// answer), then the whole answer (JSON) or a chunked stream of server-sent events.
void HandleCompletion(ServerState& state, const httplib::Request& request,
                      httplib::Response& response);

}  // namespace moelab::server::internal
