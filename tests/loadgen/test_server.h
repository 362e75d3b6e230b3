#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::testing {

// How the test server answers POST /v1/completions.
struct TestServerBehaviour {
  double first_token_delay_s = 0.05;  // from the request's arrival to its first token chunk
  double token_gap_s = 0.01;          // between token chunks
  int fail_every = 0;                 // every k-th request (k-1, 2k-1, ...) gets `fail_status`
  int fail_status = 503;
  bool malformed = false;   // the first event's data is not JSON
  double stall_s = 0;       // waits this long before answering (interrupted by the destructor)
  bool send_usage = false;  // a last chunk with usage.completion_tokens, as vLLM sends
  int tokens_per_chunk = 1;
};

// An OpenAI-style streaming completions server with known delays, on a free loopback port, with a
// thread per connection (64), recording when each request arrived and its prompt's length.
class CompletionTestServer {
 public:
  explicit CompletionTestServer(TestServerBehaviour behaviour) : behaviour_(behaviour) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.Post("/v1/completions",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   Handle(request, response);
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~CompletionTestServer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stop_.notify_all();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Seconds from the first request's arrival, in arrival order.
  std::vector<double> ArrivalsS() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<double> seconds;
    for (const auto& time : arrivals_)
      seconds.push_back(std::chrono::duration<double>(time - arrivals_.front()).count());
    return seconds;
  }
  std::vector<nlohmann::json> Bodies() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bodies_;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Sleep(double seconds) {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stopping_; });
  }

  static std::string Chunk(int tokens, bool last) {
    return "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"" +
           std::string(static_cast<size_t>(tokens), 'a') +
           "\",\"finish_reason\":" + (last ? "\"length\"" : "null") + "}]}\n\n";
  }

  void Handle(const httplib::Request& request, httplib::Response& response) {
    size_t index = 0;
    const nlohmann::json body = nlohmann::json::parse(request.body);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      index = arrivals_.size();
      arrivals_.push_back(Clock::now());
      bodies_.push_back(body);
    }
    if (behaviour_.stall_s > 0) Sleep(behaviour_.stall_s);
    if (behaviour_.fail_every > 0 && index % static_cast<size_t>(behaviour_.fail_every) ==
                                         static_cast<size_t>(behaviour_.fail_every) - 1) {
      response.status = behaviour_.fail_status;
      response.set_content(R"({"error": {"message": "queue full", "code": 503}})",
                           "application/json");
      return;
    }
    const int tokens = body.at("max_tokens").get<int>();
    auto sent = std::make_shared<int>(0);
    response.set_chunked_content_provider(
        "text/event-stream", [this, tokens, sent](size_t, httplib::DataSink& sink) {
          Sleep(*sent == 0 ? behaviour_.first_token_delay_s : behaviour_.token_gap_s);
          if (behaviour_.malformed) {
            const std::string bad = "data: {not json\n\n";
            sink.write(bad.data(), bad.size());
            sink.done();
            return true;
          }
          const int in_chunk = std::min(behaviour_.tokens_per_chunk, tokens - *sent);
          *sent += in_chunk;
          std::string text = Chunk(in_chunk, *sent == tokens);
          if (*sent == tokens) {
            if (behaviour_.send_usage) {
              text +=
                  "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":" +
                  std::to_string(tokens) + "}}\n\n";
            }
            text += "data: [DONE]\n\n";
          }
          if (!sink.write(text.data(), text.size())) return false;
          if (*sent == tokens) sink.done();
          return true;
        });
  }

  TestServerBehaviour behaviour_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::vector<Clock::time_point> arrivals_;
  std::vector<nlohmann::json> bodies_;
};

}  // namespace moelab::testing
