#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace moelab::base {

// No moelab file nests more than a handful of levels; the bound keeps recursion (parsing, dumping,
// destroying) far from the stack's limit whatever the input.
inline constexpr int kMaxJsonDepth = 256;

// Parses JSON text from `origin` (a file name, used in messages). Refused with a moelab::Error that
// names `origin`: malformed text (the parser's message, escaped), nesting deeper than
// kMaxJsonDepth, and a number outside a double's range (1e400), naming its field path. `kind` names
// the text in messages ("malformed <kind>").
nlohmann::json ParseJsonText(std::string_view text, const std::string& origin,
                             std::string_view kind = "JSON");

// Reads fields of a JSON object with errors that name the file, the field path and what was
// expected. A required field that is missing is an error; an optional field has its default
// stated at the call site (never guessed here).
class JsonReader {
 public:
  // `origin` names where the JSON came from (a file path), `path` the object's field path.
  JsonReader(const nlohmann::json& object, std::string origin, std::string path = "");

  // Reads a regular file of at most kMaxJsonFileBytes (base/input_file.h) and parses it with
  // ParseJsonText.
  static nlohmann::json ParseFile(const std::filesystem::path& file);

  bool Has(std::string_view key) const;
  JsonReader Object(std::string_view key) const;
  std::optional<JsonReader> OptionalObject(std::string_view key) const;

  std::string String(std::string_view key) const;
  std::string String(std::string_view key, const std::string& fallback) const;
  bool Bool(std::string_view key) const;
  bool Bool(std::string_view key, bool fallback) const;
  // Integers must be whole numbers within range; `minimum` is inclusive.
  int64_t Int(std::string_view key, int64_t minimum) const;
  int64_t Int(std::string_view key, int64_t minimum, int64_t fallback) const;
  // An integer in [minimum, maximum]: a count with a named bound (base/limits.h, docs/limits.md).
  int64_t Count(std::string_view key, int64_t minimum, int64_t maximum) const;
  // Seconds: finite, >= 0 and at most kMaxSeconds (base/limits.h).
  double Seconds(std::string_view key) const;
  double Seconds(std::string_view key, double fallback) const;
  // A rate in bytes per second: finite, > 0 and at most 2^60 (1 EiB/s, kMaxBytes per second).
  double BytesPerSecond(std::string_view key) const;
  // Finite numbers strictly greater than `exclusive_minimum` unless `allow_equal`.
  double Number(std::string_view key, double exclusive_minimum, bool allow_equal = false) const;
  double Number(std::string_view key, double exclusive_minimum, bool allow_equal,
                double fallback) const;

  // Refuses a field of this object that no call above asked for (Has, a getter, Object): a
  // misspelt field ("first_dense_layer") was ignored and its default taken without a word.
  // `format` names what the object is ("moelab.model/1") in the message. Call it after reading.
  void RefuseUnknownFields(std::string_view format) const;

  const nlohmann::json& json() const { return *object_; }
  const std::string& origin() const { return origin_; }
  std::string FieldName(std::string_view key) const;
  [[noreturn]] void Fail(std::string_view key, std::string_view expected) const;

 private:
  const nlohmann::json& Get(std::string_view key) const;

  const nlohmann::json* object_;
  std::string origin_;
  std::string path_;
  // The keys asked for so far, shared by the copies of this reader.
  std::shared_ptr<std::set<std::string, std::less<>>> asked_ =
      std::make_shared<std::set<std::string, std::less<>>>();
};

}  // namespace moelab::base
