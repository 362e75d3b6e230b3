#include "server/completion_api.h"

#include <cstdint>
#include <limits>

#include "base/error.h"
#include "base/json_reader.h"
#include "scheduler/scheduler_config.h"
#include "server/tokenizer.h"

namespace moelab::server {
namespace {

using nlohmann::json;

ApiError BadField(const std::string& field, const std::string& expected) {
  return ApiError(400, "'" + field + "': " + expected, field);
}

std::vector<int32_t> ParsePrompt(const json& prompt, const ServedModel& model) {
  std::vector<int32_t> ids;
  if (prompt.is_string()) {
    ids = TokenizeBytes(prompt.get<std::string>(), model.vocab);
  } else if (prompt.is_array()) {
    for (const json& id : prompt) {
      if (!id.is_number_integer())
        throw BadField("prompt", "a string or a list of integer token ids expected");
      // Above int64's range (an unsigned JSON number) it is outside any vocabulary; the message
      // quotes the number as sent (its JSON text), not a wrapped value.
      const bool beyond_int64 = id.is_number_unsigned() &&
                                id.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()};
      const int64_t value = beyond_int64 ? -1 : id.get<int64_t>();
      if (beyond_int64 || value < 0 || value >= model.vocab) {
        throw BadField("prompt", "token id " + id.dump() + " outside the vocabulary [0, " +
                                     std::to_string(model.vocab) + ")");
      }
      ids.push_back(static_cast<int32_t>(value));
    }
  } else {
    throw BadField("prompt", "a string or a list of integer token ids expected");
  }
  if (ids.empty()) throw BadField("prompt", "at least one token expected, got an empty prompt");
  return ids;
}

int64_t IntegerField(const json& body, const std::string& field, int64_t low) {
  const json& value = body.at(field);
  if (!value.is_number_integer())
    throw BadField(field, "an integer expected, got " + std::string(value.type_name()));
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
    throw BadField(field, "at most " + std::to_string(std::numeric_limits<int64_t>::max()) +
                              " expected, got " + value.dump());
  }
  const int64_t number = value.get<int64_t>();
  if (number < low) {
    throw BadField(field,
                   "at least " + std::to_string(low) + " expected, got " + std::to_string(number));
  }
  return number;
}

// Fields that ask for what a greedy, single-choice server cannot give: refused, not ignored.
void RefuseUnserved(const json& body) {
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    if (!body["temperature"].is_number()) throw BadField("temperature", "a number expected");
    if (body["temperature"].get<double>() != 0)
      throw BadField("temperature", "only greedy decoding is served: 0 expected");
  }
  if (body.contains("n") && !body["n"].is_null() && IntegerField(body, "n", 1) != 1)
    throw BadField("n", "one choice per request is served: 1 expected");
  if (body.contains("best_of") && !body["best_of"].is_null() &&
      IntegerField(body, "best_of", 1) != 1)
    throw BadField("best_of", "1 expected");
  if (body.contains("echo") && !body["echo"].is_null()) {
    if (!body["echo"].is_boolean()) throw BadField("echo", "true or false expected");
    if (body["echo"] == true) throw BadField("echo", "false expected");
  }
  for (const char* field : {"logprobs", "stop", "suffix"}) {
    if (body.contains(field) && !body[field].is_null())
      throw BadField(field, "not supported by moelab serve");
  }
}

}  // namespace

json ErrorJson(const ApiError& error) {
  json inner = {{"message", error.what()}, {"type", error.type}, {"code", error.status}};
  inner["param"] = error.param.empty() ? json(nullptr) : json(error.param);
  return {{"error", inner}};
}

CompletionRequest ParseCompletionRequest(const std::string& body_text, const ServedModel& model) {
  json body;
  try {
    // As every file moelab reads: a key given twice is refused (the parser kept the last value
    // without a word), and so are nesting and numbers past what the parser handles.
    body = base::ParseJsonText(body_text, "the body is not valid JSON");
  } catch (const base::Error& error) {
    throw ApiError(400, error.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  if (body.contains("model") && !body["model"].is_null()) {  // optional: absent or null
    if (!body["model"].is_string()) throw BadField("model", "a string expected");
    if (body["model"] != model.name) {
      throw ApiError(404,
                     "the model '" + body["model"].get<std::string>() +
                         "' does not exist; this server serves '" + model.name + "'",
                     "model");
    }
  }
  if (!body.contains("prompt")) throw BadField("prompt", "required field missing");
  CompletionRequest request;
  request.prompt = ParsePrompt(body["prompt"], model);
  if (body.contains("max_tokens") && !body["max_tokens"].is_null()) {
    request.max_tokens = IntegerField(body, "max_tokens", 1);
    // Past any sequence the server holds: a 400 here (above 2^40 it reached the scheduler's
    // bound and came back as an engine failure, 500).
    // (Up to 2^40 the scheduler refuses one past max_sequence_tokens as too long, a 400 too.)
    if (request.max_tokens > scheduler::kMaxSequenceTokens) {
      throw BadField("max_tokens", "at most 2^40 (" +
                                       std::to_string(scheduler::kMaxSequenceTokens) +
                                       ") expected, got " + std::to_string(request.max_tokens));
    }
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) throw BadField("stream", "true or false expected");
    request.stream = body["stream"].get<bool>();
  }
  if (body.contains("priority") && !body["priority"].is_null()) {
    if (!body["priority"].is_number_integer()) throw BadField("priority", "an integer expected");
    request.priority = body["priority"].get<int64_t>();
  }
  RefuseUnserved(body);
  return request;
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json CompletionJson(const std::string& id, int64_t created_unix_s, const std::string& model,
                    const std::vector<int32_t>& tokens, int64_t prompt_tokens,
                    const std::string& finish_reason) {
  json choice = {{"index", 0},
                 {"text", Detokenize(tokens)},
                 {"token_ids", tokens},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason}};
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created_unix_s},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", UsageJson(prompt_tokens, static_cast<int64_t>(tokens.size()))}};
}

json ChunkJson(const std::string& id, int64_t created_unix_s, const std::string& model,
               const std::vector<int32_t>& tokens, const std::optional<std::string>& finish_reason,
               std::optional<json> usage) {
  json choice = {
      {"index", 0}, {"text", Detokenize(tokens)}, {"token_ids", tokens}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  json chunk = {{"id", id},
                {"object", "text_completion"},
                {"created", created_unix_s},
                {"model", model},
                {"choices", json::array({choice})}};
  if (usage) chunk["usage"] = std::move(*usage);
  return chunk;
}

json ModelsJson(const ServedModel& model, int64_t created_unix_s) {
  json entry = {{"id", model.name},
                {"object", "model"},
                {"created", created_unix_s},
                {"owned_by", "moelab"},
                {"max_model_len", model.max_sequence_tokens}};
  if (!model.settings.is_null()) entry["moelab"] = model.settings;
  return {{"object", "list"}, {"data", json::array({entry})}};
}

std::string ServerSentEvent(const json& data) { return "data: " + data.dump() + "\n\n"; }

}  // namespace moelab::server
