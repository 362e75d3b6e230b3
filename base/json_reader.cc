#include "base/json_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "base/error.h"
#include "base/limits.h"
#include "base/units.h"
#include "base/input_file.h"
#include "base/message_text.h"

namespace moelab::base {
namespace {

std::string Describe(const nlohmann::json& value) { return DescribeJsonValue(value); }

// One open container while pre-scanning: the field path of the value being read.
struct Frame {
  bool object = false;
  bool expect_key = false;
  std::string key;
  size_t index = 0;
  std::unordered_set<std::string> keys;  // an object's keys so far: a repeated one is refused
};

std::string FieldPath(const std::vector<Frame>& stack) {
  std::string path;
  for (const Frame& frame : stack) {
    if (frame.object) {
      path += (path.empty() ? "" : ".") + EscapeForMessage(frame.key, 40);
    } else {
      path += "[" + std::to_string(frame.index) + "]";
    }
  }
  if (path.size() > 80) path = path.substr(0, 77) + "...";
  return path.empty() ? "top level" : "field '" + path + "'";
}

// Checks what nlohmann's parser handles badly before it runs: nesting depth (its recursive dump
// and error paths) and numbers beyond a double (an out_of_range exception without a field name).
// Syntax is left to the parser: this scan only tracks containers, strings and number tokens.
void PreScan(std::string_view text, const std::string& origin, const std::string& kind) {
  std::vector<Frame> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t begin = ++i;
      while (i < text.size() && text[i] != '"') i += (text[i] == '\\') ? 2 : 1;
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        stack.back().key = std::string(text.substr(begin, std::min(i, text.size()) - begin));
        stack.back().expect_key = false;
        // The parser keeps a repeated key's last value without a word; which one the user meant
        // is theirs to say.
        if (!stack.back().keys.insert(stack.back().key).second) {
          throw Error(origin + ": " + FieldPath(stack) + ": key repeated in its object (" + kind +
                      " keys must be unique)");
        }
      }
    } else if (c == '{' || c == '[') {
      if (static_cast<int>(stack.size()) >= kMaxJsonDepth) {
        throw Error(origin + ": " + kind + " nested deeper than " + std::to_string(kMaxJsonDepth) +
                    " levels at byte " + std::to_string(i) + " (" + FieldPath(stack) +
                    "): refused (moelab files nest a few levels)");
      }
      stack.push_back(Frame{c == '{', c == '{', "", 0, {}});
    } else if (c == '}' || c == ']') {
      if (stack.empty()) return;  // unbalanced: the parser reports where
      stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().object) {
          stack.back().expect_key = true;
        } else {
          ++stack.back().index;
        }
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t begin = i;
      while (i + 1 < text.size() && std::strchr("0123456789+-.eE", text[i + 1]) != nullptr) ++i;
      const std::string token(text.substr(begin, i + 1 - begin));
      if (token.size() > 15 || token.find_first_of("eE") != std::string::npos) {
        const double value = std::strtod(token.c_str(), nullptr);
        if (std::isinf(value)) {
          throw Error(origin + ": " + FieldPath(stack) + ": number " + EscapeForMessage(token, 40) +
                      " is beyond the range of a double (about 1.8e308)");
        }
      }
    }
  }
}

}  // namespace

nlohmann::json ParseJsonText(std::string_view text, const std::string& origin,
                             std::string_view kind) {
  PreScan(text, origin, std::string(kind));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": malformed " + std::string(kind) + ": " +
                EscapeForMessage(e.what(), 240));
  }
}

JsonReader::JsonReader(const nlohmann::json& object, std::string origin, std::string path)
    : object_(&object), origin_(std::move(origin)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw Error(origin_ + ": " + (path_.empty() ? "top level" : "field '" + path_ + "'") +
                ": expected a JSON object, got " + Describe(object));
  }
}

nlohmann::json JsonReader::ParseFile(const std::filesystem::path& file) {
  return ParseJsonText(ReadInputFile(file, kMaxJsonFileBytes, "JSON file"), file.string());
}

