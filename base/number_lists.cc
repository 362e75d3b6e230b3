#include "base/number_lists.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "base/message_text.h"

namespace moelab::base {

int64_t ParseWholeNumber(const std::string& text, const std::string& option, int64_t minimum,
                         int64_t maximum, const std::string& also) {
  size_t used = 0;
  int64_t value = 0;
  bool parsed = !text.empty() && text.find_first_of(" \t\n") == std::string::npos;
  if (parsed) {
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      parsed = false;
    }
  }
  if (!parsed || used != text.size() || value < minimum || value > maximum) {
    throw Error("--" + option + " '" + EscapeForMessage(text) + "': expected a whole number in [" +
                std::to_string(minimum) + ", " + std::to_string(maximum) + "]" +
                (also.empty() ? "" : " or " + also));
  }
  return value;
}

std::vector<int64_t> ParseIntList(const std::string& text, const std::string& option,
                                  int64_t minimum) {
  auto fail = [&](const std::string& why) -> std::vector<int64_t> {
    throw Error("--" + option + " '" + EscapeForMessage(text) + "': " + why +
                " (expected e.g. 1,2,4 or 1-8 or 1-256:x2, values >= " + std::to_string(minimum) +
                ")");
  };
  auto parse_one = [&](const std::string& word) -> int64_t {
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      fail("'" + EscapeForMessage(word) + "' is not an integer");
    }
    if (used != word.size()) fail("'" + EscapeForMessage(word) + "' is not an integer");
    if (value < minimum) fail(std::to_string(value) + " is below " + std::to_string(minimum));
    return value;
  };
  std::vector<int64_t> values;
  // getline drops a last empty item: "1,2," read as 1,2 while ",1" was refused.
  if (!text.empty() && text.back() == ',') fail("empty item");
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) return fail("empty item");
    const size_t dash = item.find('-', 1);
    if (dash == std::string::npos) {
      values.push_back(parse_one(item));
      continue;
    }
    std::string end_text = item.substr(dash + 1);
    int64_t factor = 0;
    if (const size_t colon = end_text.find(":x"); colon != std::string::npos) {
      factor = parse_one(end_text.substr(colon + 2));
      if (factor < 2) fail("a geometric factor must be at least 2");
      end_text = end_text.substr(0, colon);
    }
    const int64_t begin = parse_one(item.substr(0, dash));
    const int64_t end = parse_one(end_text);
    if (end < begin) fail("range end below its start");
    if (factor > 0 && begin < 1) fail("a geometric range must start at 1 or more");
    for (int64_t v = begin;;) {
      values.push_back(v);
      if (values.size() > 100000) fail("more than 100000 values");
      // The next value would pass `end` (or int64: 1-9223372036854775807:x2 overflowed here).
      if (factor > 0 ? v > end / factor : v >= end) break;
      v = factor > 0 ? v * factor : v + 1;
    }
  }
  if (values.empty()) fail("no values");
  // A value twice gave its row twice (plan sd --batch 4,2,4), which a reader takes for two
  // different settings.
  std::vector<int64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    fail(std::to_string(*twice) + " is listed twice");
  return values;
}

double ParseNumber(const std::string& text, const std::string& option) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value)) {
    // A list where one value goes (plan sd --alpha 0.5,0.6): say that, not "not a number".
    const bool list = used > 0 && used < text.size() && (text[used] == ',' || text[used] == ':');
    throw Error("--" + option + " '" + EscapeForMessage(text) + "': expected a finite number" +
                (list ? " (one value here, not a list or range)" : ""));
  }
  return value;
}

std::vector<double> ParseNumberList(const std::string& text, const std::string& option) {
  std::vector<double> values;
  if (std::count(text.begin(), text.end(), ':') == 2) {
    const size_t first = text.find(':');
    const size_t second = text.find(':', first + 1);
    const double start = ParseNumber(text.substr(0, first), option);
    const double stop = ParseNumber(text.substr(first + 1, second - first - 1), option);
    const double step = ParseNumber(text.substr(second + 1), option);
    const std::string quoted = "--" + option + " '" + EscapeForMessage(text) + "': ";
    if (!(step > 0)) throw Error(quoted + "expected start:stop:step with step > 0");
    if (stop < start)
      throw Error(quoted + "expected start:stop:step with start <= stop (the values rise by step)");
    // Counted in double first: (stop - start) / step can be far beyond int64 (0.5:1e300:1e-300).
    const double steps = std::floor((stop - start) / step + 1e-9);
    if (!(steps < 100000)) throw Error(quoted + "more than 100000 values");
    const int64_t count = static_cast<int64_t>(steps) + 1;
    for (int64_t i = 0; i < count; ++i) values.push_back(start + static_cast<double>(i) * step);
    return values;
  }
  if (!text.empty() && text.back() == ',')  // getline drops a last empty item
    throw Error("--" + option + " '" + EscapeForMessage(text) + "': empty item");
  std::stringstream stream(text);
  std::string item;
  std::vector<std::string> items;
  while (std::getline(stream, item, ',')) {
    values.push_back(ParseNumber(item, option));
    items.push_back(item);
  }
  if (values.empty()) throw Error("--" + option + " '" + EscapeForMessage(text) + "': no values");
  // Compared as numbers: 0.8 and 0.80 are one value.
  std::vector<size_t> order(values.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (values[order[i - 1]] == values[order[i]]) {
      throw Error("--" + option + " '" + EscapeForMessage(text) +
                  "': " + EscapeForMessage(items[order[i - 1]]) + " is listed twice");
    }
  }
  return values;
}

}  // namespace moelab::base
