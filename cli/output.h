#pragma once

// What the command files print with: report/ (the row-set printer, formats, provenance).
#include "report/format.h"
#include "report/json_rows.h"
#include "report/provenance.h"
#include "report/row_set.h"

namespace moelab::cli {

using report::EmitJson;
using report::Format;
using report::FormatBytes;
using report::FormatCount;
using report::FormatNumber;
using report::FormatSeconds;
using report::Provenance;
using report::SetCommandLine;
using report::Table;

}  // namespace moelab::cli

#include <string>

#include "cli/options.h"

namespace moelab::cli {

// --json, --csv and --out FILE, the same for every command with a result: --out without a format
// writes JSON (atomically).
struct OutputRequest {
  report::Format format = report::Format::kTable;
  std::string out;
};
void AddOutputOptions(po::options_description& options);
OutputRequest OutputRequestFrom(const po::variables_map& values);

// Prints `text` (the table), or `json` (--json; written atomically to --out), or with --csv
// `rows` (default: the JSON's scalar leaves as one row, report/json_rows.h), so the CSV carries
// the JSON's numbers.
void EmitResult(const OutputRequest& request, const nlohmann::json& json, const std::string& text);
// What EmitResult prints, without printing it.
std::string PrintedResult(const OutputRequest& request, const nlohmann::json& json,
                          const std::string& text, const report::RowSet& rows);
void EmitResult(const OutputRequest& request, const nlohmann::json& json, const std::string& text,
                const report::RowSet& rows);

}  // namespace moelab::cli
