// ReadInputFile / RequireRegularFile: non-regular files refused before anything opens them (a FIFO
// never blocks), size caps stated, and the opt-in guard against writing over an input.
#include "base/input_file.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "base/atomic_file.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::base {
namespace {

using testing::ErrorOf;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(InputFile, AFifoIsRefusedWithoutBlocking) {
  const auto dir = testing::MakeTempDir("input-fifo");
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  const std::string error =
      ErrorOf([&] { ReadInputFile(dir / "pipe", 1000, "measurements file"); });
  EXPECT_TRUE(Contains(error, "measurements file must be a regular file, but this is a FIFO"))
      << error;
  std::filesystem::remove_all(dir);
}

TEST(InputFile, ADeviceAndAFolderAreRefused) {
  EXPECT_TRUE(
      Contains(ErrorOf([] { ReadInputFile("/dev/zero", 1000, "profile"); }), "a character device"));
  EXPECT_TRUE(Contains(ErrorOf([] { ReadInputFile("/tmp", 1000, "profile"); }), "a folder"));
}

TEST(InputFile, TheSizeCapIsStated) {
  const auto dir = testing::MakeTempDir("input-cap");
  WriteFileAtomically(dir / "big.csv", std::string(2000, 'x'));
  const std::string error =
      ErrorOf([&] { ReadInputFile(dir / "big.csv", 1000, "measurements file"); });
  EXPECT_TRUE(Contains(error, "2000 bytes, above the limit of 1000 bytes")) << error;
  EXPECT_EQ(ReadInputFile(dir / "big.csv", 2000, "measurements file").size(), 2000u);
  std::filesystem::remove_all(dir);
}

TEST(InputFile, AMissingFileNamesTheSystemReason) {
  const std::string error =
      ErrorOf([] { ReadInputFile("/nonexistent/x.json", 1000, "JSON file"); });
  EXPECT_TRUE(Contains(error, "No such file or directory")) << error;
}

TEST(InputFile, OutputsOverInputsAreRefusedOnceTheGuardIsOn) {
  const auto dir = testing::MakeTempDir("input-guard");
  WriteFileAtomically(dir / "in.json", std::string("{}"));
  ReadInputFile(dir / "in.json", 1000, "JSON file");
  WriteFileAtomically(dir / "in.json", std::string("{}"));  // guard off: libraries may rewrite
  ReadInputFile(dir / "in.json", 1000, "JSON file");        // the new file is an input again
  RefuseOutputsOverInputs();
  std::filesystem::create_symlink(dir / "in.json", dir / "alias.json");
  EXPECT_TRUE(Contains(ErrorOf([&] { WriteFileAtomically(dir / "alias.json", std::string("x")); }),
                       "this file is an input of the same command"));
  EXPECT_EQ(ReadInputFile(dir / "in.json", 1000, "JSON file"), "{}");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::base
