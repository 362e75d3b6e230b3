#include "loadgen/completion_stream.h"

#include <nlohmann/json.hpp>

#include "base/message_text.h"

namespace moelab::loadgen {

bool CompletionStream::Fail(const std::string& why) {
  if (error_.empty()) error_ = "malformed stream: " + why;
  return false;
}

CompletionStream::Event CompletionStream::TakeLine() {
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  std::string line;
  line.swap(line_);
  if (line.empty()) return Dispatch();
  if (line.rfind("data:", 0) != 0) return Event::kNone;  // ": comment", "event: ...", "id: ..."
  std::string_view value(line);
  value.remove_prefix(5);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (have_data_) data_.push_back('\n');
  data_.append(value);
  have_data_ = true;
  return Event::kNone;
}

CompletionStream::Event CompletionStream::Dispatch() {
  if (!have_data_) return Event::kNone;
  std::string data;
  data.swap(data_);
  have_data_ = false;
  if (done_) {
    Fail("data after [DONE]");
    return Event::kNone;
  }
  if (data == "[DONE]") {
    done_ = true;
    return Event::kDone;
  }
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    Fail("an event's data is not a JSON object");  // one text, so such failures count together
    return Event::kNone;
  }
  if (const auto error = chunk.find("error"); error != chunk.end()) {
    const std::string message =
        error->is_object() && error->contains("message") && (*error)["message"].is_string()
            ? (*error)["message"].get<std::string>()
            : error->dump();
    error_ = "server error in stream: " + base::EscapeForMessage(message, 60);
    return Event::kNone;
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    const auto tokens = usage->find("completion_tokens");
    if (tokens != usage->end() && tokens->is_number_integer())
      usage_completion_tokens_ = tokens->get<int64_t>();
  }
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return Event::kNone;
  const nlohmann::json& choice = choices->front();
  if (!choice.is_object()) {
    Fail("a chunk's choices[0] is not an object");
    return Event::kNone;
  }
  const auto text = choice.find("text");
  const auto finish = choice.find("finish_reason");
  const bool has_text =
      text != choice.end() && text->is_string() && !text->get_ref<const std::string&>().empty();
  const bool finished = finish != choice.end() && !finish->is_null();
  if (!has_text && finished) return Event::kNone;
  ++token_chunks_;
  return Event::kToken;
}

std::string CompletionStream::ErrorAtEnd() const {
  if (!error_.empty()) return error_;
  if (!done_) {
    return token_chunks_ == 0 ? "malformed stream: no data: events (is the server streaming?)"
                              : "malformed stream: ended without data: [DONE]";
  }
  if (token_chunks_ == 0) return "malformed stream: no tokens before [DONE]";
  return "";
}

}  // namespace moelab::loadgen
