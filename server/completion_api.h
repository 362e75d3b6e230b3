#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::server {

// An OpenAI-style error answer: HTTP status and {"error": {"message", "type", "param"}}.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        type(std::move(type)) {}
  int status;
  std::string param;  // the request field at fault; empty: none (serialized as null)
  std::string type;
};
nlohmann::json ErrorJson(const ApiError& error);

// What the served model is, for /v1/models, refusals and answers.
struct ServedModel {
  std::string name;                 // `model` in requests and answers
  int64_t vocab = 0;                // token ids must be below it
  int64_t max_sequence_tokens = 0;  // prompt + max_tokens at most (max_model_len)
  // The engine's settings (`scheduler`: SchedulerConfig::ToJson, `threads`, `speculative`,
  // `offload`, ...: docs/serving.md, "API"); shown in /v1/models' entry as `moelab`, so a client
  // can read the settings behind what it measures. Null: none given.
  nlohmann::json settings;
};

// POST /v1/completions, parsed and checked (OpenAI's completions API; fields beyond these are
// ignored, as OpenAI-compatible servers do, except those that ask for what is not served).
struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids: given, or the text through TokenizeBytes
  int64_t max_tokens = 16;      // OpenAI's default when absent
  bool stream = false;
  int64_t priority = 0;  // vLLM's extension; ordering with --queue-order priority
};

// Throws ApiError (400 naming the field, 404 for another model) on malformed JSON, wrong types,
// a missing prompt, an empty prompt, ids outside the vocabulary, max_tokens < 1, n != 1,
// temperature other than 0 (greedy decoding only), echo, best_of > 1, logprobs, stop, suffix.
CompletionRequest ParseCompletionRequest(const std::string& body, const ServedModel& model);

// The non-stream answer: {"id", "object": "text_completion", "created", "model", "choices":
// [{"index": 0, "text", "token_ids", "logprobs": null, "finish_reason"}], "usage":
// {"prompt_tokens", "completion_tokens", "total_tokens"}}. `token_ids` is moelab's extension.
nlohmann::json CompletionJson(const std::string& id, int64_t created_unix_s,
                              const std::string& model, const std::vector<int32_t>& tokens,
                              int64_t prompt_tokens, const std::string& finish_reason);
// One server-sent-events chunk: the same shape with this chunk's text and token_ids; the last
// chunk has finish_reason and usage, the others finish_reason null and no usage.
nlohmann::json ChunkJson(const std::string& id, int64_t created_unix_s, const std::string& model,
                         const std::vector<int32_t>& tokens,
                         const std::optional<std::string>& finish_reason,
                         std::optional<nlohmann::json> usage);
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);
// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by",
// "max_model_len"}]}.
nlohmann::json ModelsJson(const ServedModel& model, int64_t created_unix_s);

// "data: JSON\n\n" and the stream's end "data: [DONE]\n\n".
std::string ServerSentEvent(const nlohmann::json& data);
inline constexpr const char* kServerSentEventsDone = "data: [DONE]\n\n";

}  // namespace moelab::server
