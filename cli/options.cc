#include "cli/options.h"

#include <iostream>

#include "base/error.h"

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

}  // namespace moelab::cli
