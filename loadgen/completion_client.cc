#include "loadgen/completion_client.h"

#include <httplib.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <nlohmann/json.hpp>

#include "base/hash.h"
#include "base/message_text.h"
#include "loadgen/completion_stream.h"

namespace moelab::loadgen {
namespace {

constexpr uint64_t kPromptIdTag = 4;  // serving/'s streams use tags 1-3
constexpr size_t kErrorBodyBytes = 4096;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The message of an HTTP error body: OpenAI's {"error": {"message"}}, vLLM's {"message"}, or the
// text itself, shortened.
std::string HttpError(int status, const std::string& body) {
  std::string message = body;
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_object()) {
    const nlohmann::json& holder = json.contains("error") ? json["error"] : json;
    if (holder.is_object() && holder.contains("message") && holder["message"].is_string())
      message = holder["message"].get<std::string>();
    else if (holder.is_string())
      message = holder.get<std::string>();
  }
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back())))
    message.pop_back();
  return "http " + std::to_string(status) + (message.empty() ? "" : ": ") +
         base::EscapeForMessage(message, 60);
}

std::string TransportError(httplib::Error error, bool timed_out, double timeout_s) {
  if (timed_out) {
    std::ostringstream text;
    text << "timeout after " << timeout_s << " s";
    return text.str();
  }
  switch (error) {
    case httplib::Error::Connection:
      return "connection failed (refused or unreachable)";
    case httplib::Error::Read:
      return "connection closed while reading the response";
    case httplib::Error::Write:
      return "connection closed while sending the request";
    default:
      return "http client error: " + httplib::to_string(error);
  }
}

}  // namespace

std::string CompletionBody(const CompletionSettings& settings,
                           const serving::RequestSpec& request) {
  base::SplitMix64Stream ids(base::Mix64(settings.seed + base::Mix64(kPromptIdTag)) ^
                             base::Mix64(static_cast<uint64_t>(request.id)));
  std::string prompt = "[";
  prompt.reserve(static_cast<size_t>(request.prompt_tokens) * 6 + 2);
  for (int64_t i = 0; i < request.prompt_tokens; ++i) {
    if (i > 0) prompt.push_back(',');
    prompt += std::to_string(1 + ids.Below(static_cast<uint64_t>(settings.vocab - 1)));
  }
  prompt.push_back(']');
  nlohmann::json body = {{"max_tokens", request.output_tokens}, {"stream", true}};
  if (settings.model) body["model"] = *settings.model;
  if (settings.ignore_eos) body["ignore_eos"] = true;
  if (settings.stream_usage) body["stream_options"] = {{"include_usage", true}};
  std::string text = body.dump();
  text.insert(1, "\"prompt\":" + prompt + ",");  // the ids spliced in: no JSON tree per token
  return text;
}

serving::RequestOutcome SendCompletion(const CompletionSettings& settings,
                                       const serving::RequestSpec& request,
                                       Clock::time_point run_start) {
  serving::RequestOutcome outcome;
  outcome.id = request.id;
  outcome.arrival_s = request.arrival_s;
  outcome.prompt_tokens = request.prompt_tokens;
  const Clock::time_point deadline =
      run_start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(request.arrival_s + settings.timeout_s));

  httplib::Request http;
  http.method = "POST";
  http.path = settings.url.CompletionsPath();
  http.headers = {{"Accept", "text/event-stream"}};
  http.set_header("Content-Type", "application/json");
  http.body = CompletionBody(settings, request);

  int status = 0;
  std::string error_body;
  bool timed_out = false;
  CompletionStream stream;
  http.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  http.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (Clock::now() > deadline) {
      timed_out = true;
      return false;
    }
    if (status != 200) {
      error_body.append(data, std::min(size, kErrorBodyBytes - error_body.size()));
      return true;
    }
    return stream.Feed(std::string_view(data, size), [&](CompletionStream::Event event) {
      const double now_s = SecondsSince(run_start);
      if (event == CompletionStream::Event::kToken) {
        if (outcome.token_times_s.empty()) outcome.first_token_s = now_s;
        outcome.token_times_s.push_back(now_s);
      } else {
        outcome.finish_s = now_s;
      }
    });
  };

  const double remaining_s = std::max(1e-3, settings.timeout_s);
  httplib::Client client(settings.url.host, settings.url.port);
  client.set_keep_alive(false);
  client.set_connection_timeout(std::chrono::duration<double>(remaining_s));
  client.set_read_timeout(std::chrono::duration<double>(remaining_s));
  client.set_write_timeout(std::chrono::duration<double>(remaining_s));
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(http, response, error);
  if (Clock::now() > deadline) timed_out = true;

  std::string failure;
  if (!stream.error().empty()) {
    failure = stream.error();
  } else if (!sent || error != httplib::Error::Success) {
    failure = TransportError(error, timed_out, settings.timeout_s);
  } else if (status != 200) {
    failure = HttpError(status, error_body);
  } else {
    failure = stream.ErrorAtEnd();
  }
  if (!failure.empty()) {
    outcome.failed = true;
    outcome.error = failure;
    outcome.finish_s = SecondsSince(run_start);
    return outcome;
  }
  outcome.output_tokens =
      stream.usage_completion_tokens().value_or(static_cast<int64_t>(outcome.token_times_s.size()));
  return outcome;
}

}  // namespace moelab::loadgen
