#include "loadgen/completion_stream.h"

#include <gtest/gtest.h>

#include <vector>

namespace moelab::loadgen {
namespace {

std::string Token(const std::string& text, const char* finish = "null") {
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + text + "\",\"finish_reason\":" + finish +
         "}]}\n\n";
}

// Feeds `text` in pieces of `piece` bytes; returns the events seen.
std::vector<CompletionStream::Event> FeedAll(CompletionStream& stream, const std::string& text,
                                             size_t piece) {
  std::vector<CompletionStream::Event> events;
  for (size_t at = 0; at < text.size(); at += piece) {
    if (!stream.Feed(std::string_view(text).substr(at, piece),
                     [&](CompletionStream::Event event) { events.push_back(event); }))
      break;
  }
  return events;
}

TEST(CompletionStream, CountsTokenChunksAcrossAnySplitOfTheBytes) {
  const std::string text = ": a comment\r\n\r\n" + Token("Hel") + Token("") + "event: x\n" +
                           Token("lo", "\"length\"") + Token("", "\"length\"") +
                           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7}}\r\n\r\n" +
                           "data: [DONE]\n\n";
  for (const size_t piece : {size_t{1}, size_t{3}, size_t{17}, text.size()}) {
    CompletionStream stream;
    const auto events = FeedAll(stream, text, piece);
    using E = CompletionStream::Event;
    // "Hel"; "" with no finish reason (a token whose text is empty); "lo" with its finish reason;
    // not the finish-only chunk nor the usage chunk.
    EXPECT_EQ(events, (std::vector<E>{E::kToken, E::kToken, E::kToken, E::kDone})) << piece;
    EXPECT_EQ(stream.token_chunks(), 3);
    EXPECT_EQ(stream.usage_completion_tokens(), 7);
    EXPECT_TRUE(stream.done());
    EXPECT_EQ(stream.ErrorAtEnd(), "");
  }
}

TEST(CompletionStream, NamesWhatIsWrong) {
  const struct {
    std::string text;
    const char* error;
  } cases[] = {
      {"data: {nope\n\n", "malformed stream: an event's data is not a JSON object"},
      {"data: [1,2]\n\n", "malformed stream: an event's data is not a JSON object"},
      {"data: {\"error\":{\"message\":\"out of memory\"}}\n\n",
       "server error in stream: out of memory"},
      {Token("a") + "data: [DONE]\n\n" + Token("b"), "malformed stream: data after [DONE]"},
      {Token("a"), "malformed stream: ended without data: [DONE]"},
      {"{\"choices\":[{\"text\":\"abc\"}]}", "malformed stream: no data: events"},
      {"data: [DONE]\n\n", "malformed stream: no tokens before [DONE]"},
      {"data: {\"choices\":[7]}\n\n", "malformed stream: a chunk's choices[0] is not an object"},
  };
  for (const auto& c : cases) {
    CompletionStream stream;
    FeedAll(stream, c.text, 5);
    EXPECT_EQ(stream.ErrorAtEnd().rfind(c.error, 0), 0u) << c.text << " -> " << stream.ErrorAtEnd();
  }
}

}  // namespace
}  // namespace moelab::loadgen
