#include "base/csv_fields.h"

#include <sstream>

namespace moelab::base {

std::string TrimCsvField(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  std::string field;
  while (std::getline(stream, field, ',')) fields.push_back(TrimCsvField(field));
  if (!line.empty() && line.back() == ',') fields.push_back("");
  return fields;
}

}  // namespace moelab::base
