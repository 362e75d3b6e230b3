#include "base/json_reader.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace moelab {
namespace {

std::string Describe(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace

JsonReader::JsonReader(const nlohmann::json& object, std::string origin, std::string path)
    : object_(&object), origin_(std::move(origin)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw Error(origin_ + ": " + (path_.empty() ? "top level" : "field '" + path_ + "'") +
                ": expected a JSON object, got " + Describe(object));
  }
}

nlohmann::json JsonReader::ParseFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot open file for reading");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(file.string() + ": malformed JSON: " + e.what());
  }
}

std::string JsonReader::FieldName(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonReader::Fail(std::string_view key, std::string_view expected) const {
  std::string message = origin_ + ": field '" + FieldName(key) + "': expected " +
                        std::string(expected);
  if (object_->contains(key)) message += ", got " + Describe((*object_)[std::string(key)]);
  throw Error(message);
}

bool JsonReader::Has(std::string_view key) const {
  return object_->contains(key) && !(*object_)[std::string(key)].is_null();
}

const nlohmann::json& JsonReader::Get(std::string_view key) const {
  if (!object_->contains(key)) {
    throw Error(origin_ + ": missing required field '" + FieldName(key) + "'");
  }
  return (*object_)[std::string(key)];
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
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
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

}  // namespace moelab