std::string JsonReader::FieldName(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonReader::Fail(std::string_view key, std::string_view expected) const {
  std::string message =
      origin_ + ": field '" + FieldName(key) + "': expected " + std::string(expected);
  if (object_->contains(key)) message += ", got " + Describe((*object_)[std::string(key)]);
  throw Error(message);
}

bool JsonReader::Has(std::string_view key) const {
  asked_->emplace(key);
  return object_->contains(key) && !(*object_)[std::string(key)].is_null();
}

const nlohmann::json& JsonReader::Get(std::string_view key) const {
  asked_->emplace(key);
  if (!object_->contains(key)) {
    throw Error(origin_ + ": missing required field '" + FieldName(key) + "'");
  }
  return (*object_)[std::string(key)];
}

void JsonReader::RefuseUnknownFields(std::string_view format) const {
  for (const auto& [key, value] : object_->items()) {
    if (asked_->find(key) == asked_->end()) {
      throw Error(origin_ + ": field '" + EscapeForMessage(FieldName(key), 80) +
                  "': unknown (not a field of " + std::string(format) +
                  " here; misspelt, or of another kind of object?)");
    }
  }
}

JsonReader JsonReader::Object(std::string_view key) const {
  const nlohmann::json& value = Get(key);
  if (!value.is_object()) Fail(key, "an object");
  return JsonReader(value, origin_, FieldName(key));
}

std::optional<JsonReader> JsonReader::OptionalObject(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  return Object(key);
}

std::string JsonReader::String(std::string_view key) const {
  const nlohmann::json& value = Get(key);
  if (!value.is_string()) Fail(key, "a string");
  return value.get<std::string>();
}

std::string JsonReader::String(std::string_view key, const std::string& fallback) const {
  return Has(key) ? String(key) : fallback;
}

bool JsonReader::Bool(std::string_view key) const {
  const nlohmann::json& value = Get(key);
  if (!value.is_boolean()) Fail(key, "true or false");
  return value.get<bool>();
}

bool JsonReader::Bool(std::string_view key, bool fallback) const {
  return Has(key) ? Bool(key) : fallback;
}

int64_t JsonReader::Int(std::string_view key, int64_t minimum) const {
  const nlohmann::json& value = Get(key);
  const std::string expected = "an integer >= " + std::to_string(minimum);
  int64_t result = 0;
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail(key, expected);
    }
    result = value.get<int64_t>();
  } else if (value.is_number_float()) {
    // Accept 4.67e10-style integers written as floats, but only when exactly whole.
    const double number = value.get<double>();
    if (!std::isfinite(number) || number != std::floor(number) || std::fabs(number) > 9.0e18) {
      Fail(key, expected);
    }
    result = static_cast<int64_t>(number);
  } else {
    Fail(key, expected);
  }
  if (result < minimum) Fail(key, expected);
  return result;
}

int64_t JsonReader::Int(std::string_view key, int64_t minimum, int64_t fallback) const {
  return Has(key) ? Int(key, minimum) : fallback;
}

int64_t JsonReader::Count(std::string_view key, int64_t minimum, int64_t maximum) const {
  const int64_t count = Int(key, minimum);
  if (count > maximum) {
    Fail(key, "an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum) +
                  " (docs/limits.md)");
  }
  return count;
}

double JsonReader::Seconds(std::string_view key) const {
  const double seconds = Number(key, 0.0, true);
  if (seconds > kMaxSeconds) Fail(key, "at most 1e+06 seconds (docs/limits.md)");
  return seconds;
}

double JsonReader::Seconds(std::string_view key, double fallback) const {
  return Has(key) ? Seconds(key) : fallback;
}

double JsonReader::BytesPerSecond(std::string_view key) const {
  const double rate = Number(key, 0.0);
  if (rate > kMaxBytes) Fail(key, "at most 2^60 bytes per second (docs/limits.md)");
  return rate;
}

double JsonReader::Number(std::string_view key, double exclusive_minimum, bool allow_equal) const {
  const nlohmann::json& value = Get(key);
  std::ostringstream expected;
  expected << "a finite number " << (allow_equal ? ">= " : "> ") << exclusive_minimum;
  if (!value.is_number()) Fail(key, expected.str());
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < exclusive_minimum ||
      (!allow_equal && number == exclusive_minimum)) {
    Fail(key, expected.str());
  }
  return number;
}

double JsonReader::Number(std::string_view key, double exclusive_minimum, bool allow_equal,
                          double fallback) const {
  return Has(key) ? Number(key, exclusive_minimum, allow_equal) : fallback;
}

}  // namespace moelab::base
