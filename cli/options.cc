#include "cli/options.h"

#include <iostream>

#include "base/error.h"
#include "report/format.h"

namespace moelab::cli {

bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional) {
      parser.positional(*positional);
    } else {
      parser.positional(po::positional_options_description());
    }
    po::store(parser.run(), values);
    if (values.count("help")) {
      std::cout << usage << "\n\n" << all << "\n";
      return false;
    }
    po::notify(values);
  } catch (const po::error& e) {
    throw base::Error(std::string(e.what()) + " (see --help)");
  }
  return true;
}

po::typed_value<std::string>* NumberInto(double* field, const std::string& name) {
  return ParsedInto(field, report::ShortestText(*field),
                    [name](const std::string& text) { return base::ParseNumber(text, name); });
}

po::typed_value<std::string>* NumberInto(std::optional<double>* field, const std::string& name) {
  return ParsedIntoOptional(
      field, [name](const std::string& text) { return base::ParseNumber(text, name); });
}

std::vector<std::string> SplitNameList(const std::string& text, const std::string& name) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    names.push_back(text.substr(start, comma - start));
    if (names.back().empty())
      throw base::Error("--" + name + " " + text + ": empty item in the comma-separated list");
    start = comma + 1;
  }
  return names;
}

}  // namespace moelab::cli
