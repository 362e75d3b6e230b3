#include "server/tokenizer.h"

namespace moelab::server {

std::vector<int32_t> TokenizeBytes(std::string_view text, int64_t vocab) {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (const char c : text)
    ids.push_back(static_cast<int32_t>(static_cast<unsigned char>(c) % vocab));
  return ids;
}

std::string DetokenizeToken(int32_t id) {
  if (id >= 32 && id < 127) return std::string(1, static_cast<char>(id));
  return "<" + std::to_string(id) + ">";
}

std::string Detokenize(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += DetokenizeToken(id);
  return text;
}

}  // namespace moelab::server
