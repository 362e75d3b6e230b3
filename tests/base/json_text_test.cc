// ParseJsonText and the message helpers: deep nesting refused (no crash), numbers beyond a double
// named by field, input bytes in messages escaped and capped.
#include "base/json_reader.h"

#include <string>

#include <gtest/gtest.h>

#include "base/message_text.h"
#include "tests/support/error_of.h"

namespace moelab::base {
namespace {

using testing::ErrorOf;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(JsonText, HundredThousandNestedBracketsAreRefusedWithoutACrash) {
  const std::string deep(100000, '[');
  const std::string error = ErrorOf([&] { ParseJsonText(deep, "deep.json"); });
  EXPECT_TRUE(Contains(error, "deep.json: JSON nested deeper than 256 levels")) << error;
  // Closed and inside an object field: the same refusal, with the field path so far.
  const std::string closed = "{\"a\": " + std::string(300, '[') + std::string(300, ']') + "}";
  EXPECT_TRUE(Contains(ErrorOf([&] { ParseJsonText(closed, "x.json"); }), "field 'a[0]"));
  EXPECT_NO_THROW(ParseJsonText(std::string(200, '[') + std::string(200, ']'), "ok.json"));
}

TEST(JsonText, ANumberBeyondADoubleNamesItsField) {
  const std::string error =
      ErrorOf([] { ParseJsonText(R"({"model": {"layers": [1, 2, 1e400]}})", "c.json"); });
  EXPECT_TRUE(Contains(
      error, "c.json: field 'model.layers[2]': number 1e400 is beyond the range of a double"))
      << error;
  EXPECT_TRUE(Contains(ErrorOf([] { ParseJsonText("[" + std::string(400, '9') + "]", "d.json"); }),
                       "d.json: field '[0]'"));
  EXPECT_NO_THROW(ParseJsonText(R"({"tiny": 1e-400, "big": 1.7e308, "s": "1e400"})", "ok.json"));
}

TEST(JsonText, ParserMessagesAreEscaped) {
  const std::string error = ErrorOf([] { ParseJsonText("{\"a\": \x1b[31m}", "e.json"); });
  EXPECT_TRUE(Contains(error, "e.json: malformed JSON")) << error;
  EXPECT_FALSE(Contains(error, "\x1b")) << error;
}

TEST(JsonText, FieldValuesInMessagesAreEscapedAndCapped) {
  const nlohmann::json json = ParseJsonText(
      "{\"name\": 5, \"kind\": \"\\u001b[2J" + std::string(500, 'x') + "\"}", "f.json");
  const JsonReader reader(json, "f.json");
  const std::string error = ErrorOf([&] { reader.Int("kind", 0); });
  EXPECT_FALSE(Contains(error, "\x1b")) << error;
  EXPECT_LT(error.size(), 200u) << error;
  EXPECT_EQ(EscapeForMessage("a\x1b[0m\n\xff"), "a\\x1b[0m\\n\\xff");
  EXPECT_EQ(EscapeForMessage(std::string(100, 'y'), 10), "yyyyyyyyyy...");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json::array({1, 2})), "[1,2]");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json(std::vector<int>(1000, 1))),
            "an array of 1000 values");
}

TEST(JsonText, AFileIsReadThroughTheBoundedReader) {
  EXPECT_TRUE(
      Contains(ErrorOf([] { JsonReader::ParseFile("/dev/zero"); }), "must be a regular file"));
}

}  // namespace
}  // namespace moelab::base
