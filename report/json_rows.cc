#include "report/json_rows.h"

#include <cstdint>
#include <map>
#include <string>

#include "base/error.h"

namespace moelab::report {
namespace {

Cell CellOf(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>();
  // Unsigned values past int64 (seeds) stay exact as text.
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return std::to_string(value.get<uint64_t>());
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return value.get<std::string>();
  return std::monostate{};
}

void Flatten(const nlohmann::json& value, const std::string& path,
             std::vector<std::pair<std::string, Cell>>& leaves) {
  if (value.is_array()) return;
  if (!value.is_object()) {
    leaves.emplace_back(path, CellOf(value));
    return;
  }
  for (const auto& [key, child] : value.items())
    Flatten(child, path.empty() ? key : path + "." + key, leaves);
}

}  // namespace

RowSet JsonRows(const std::vector<nlohmann::json>& objects) {
  std::vector<std::vector<std::pair<std::string, Cell>>> rows;
  std::vector<Column> columns;
  std::map<std::string, size_t> index;
  for (const nlohmann::json& object : objects) {
    if (!object.is_object())
      throw base::Error("JSON rows: expected objects, got " + std::string(object.type_name()));
    rows.emplace_back();
    Flatten(object, "", rows.back());
    for (const auto& [path, cell] : rows.back()) {
      if (index.emplace(path, columns.size()).second) columns.emplace_back(path, path);
    }
  }
  RowSet set(columns);
  for (const auto& leaves : rows) {
    std::vector<Cell> cells(columns.size());
    for (const auto& [path, cell] : leaves) cells[index.at(path)] = cell;
    set.Add(std::move(cells));
  }
  return set;
}

RowSet JsonArrayRows(const nlohmann::json& array) {
  if (!array.is_array())
    throw base::Error("JSON rows: expected an array, got " + std::string(array.type_name()));
  return JsonRows(std::vector<nlohmann::json>(array.begin(), array.end()));
}

RowSet JsonRow(const nlohmann::json& object) { return JsonRows({object}); }

}  // namespace moelab::report
