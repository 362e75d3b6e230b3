#include "cli/output.h"

#include "base/error.h"

namespace moelab::cli {

void AddOutputOptions(po::options_description& options) {
  options.add_options()
      ("json", po::bool_switch(), "print JSON")
      ("csv", po::bool_switch(), "print the result's rows as CSV")
      ("out", po::value<std::string>()->default_value(""), "write the output (JSON unless --csv) to this file, atomically");
}

OutputRequest OutputRequestFrom(const po::variables_map& values) {
  OutputRequest request;
  request.out = values["out"].as<std::string>();
  const bool json = values["json"].as<bool>(), csv = values["csv"].as<bool>();
  if (json && csv) throw Error("give --json or --csv, not both");
  request.format = csv ? report::Format::kCsv : (json || !request.out.empty()) ? report::Format::kJson : report::Format::kTable;
  return request;
}

}  // namespace moelab::cli
