#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moelab::loadgen {

// The server-sent events of one streamed OpenAI completion, read as the bytes arrive: one
// `data: {json}` event per chunk, ending with `data: [DONE]`. A chunk is a generated token when its
// first choice carries non-empty `text`, or carries no `finish_reason` (a token whose text is
// empty); a chunk with only a finish reason, or with no choices (vLLM's usage chunk), is not.
// `usage.completion_tokens`, when a chunk has it, is the server's count of generated tokens (a
// server may put several tokens in one chunk). Lines other than `data:` (comments, `event:`) are
// skipped; CRLF line ends are accepted.
class CompletionStream {
 public:
  enum class Event { kNone, kToken, kDone };

  // Consumes `bytes`; `on_event` is called for each token chunk and for [DONE], in order. Returns
  // false (and sets error()) on a malformed event: data that is not JSON or not an object, an
  // `error` object from the server, or anything after [DONE].
  template <typename OnEvent>
  bool Feed(std::string_view bytes, OnEvent on_event) {
    for (const char c : bytes) {
      if (c != '\n') {
        line_.push_back(c);
        if (line_.size() > kMaxLineBytes) return Fail("an event line over 16 MiB");
        continue;
      }
      const Event event = TakeLine();
      if (!error_.empty()) return false;
      if (event != Event::kNone) on_event(event);
    }
    return true;
  }

  bool done() const { return done_; }
  int64_t token_chunks() const { return token_chunks_; }
  std::optional<int64_t> usage_completion_tokens() const { return usage_completion_tokens_; }
  const std::string& error() const { return error_; }

  // What is wrong with a stream that ended here (the connection closed): "" when it ended well.
  std::string ErrorAtEnd() const;

 private:
  static constexpr size_t kMaxLineBytes = 16u << 20;

  Event TakeLine();  // one line done: maybe the end of an event
  Event Dispatch();  // a blank line: the event's data
  bool Fail(const std::string& why);

  std::string line_, data_;
  bool have_data_ = false, done_ = false;
  int64_t token_chunks_ = 0;
  std::optional<int64_t> usage_completion_tokens_;
  std::string error_;
};

}  // namespace moelab::loadgen
