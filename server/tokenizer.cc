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
  // Appended piece by piece: "<" + to_string(id) trips g++ 12's -Wrestrict false positive.
  std::string text(1, '<');
  text += std::to_string(id);
  text += '>';
  return text;
}

std::string Detokenize(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += DetokenizeToken(id);
  return text;
}

}  // namespace moelab::server
