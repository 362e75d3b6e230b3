#include "base/message_text.h"

#include <algorithm>
#include <cstdio>

namespace moelab::base {

std::string EscapeForMessage(std::string_view bytes, size_t max_chars) {
  std::string text;
  for (const char raw : bytes) {
    if (text.size() >= max_chars) {
      text += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(raw);
    if (byte == '\n') {
      text += "\\n";
    } else if (byte == '\t') {
      text += "\\t";
    } else if (byte == '\r') {
      text += "\\r";
    } else if (byte == '\\') {
      text += "\\\\";
    } else if (byte >= 0x20 && byte < 0x7f) {
      text += static_cast<char>(byte);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      text += hex;
    }
  }
  return text;
}

std::string OneLineMessage(std::string_view message) {
  // A word (a path, a value) longer than kMaxWord keeps its start and its end (a path's file name).
  constexpr size_t kMaxWord = 120, kHead = 50, kTail = 60;
  std::string shortened;
  for (size_t begin = 0; begin < message.size();) {
    const size_t end = std::min(message.find(' ', begin), message.size());
    const std::string_view word = message.substr(begin, end - begin);
    if (word.size() > kMaxWord) {
      shortened += std::string(word.substr(0, kHead)) + "..." +
                   std::string(word.substr(word.size() - kTail));
    } else {
      shortened += std::string(word);
    }
    if (end < message.size()) shortened += ' ';
    begin = end + 1;
  }
  std::string text;
  for (const char raw : shortened) {
    const auto byte = static_cast<unsigned char>(raw);
    if (byte >= 0x20 && byte != 0x7f) {
      text += raw;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", byte);
    text += hex;
  }
  return text;
}

std::string DescribeJsonValue(const nlohmann::json& value, size_t max_chars) {
  // Dumping a huge array only to cut it to 60 characters costs its whole size; summarise instead.
  constexpr size_t kMaxDumpedElements = 16;
  if (value.is_array() && value.size() > kMaxDumpedElements) {
    return "an array of " + std::to_string(value.size()) + " values";
  }
  if (value.is_object() && value.size() > kMaxDumpedElements) {
    return "an object with " + std::to_string(value.size()) + " fields";
  }
  const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= max_chars) return EscapeForMessage(text, max_chars);
  return EscapeForMessage(text.substr(0, max_chars - 3), max_chars - 3) + "...";
}

std::string Reworded(std::string message,
                     const std::vector<std::pair<std::string, std::string>>& replacements) {
  for (const auto& [from, to] : replacements) {
    if (from.empty()) continue;
    for (size_t at = message.find(from); at != std::string::npos;
         at = message.find(from, at + to.size())) {
      message.replace(at, from.size(), to);
    }
  }
  return message;
}

}  // namespace moelab::base
