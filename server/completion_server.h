#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "executor/serving_engine.h"
#include "server/completion_api.h"

namespace moelab::server {

struct ServerOptions {
  std::string host = "127.0.0.1";    // loopback unless told otherwise
  int port = 8000;                   // 0: any free port (Bind returns it)
  int64_t max_body_bytes = 1 << 20;  // larger request bodies get 413
  // Threads answering HTTP requests; a streaming client holds one for its whole answer, so
  // fewer than the requests in flight queue connections before the scheduler sees them.
  int http_threads = 64;
  // Connections the kernel holds before the server accepts them. Debian's compiled cpp-httplib
  // listens with 5 (its CPPHTTPLIB_LISTEN_BACKLOG is fixed when the library is built, so a define
  // here changes nothing): a load generator opening dozens of streams at once overflowed it and
  // lost connections. Bind listens again with this value; the kernel caps it at
  // net.core.somaxconn.
  int listen_backlog = 4096;
  // On shutdown, how long answers still being written may take after the engine stopped.
  double drain_s = 10;
  // Errors name the option (--host, --port, --max-body-bytes, --http-threads,
  // --listen-backlog).
  void Validate() const;
};

// `moelab serve`'s HTTP front (cpp-httplib) over a ServingEngine, speaking OpenAI's completions
// API (docs/serving.md): GET /v1/models, POST /v1/completions (JSON or server-sent events),
// GET /health, GET /metrics (Prometheus text). Every error is {"error": {...}} JSON: 400 naming
// the field, 400 naming the length limit the scheduler refused, 404 another model, 413 a body over
// max_body_bytes, 503 the queue full or the server shutting down. A streaming client that goes
// away (a chunk's write fails) has its request cancelled and its KV cache freed.
class CompletionServer {
 public:
  CompletionServer(executor::ServingEngine& engine, ServedModel model, ServerOptions options);
  ~CompletionServer();
  // Binds the listening socket with options.listen_backlog; returns the port (the free one chosen
  // for port 0). An Error naming --host and --port (or --listen-backlog) when it cannot.
  int Bind();
  // After Bind: the backlog the kernel applies (listen_backlog capped by net.core.somaxconn).
  int EffectiveListenBacklog() const;
  // Answers requests until Shutdown; returns then.
  void Serve();
  // From any thread: new completions get 503; the engine finishes (kFinish) or cancels (kAbort)
  // what it holds; answers still being written get drain_s; then the listener closes and Serve
  // returns.
  void Shutdown(executor::ServingEngine::StopMode mode);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moelab::server
