#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::report {

// One printer for every result that is a list of rows (google/benchmark's reporters are the
// model): a result declares its columns once and fills typed cells; the same rows print as a text
// table, a JSON array of objects, or CSV, so the three never disagree.
using Cell = std::variant<std::monostate, bool, int64_t, double, std::string>;  // monostate: null

struct Column {
  Column(std::string key_, std::string title_,
         std::function<std::string(const Cell&)> text_ = nullptr, bool in_table_ = true)
      : key(std::move(key_)),
        title(std::move(title_)),
        text(std::move(text_)),
        in_table(in_table_) {}

  std::string key;    // JSON key and CSV header
  std::string title;  // text-table header
  // Text-table rendering of a non-null cell (default: integers, "yes"/"no", numbers to 3 places).
  std::function<std::string(const Cell&)> text;
  bool in_table = true;  // false: JSON and CSV only (the text table stays narrow)
};

class RowSet {
 public:
  explicit RowSet(std::vector<Column> columns);

  // One cell per column, in column order. Error on a count mismatch.
  void Add(std::vector<Cell> cells);
  size_t size() const { return rows_.size(); }
  const std::vector<Column>& columns() const { return columns_; }

  nlohmann::json ToJson() const;  // [{key: value, ...}, ...]; null cells are JSON null
  std::string ToCsv() const;      // header of keys, then rows; numbers to 17 significant digits
  std::string ToTable() const;    // titles, then rows rendered by each column's `text`; null: "-"

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// Output formats a command's result prints in.
enum class Format { kTable, kJson, kCsv };

// Prints `text` to stdout, or writes it to `out` atomically when `out` is non-empty.
void Emit(const std::string& text, const std::string& out);
// The same for an output written piece by piece (one too large to hold twice: a sweep's rows).
void EmitWith(const std::function<void(std::ostream&)>& write, const std::string& out);
// JSON (indent 2, trailing newline) through Emit.
void EmitJson(const nlohmann::json& json, const std::string& out);

}  // namespace moelab::report
