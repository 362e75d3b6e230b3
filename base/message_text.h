#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::base {

// Input bytes as they may appear in a user-facing message: printable ASCII kept, everything else
// (control bytes, escape sequences, non-ASCII) written as \n, \t, \r or \xNN, and the result capped
// at about `max_chars` characters with "..." marking the cut. Every message that quotes bytes read
// from a file or the command line goes through this, so no input can drive the terminal.
std::string EscapeForMessage(std::string_view bytes, size_t max_chars = 80);

// A whole message made safe for one terminal line: control bytes (newlines included) and DEL as
// \xNN, everything else kept (a message's own quoting is already escaped; this is the last net
// for a path or value some message did not pass through EscapeForMessage), and a word (a path)
// over 120 characters shortened to its first 50 and last 60 around "...".
std::string OneLineMessage(std::string_view message);

// A JSON value quoted for a message: scalars and small containers dumped (then escaped and capped),
// large containers summarised by their size. Never recurses more than the parser's depth limit.
std::string DescribeJsonValue(const nlohmann::json& value, size_t max_chars = 60);

// A library's message in the words of the command at hand: every occurrence of each `from` replaced
// by its `to`, in order (a policy shared by several commands names the simulator's
// --accelerator-memory; `plan offload` calls it --memory, `run --offload` --expert-memory).
std::string Reworded(std::string message,
                     const std::vector<std::pair<std::string, std::string>>& replacements);

}  // namespace moelab::base
