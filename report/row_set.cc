#include "report/row_set.h"

#include <charconv>
#include <cstdio>
#include <iostream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "report/format.h"

namespace moelab::report {
namespace {

std::string DefaultText(const Cell& cell) {
  if (const auto* b = std::get_if<bool>(&cell)) return *b ? "yes" : "no";
  if (const auto* i = std::get_if<int64_t>(&cell)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&cell)) return FormatNumber(*d, 3);
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  return "-";
}

std::string CsvField(const Cell& cell) {
  if (std::holds_alternative<std::monostate>(cell)) return "";
  if (const auto* b = std::get_if<bool>(&cell)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&cell)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&cell)) {
    // As printf's %.17g (the standard defines it so), without printf's format parsing: a sweep
    // renders every number of every point through here.
    char text[40];
    const auto end = std::to_chars(text, text + sizeof(text), *d, std::chars_format::general, 17);
    return std::string(text, end.ptr);
  }
  // RFC 4180: quote fields with separators, quotes or line breaks; double the quotes.
  const std::string& s = std::get<std::string>(cell);
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

nlohmann::json JsonOf(const Cell& cell) {
  if (const auto* b = std::get_if<bool>(&cell)) return *b;
  if (const auto* i = std::get_if<int64_t>(&cell)) return *i;
  if (const auto* d = std::get_if<double>(&cell)) return *d;
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  return nullptr;
}

}  // namespace

RowSet::RowSet(std::vector<Column> columns) : columns_(std::move(columns)) {
  for (Column& column : columns_) {
    if (!column.text) column.text = DefaultText;
  }
}

void RowSet::Add(std::vector<Cell> cells) {
  if (cells.size() != columns_.size()) {
    throw base::Error("row of " + std::to_string(cells.size()) + " cells for " +
                      std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

nlohmann::json RowSet::ToJson() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : rows_) {
    nlohmann::json object = nlohmann::json::object();
    for (size_t i = 0; i < columns_.size(); ++i) object[columns_[i].key] = JsonOf(row[i]);
    rows.push_back(std::move(object));
  }
  return rows;
}

std::string RowSet::ToCsv() const {
  std::string csv;
  // Appended piece by piece: `"," + CsvField(...)` (operator+ of a literal and a temporary) trips
  // GCC 12's -Wrestrict false positive (GCC bug 105329).
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i) csv += ',';
    csv += CsvField(columns_[i].key);
  }
  csv += "\n";
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) csv += ',';
      csv += CsvField(row[i]);
    }
    csv += "\n";
  }
  return csv;
}

std::string RowSet::ToTable() const {
  std::vector<std::string> header;
  for (const Column& column : columns_) {
    if (column.in_table) header.push_back(column.title);
  }
  Table table(header);
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < row.size(); ++i) {
      if (!columns_[i].in_table) continue;
      cells.push_back(std::holds_alternative<std::monostate>(row[i]) ? "-"
                                                                     : columns_[i].text(row[i]));
    }
    table.AddRow(cells);
  }
  return table.Render();
}

void Emit(const std::string& text, const std::string& out) {
  if (out.empty()) {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw base::Error("stdout: the output could not be written");
  } else {
    base::WriteFileAtomically(out, text);
  }
}

void EmitWith(const std::function<void(std::ostream&)>& write, const std::string& out) {
  if (out.empty()) {
    write(std::cout);
    std::cout.flush();
    if (!std::cout) throw base::Error("stdout: the output could not be written");
  } else {
    base::WriteFileAtomically(out, write);
  }
}

void EmitJson(const nlohmann::json& json, const std::string& out) {
  Emit(json.dump(2) + "\n", out);
}

}  // namespace moelab::report
