#include "cli/output.h"

#include "base/atomic_file.h"
#include "base/error.h"

namespace moelab::cli {

void AddOutputOptions(po::options_description& options) {
  options.add_options()("json", po::bool_switch(), "print JSON")("csv", po::bool_switch(),
                                                                 "print the result's rows as CSV")(
      "out", po::value<std::string>()->default_value(""),
      "write the output (JSON unless --csv) to this file, atomically");
}

OutputRequest OutputRequestFrom(const po::variables_map& values) {
  OutputRequest request;
  request.out = values["out"].as<std::string>();
  // Before the command's work: a load, a profile or a validation of minutes is not thrown away
  // at the end for a folder that is not there.
  if (!request.out.empty()) base::CheckWritableOutput(request.out);
  const bool json = values["json"].as<bool>(), csv = values["csv"].as<bool>();
  if (json && csv) throw base::Error("give --json or --csv, not both");
  request.format = csv                              ? Format::kCsv
                   : (json || !request.out.empty()) ? Format::kJson
                                                    : Format::kTable;
  return request;
}

void EmitResult(const OutputRequest& request, const nlohmann::json& json, const std::string& text) {
  EmitResult(request, json, text,
             request.format == Format::kCsv ? report::JsonRow(json) : report::RowSet({}));
}

std::string PrintedResult(const OutputRequest& request, const nlohmann::json& json,
                          const std::string& text, const report::RowSet& rows) {
  return request.format == Format::kCsv    ? rows.ToCsv()
         : request.format == Format::kJson ? json.dump(2) + "\n"
                                           : text;
}

void EmitResult(const OutputRequest& request, const nlohmann::json& json, const std::string& text,
                const report::RowSet& rows) {
  report::Emit(PrintedResult(request, json, text, rows), request.out);
}

}  // namespace moelab::cli
