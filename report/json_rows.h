#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "report/row_set.h"

namespace moelab::report {

// CSV rows out of a result that is already JSON, so the CSV carries exactly the JSON's numbers: a
// row is one object's scalar leaves, each a column keyed by its dotted path ("model.name",
// "sd.speedup"). Arrays are left out of a row (a result's arrays are its own rows).
//
// One row per object; the columns are the union of the objects' paths in first-seen order, and a
// path an object lacks is null (an empty CSV field).
RowSet JsonRows(const std::vector<nlohmann::json>& objects);
// One row per element of a JSON array of objects.
RowSet JsonArrayRows(const nlohmann::json& array);
// One row: the object's scalar leaves.
RowSet JsonRow(const nlohmann::json& object);

}  // namespace moelab::report
