#include "sweep/command_csv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "base/error.h"

namespace moelab::sweep {
namespace {

struct Record {
  std::vector<std::string> fields;
  std::string text;
};

// Reads the records of `csv` (each ending in a newline outside quotes).
std::vector<Record> Records(const std::string& csv) {
  std::vector<Record> records;
  Record record;
  std::string field;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (quoted) {
      if (c != '"') {
        field += c;
      } else if (i + 1 < csv.size() && csv[i + 1] == '"') {
        field += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      record.fields.push_back(std::move(field));
      field.clear();
      record.text = csv.substr(start, i - start);
      records.push_back(std::move(record));
      record = Record();
      start = i + 1;
    } else {
      field += c;
    }
  }
  if (quoted) throw base::Error("the command's CSV has an unterminated quote");
  if (start != csv.size()) throw base::Error("the command's CSV does not end in a newline");
  return records;
}

bool IsDecimalNumber(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-'))
    return false;
  return text.find_first_not_of("0123456789+-.eE") == std::string::npos;
}

}  // namespace

CommandCsv ParseCommandCsv(const std::string& csv) {
  std::vector<Record> records = Records(csv);
  if (records.empty()) throw base::Error("the command printed no CSV header");
  CommandCsv parsed;
  parsed.header_line = records[0].text;
  parsed.columns = records[0].fields;
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].fields.size() != parsed.columns.size()) {
      throw base::Error("the command's CSV row " + std::to_string(r) + " has " +
                        std::to_string(records[r].fields.size()) + " fields, its header " +
                        std::to_string(parsed.columns.size()));
    }
    parsed.rows.push_back(std::move(records[r].fields));
    parsed.row_lines.push_back(std::move(records[r].text));
  }
  return parsed;
}

void DropColumns(CommandCsv& csv, const std::vector<std::string>& names) {
  std::vector<size_t> kept;
  for (size_t c = 0; c < csv.columns.size(); ++c) {
    if (std::find(names.begin(), names.end(), csv.columns[c]) == names.end()) kept.push_back(c);
  }
  if (kept.size() == csv.columns.size()) return;
  const auto join = [&](const std::vector<std::string>& fields) {
    std::string line;
    for (size_t k = 0; k < kept.size(); ++k) line += (k ? "," : "") + CsvText(fields[kept[k]]);
    return line;
  };
  const auto select = [&](const std::vector<std::string>& fields) {
    std::vector<std::string> selected;
    for (const size_t c : kept) selected.push_back(fields[c]);
    return selected;
  };
  csv.header_line = join(csv.columns);
  csv.columns = select(csv.columns);
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    csv.row_lines[r] = join(csv.rows[r]);
    csv.rows[r] = select(csv.rows[r]);
  }
}

std::vector<std::string> SplitCsvHeader(const std::string& header_line) {
  const std::vector<Record> records = Records(header_line + "\n");
  return records.empty() ? std::vector<std::string>() : records[0].fields;
}

std::string CsvText(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (const char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

nlohmann::ordered_json CellJson(const std::string& field) {
  if (field.empty()) return nullptr;
  if (field == "true") return true;
  if (field == "false") return false;
  if (IsDecimalNumber(field)) {
    int64_t integer = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), integer);
    if (error == std::errc() && end == field.data() + field.size()) return integer;
    char* stop = nullptr;
    const double number = std::strtod(field.c_str(), &stop);
    if (stop == field.c_str() + field.size() && std::isfinite(number)) return number;
  }
  return field;
}

std::string Relayout(const std::string& csv_rows, size_t prefix_fields, const std::string& header,
                     const std::vector<std::string>& columns) {
  const std::vector<std::string> own = SplitCsvHeader(header);
  std::string laid_out;
  for (const Record& record : Records(csv_rows)) {
    // A shard file's rows are read back here: one short of its header is refused, not read past.
    if (record.fields.size() != prefix_fields + own.size()) {
      throw base::Error("a row of " + std::to_string(record.fields.size()) + " fields where " +
                        std::to_string(prefix_fields) + " grid fields and the header's " +
                        std::to_string(own.size()) + " columns were expected");
    }
    std::string line;
    for (size_t i = 0; i < prefix_fields; ++i) line += (i ? "," : "") + CsvText(record.fields[i]);
    for (const std::string& column : columns) {
      const auto at = std::find(own.begin(), own.end(), column);
      line += ",";
      if (at != own.end()) line += CsvText(record.fields[prefix_fields + (at - own.begin())]);
    }
    laid_out += line + "\n";
  }
  return laid_out;
}

}  // namespace moelab::sweep
