#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moelab::server {

// Text to token ids and back for models served without a tokenizer of their own (synthetic
// weights; also --weights, whose tokenizer moelab does not read). Deterministic and documented
// (docs/serving.md), not a language model's tokenizer:
//  - TokenizeBytes: every UTF-8 byte b of the text is one token, id b mod vocab (bytes are
//    0..255, so ids keep the byte itself when the vocabulary has 256 or more ids).
//  - DetokenizeToken: an id in [32, 127) is that printable ASCII character; every other id is
//    written "<ID>" (e.g. "<3>", "<4711>"), so any id gives valid UTF-8 text.
std::vector<int32_t> TokenizeBytes(std::string_view text, int64_t vocab);
std::string DetokenizeToken(int32_t id);
std::string Detokenize(const std::vector<int32_t>& ids);

}  // namespace moelab::server
