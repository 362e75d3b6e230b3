// `moelab profile` as a user runs it: bad input gives one clear line, a non-zero exit status and
// no file, before any measuring starts.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

using testing::CliRun;
using testing::RunMoelab;
using testing::Slurp;

TEST(ProfileCli, HelpListsTheOptions) {
  const CliRun r = RunMoelab("profile --help");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* option :
       {"--model", "--quick", "--out", "--threads", "--json", "--csv", "--quiet", "--hidden",
        "--experts", "--top-k", "--kv-heads", "--head-dim", "--vocab"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
}

struct BadInput {
  std::string args;
  std::string expected_message;
};

class ProfileCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(ProfileCliBadInput, ClearErrorNonZeroExitNoFile) {
  const std::filesystem::path dir = testing::MakeTempDir("profile-cli-bad");
  std::string args = GetParam().args;
  const std::string placeholder = "OUT";
  if (const size_t at = args.find(placeholder); at != std::string::npos) {
    args.replace(at, placeholder.size(), (dir / "profile.json").string());
  }
  const CliRun r = RunMoelab(args);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(GetParam().expected_message), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "no file, no temporary left behind";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, ProfileCliBadInput,
    ::testing::Values(
        BadInput{"profile --model mixtral-8x8b --quick --out OUT", "did you mean 'mixtral-8x7b'"},
        BadInput{"profile --quick --out /nonexistent-folder/profile.json", "does not exist"},
        BadInput{"profile --quick --hidden 0 --out OUT", "--hidden must be at least 1, got 0"},
        BadInput{"profile --quick --experts -8 --out OUT", "--experts must be at least 1, got -8"},
        BadInput{"profile --quick --top-k 9 --out OUT", "top_k"},
        BadInput{"profile --quick --threads -2 --out OUT", "--threads"},
        BadInput{"profile --quick", "--out is required"},
        BadInput{"profile --quick --no-such-option --out OUT", "unrecognised option"},
        BadInput{"profile --quick --json --csv --out OUT", "give --json or --csv, not both"}));

}  // namespace
}  // namespace moelab::profiler
