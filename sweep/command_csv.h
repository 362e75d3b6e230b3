#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::sweep {

// A prediction command's CSV (report::RowSet::ToCsv: RFC 4180 quoting, numbers to 17 significant
// digits, null as an empty field, booleans as true/false) read back into its fields, each record
// also kept as the exact text it was printed as, so that the sweep's CSV copies it unchanged.
struct CommandCsv {
  std::string header_line;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // fields unquoted
  std::vector<std::string> row_lines;          // the records as printed, without the newline
};

// Refused (base::Error): no header, a record whose field count differs from the header's, an
// unterminated quote.
CommandCsv ParseCommandCsv(const std::string& csv);
std::vector<std::string> SplitCsvHeader(const std::string& header_line);
// Removes the columns named `names` (those present), the header and row lines rebuilt from the
// remaining fields.
void DropColumns(CommandCsv& csv, const std::vector<std::string>& names);

// A field as CSV prints it (quoted when it holds a comma, quote or line break).
std::string CsvText(const std::string& field);
// A CSV field as the JSON value it printed: empty -> null, true/false -> boolean, a decimal
// integer that fits int64 -> integer, a decimal number -> number, anything else -> string.
nlohmann::ordered_json CellJson(const std::string& field);

// `csv_rows` (records of `prefix_fields` sweep fields, then the fields of `header`) laid out on
// `columns` instead: fields of columns the header lacks are empty.
std::string Relayout(const std::string& csv_rows, size_t prefix_fields, const std::string& header,
                     const std::vector<std::string>& columns);

}  // namespace moelab::sweep
