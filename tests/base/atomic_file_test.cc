// WriteFileAtomically: devices and FIFOs are written in place and never replaced, write errors
// carry the system's reason, a full disk leaves no partial file.
#include "base/atomic_file.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::base {
namespace {

using testing::ErrorOf;

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AtomicFile, ReplacesARegularFileWhole) {
  const auto dir = testing::MakeTempDir("atomic");
  const auto file = dir / "out.json";
  WriteFileAtomically(file, std::string("old\n"));
  WriteFileAtomically(file, std::string("new\n"));
  EXPECT_EQ(Slurp(file), "new\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, DevNullStaysACharacterDevice) {
  WriteFileAtomically("/dev/null", std::string("discarded\n"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(AtomicFile, DevFullFailsWithTheSystemReason) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  const std::string error =
      ErrorOf([] { WriteFileAtomically("/dev/full", std::string(100000, 'x')); });
  EXPECT_TRUE(Contains(error, "/dev/full: write failed: No space left on device")) << error;
  EXPECT_FALSE(Contains(error, "Success")) << error;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

TEST(AtomicFile, AFifoIsWrittenInPlaceNotReplaced) {
  const auto dir = testing::MakeTempDir("atomic-fifo");
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = Slurp(fifo); });
  WriteFileAtomically(fifo, std::string("through the pipe\n"));
  reader.join();
  EXPECT_EQ(received, "through the pipe\n");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, AFolderIsRefused) {
  const auto dir = testing::MakeTempDir("atomic-dir");
  EXPECT_TRUE(
      Contains(ErrorOf([&] { WriteFileAtomically(dir, std::string("x")); }), "it is a folder"));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, ALinkKeepsPointingAtTheReplacedFile) {
  const auto dir = testing::MakeTempDir("atomic-link");
  WriteFileAtomically(dir / "real.json", std::string("old"));
  std::filesystem::create_symlink(dir / "real.json", dir / "link.json");
  WriteFileAtomically(dir / "link.json", std::string("new"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.json"));
  EXPECT_EQ(Slurp(dir / "real.json"), "new");
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, AnExceptionWhileWritingLeavesTheOldFile) {
  const auto dir = testing::MakeTempDir("atomic-throw");
  WriteFileAtomically(dir / "out", std::string("old"));
  ErrorOf([&] {
    WriteFileAtomically(dir / "out", [](std::ostream& out) {
      out << "partial";
      throw Error("boom");
    });
  });
  EXPECT_EQ(Slurp(dir / "out"), "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::filesystem::remove_all(dir);
}

// A 64 KiB tmpfs: writing 1 MiB into it must fail with the system's reason and leave the old file.
TEST(AtomicFile, AFullDiskGivesAClearErrorAndNoPartialFile) {
  const auto dir = testing::MakeTempDir("atomic-full");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root with CAP_SYS_ADMIN): full-disk "
                    "test skipped";
  }
  WriteFileAtomically(dir / "out.json", std::string("old\n"));
  const std::string error =
      ErrorOf([&] { WriteFileAtomically(dir / "out.json", std::string(1 << 20, 'x')); });
  EXPECT_TRUE(Contains(error, "No space left on device")) << error;
  EXPECT_EQ(Slurp(dir / "out.json"), "old\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left
  ::umount(dir.c_str());
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, TwoOutputsNamingOneFileAreRefused) {
  const auto dir = testing::MakeTempDir("atomic-distinct");
  const std::string a = (dir / "a.json").string();
  const std::string same = (dir / "." / "a.json").string();
  EXPECT_TRUE(Contains(ErrorOf([&] {
                         RequireWritableDistinctOutputs({{"--out", a}, {"--trace-out", same}});
                       }),
                       "--out and --trace-out name the same file"));
  RequireWritableDistinctOutputs(
      {{"--out", a}, {"--trace-out", (dir / "b.json").string()}, {"--x", ""}});
  RequireWritableDistinctOutputs({{"--out", "/dev/null"}, {"--trace-out", "/dev/null"}});
  // Relative spellings of one new file in the working folder.
  EXPECT_TRUE(Contains(ErrorOf([&] {
                         RequireWritableDistinctOutputs(
                             {{"--out", "moelab-same.json"}, {"--spec-out", "./moelab-same.json"}});
                       }),
                       "--out and --spec-out name the same file"));
  // What cannot be written is refused before anything is: a missing folder, a folder.
  EXPECT_TRUE(Contains(ErrorOf([&] {
                         RequireWritableDistinctOutputs(
                             {{"--out", a}, {"--trace-out", (dir / "no" / "t.json").string()}});
                       }),
                       "folder '" + (dir / "no").string() + "' does not exist"));
  EXPECT_TRUE(Contains(ErrorOf([&] { CheckWritableOutput(dir); }), "it is a folder"));
  EXPECT_FALSE(std::filesystem::exists(a));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::base
