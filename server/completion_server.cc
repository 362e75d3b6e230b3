#include "server/completion_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

#include <httplib.h>

#include "base/error.h"
#include "server/completion_handler.h"

namespace moelab::server {

void ServerOptions::Validate() const {
  if (host.empty()) throw base::Error("--host: an address to bind expected (e.g. 127.0.0.1)");
  if (port < 0 || port > 65535)
    throw base::Error("--port must be in [0, 65535] (0: any free port), got " +
                      std::to_string(port));
  if (max_body_bytes < 1024 || max_body_bytes > (int64_t{1} << 30)) {
    throw base::Error("--max-body-bytes must be in [1024, 1073741824], got " +
                      std::to_string(max_body_bytes));
  }
  if (http_threads < 1 || http_threads > 4096) {
    throw base::Error("--http-threads must be in [1, 4096], got " + std::to_string(http_threads));
  }
  if (listen_backlog < 1 || listen_backlog > 65535) {
    throw base::Error("--listen-backlog must be in [1, 65535], got " +
                      std::to_string(listen_backlog));
  }
  if (!(drain_s >= 0 && drain_s <= 3600))
    throw base::Error("--drain-seconds must be in [0, 3600], got " + std::to_string(drain_s));
}

struct CompletionServer::Impl {
  Impl(executor::ServingEngine& engine, ServedModel model, ServerOptions options)
      : options(std::move(options)), state(engine, std::move(model)) {}
  ServerOptions options;
  internal::ServerState state;
  httplib::Server http;
  // The listening socket, seen through httplib's socket-options hook (httplib keeps it private).
  socket_t listen_socket = INVALID_SOCKET;
};

namespace {

void AddRoutes(internal::ServerState& state, httplib::Server& http) {
  http.Get("/health", [&state](const httplib::Request&, httplib::Response& response) {
    const executor::EngineSnapshot engine = state.engine.Snapshot();
    const bool healthy = engine.running && !state.draining;
    response.status = healthy ? 200 : 503;
    nlohmann::json body = {{"status", healthy ? "ok" : "unavailable"},
                           {"waiting", engine.state.waiting},
                           {"running", engine.state.running}};
    if (!engine.failure.empty()) body["failure"] = engine.failure;
    response.set_content(body.dump(), "application/json");
  });
  http.Get("/v1/models", [&state](const httplib::Request&, httplib::Response& response) {
    response.set_content(ModelsJson(state.model, state.created_unix_s).dump(), "application/json");
  });
  http.Get("/metrics", [&state](const httplib::Request&, httplib::Response& response) {
    response.set_content(state.metrics.Text(state.engine.Snapshot()), "text/plain; version=0.0.4");
  });
  http.Post("/v1/completions",
            [&state](const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader& content) {
              const std::optional<std::string> body = internal::ReadBody(state, content, response);
              if (body) internal::HandleCompletion(state, request, *body, response);
            });
  // httplib's own refusals (413 body too large, 404 no such path, 400 unparsable HTTP) in the
  // API's error shape; answers that already have a body keep it.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& request,
                                                                 httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "the request was refused (HTTP " + std::to_string(response.status) + ")";
    if (response.status == 404) message = "no route for " + request.method + " " + request.path;
    if (response.status == 413) message = "the request body exceeds --max-body-bytes";
    internal::ReplyError(response, ApiError(response.status, message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        internal::ReplyError(response, ApiError(500, message, "", "server_error"));
      });
}

}  // namespace

CompletionServer::CompletionServer(executor::ServingEngine& engine, ServedModel model,
                                   ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(model), std::move(options))) {
  impl_->options.Validate();
  impl_->state.created_unix_s = static_cast<int64_t>(std::time(nullptr));
  impl_->state.max_body_bytes = impl_->options.max_body_bytes;
  const int threads = impl_->options.http_threads;
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->http.set_payload_max_length(static_cast<size_t>(impl_->options.max_body_bytes));
  Impl* impl = impl_.get();
  impl_->http.set_socket_options([impl](socket_t socket) {
    httplib::default_socket_options(socket);
    impl->listen_socket = socket;
  });
  AddRoutes(impl_->state, impl_->http);
}

CompletionServer::~CompletionServer() = default;

int CompletionServer::Bind() {
  const ServerOptions& o = impl_->options;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) throw base::Error("--host " + o.host + " --port 0: cannot bind a free port");
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    throw base::Error("--host " + o.host + " --port " + std::to_string(o.port) +
                      ": cannot bind (in use, or not an address of this machine)");
  }
  // Listening again on a listening socket only changes its backlog (Linux).
  if (impl_->listen_socket == INVALID_SOCKET ||
      ::listen(impl_->listen_socket, o.listen_backlog) != 0) {
    throw base::Error("--listen-backlog " + std::to_string(o.listen_backlog) +
                      ": cannot listen with it (" + std::strerror(errno) + ")");
  }
  return port;
}

int CompletionServer::EffectiveListenBacklog() const {
  const int requested = impl_->options.listen_backlog;
  std::ifstream somaxconn("/proc/sys/net/core/somaxconn");
  int cap = 0;
  if (somaxconn >> cap && cap > 0) return std::min(requested, cap);
  return requested;
}

void CompletionServer::Serve() { impl_->http.listen_after_bind(); }

void CompletionServer::Shutdown(executor::ServingEngine::StopMode mode) {
  internal::ServerState& state = impl_->state;
  state.draining = true;
  state.engine.Stop(mode);
  {
    // The engine ended every request; their answers are still being written.
    std::unique_lock<std::mutex> lock(state.mutex);
    state.answered.wait_for(lock, std::chrono::duration<double>(impl_->options.drain_s),
                            [&] { return state.answers_in_flight == 0; });
  }
  impl_->http.stop();
}

}  // namespace moelab::server
