// kill -9 at seeded random moments while a command writes its --out: the file is always either the
// old file or the new whole file, never empty or partial (base/atomic_file: temporary + fsync +
// rename). The kill moments spread over the whole run, measured from an undisturbed run first.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

extern char** environ;

namespace moelab::cli {
namespace {

using testing::Slurp;

// Starts the binary with `args` (split on spaces), stdout and stderr to /dev/null; returns its pid.
pid_t Start(const std::string& args) {
  std::vector<std::string> words = {MOELAB_BINARY};
  std::istringstream split(args);
  for (std::string word; split >> word;) words.push_back(word);
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Runs `args` (which writes `out`) once undisturbed, then `kills` times killed at a random moment.
void CheckKilledWrites(const std::string& name, const std::string& args,
                       const std::filesystem::path& out, int kills) {
  const std::string old_text = "{\"old\": true}\n";
  std::ofstream(out) << old_text;
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(Start(args), &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name << ": " << args;
  const auto full = std::chrono::steady_clock::now() - start;
  const nlohmann::json complete = nlohmann::json::parse(Slurp(out));
  std::mt19937_64 random(13);  // seeded: the same kill moments every run
  int saw_old = 0, saw_new = 0;
  for (int i = 0; i < kills; ++i) {
    std::ofstream(out, std::ios::trunc) << old_text;
    const auto delay = std::chrono::duration_cast<std::chrono::microseconds>(full) *
                       std::uniform_real_distribution<double>(0.0, 1.1)(random);
    const pid_t pid = Start(args);
    std::this_thread::sleep_for(delay);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    const std::string text = Slurp(out);
    if (text == old_text) {
      ++saw_old;
      continue;
    }
    nlohmann::json parsed;
    ASSERT_NO_THROW(parsed = nlohmann::json::parse(text))
        << name << ": a partial file after kill " << i;
    EXPECT_EQ(parsed.size(), complete.size()) << name << ": kill " << i;
    ++saw_new;
  }
  // Temporaries of killed writers may remain (hidden, named .NAME.tmp.PID.N); never the target.
  ::testing::Test::RecordProperty(name + "_old", saw_old);
  ::testing::Test::RecordProperty(name + "_new", saw_new);
}

TEST(CrashWrite, KilledWritersLeaveTheOldOrTheNewWholeFile) {
  const auto dir = testing::MakeTempDir("crash-write");
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  CheckKilledWrites("fit_latency",
                    "fit latency --profile " + profile + " --out " + (dir / "fit.json").string(),
                    dir / "fit.json", 12);
  CheckKilledWrites(
      "model_spec",
      "model show --model mixtral-8x7b --layers 2 --spec-out " + (dir / "spec.json").string(),
      dir / "spec.json", 12);
  CheckKilledWrites("sim_offload",
                    "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy lru-prefetch "
                    "--prompt 64 --tokens 64 "
                    "--out " +
                        (dir / "sim.json").string(),
                    dir / "sim.json", 12);
  std::filesystem::remove_all(dir);
}

// The offload runtime's expert store has its own writer (temporary data file, fsync, rename, then
// the manifest atomically; the old manifest removed first). Killed at seeded random moments while
// it builds the store, the next undisturbed run either reuses a whole store or rebuilds it, and
// decodes exactly the tokens of an undisturbed first run: no manifest ever vouches for partial
// data.
TEST(CrashWrite, AKilledOffloadRunLeavesNoStoreOrAWholeOne) {
  const auto dir = testing::MakeTempDir("crash-store");
  const std::string args =
      "run --layers 4 --hidden 256 --intermediate 512 --experts 8 --top-k 2 --heads 4 --kv-heads 2 "
      "--head-dim 64 "
      "--vocab 101 --seed 1 --prompt 4 --tokens 4 --threads 1 --offload on-demand --expert-memory "
      "4MB --json --offload-dir " +
      (dir / "store").string();
  const auto start = std::chrono::steady_clock::now();
  const testing::CliRun reference = testing::RunMoelab(args);
  const auto full = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(reference.status, 0) << reference.err;
  const nlohmann::json expected = nlohmann::json::parse(reference.out);
  ASSERT_FALSE(expected["offload"]["store"]["reused"].get<bool>());
  EXPECT_EQ(expected["offload"]["store"]["reader"]["kind"], "threads");  // the default reader
  EXPECT_EQ(expected["offload"]["store"]["reader"]["reads_in_flight"], 2);
  std::mt19937_64 random(13);
  int reused = 0, rebuilt = 0;
  for (int i = 0; i < 6; ++i) {
    std::filesystem::remove_all(dir / "store");
    const auto delay = std::chrono::duration_cast<std::chrono::microseconds>(full) *
                       std::uniform_real_distribution<double>(0.0, 1.1)(random);
    const pid_t pid = Start(args);
    std::this_thread::sleep_for(delay);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const testing::CliRun after = testing::RunMoelab(args);
    ASSERT_EQ(after.status, 0) << "kill " << i << " after " << delay.count()
                               << " us: " << after.err;
    const nlohmann::json got = nlohmann::json::parse(after.out);
    EXPECT_EQ(got["outputs"], expected["outputs"]) << "kill " << i;
    (got["offload"]["store"]["reused"].get<bool>() ? reused : rebuilt) += 1;
  }
  ::testing::Test::RecordProperty("store_reused", reused);
  ::testing::Test::RecordProperty("store_rebuilt", rebuilt);
  std::filesystem::remove_all(dir);
}

// A run whose SIGHUP is ignored (nohup, a closed terminal) builds its store through the signal:
// the store's cleanup handler replaced the ignored disposition, removed the temporary on SIGHUP
// and the build went on to fail at its rename ("No such file or directory").
TEST(CrashWrite, AnIgnoredHangupDoesNotStopTheStoreBuild) {
  const auto dir = testing::MakeTempDir("crash-hangup");
  const std::string args =
      "run --layers 2 --hidden 1024 --intermediate 1024 --experts 8 --top-k 2 --heads 4 "
      "--kv-heads 2 --head-dim 64 --vocab 101 --seed 1 --prompt 4 --tokens 2 --threads 1 "
      "--offload on-demand --expert-memory 40MB --json --offload-dir " +
      (dir / "store").string();
  const testing::CliRun run = testing::RunShell(
      "bash -c 'trap \"\" HUP; " + std::string(MOELAB_BINARY) + " " + args +
      " & pid=$!; while kill -HUP $pid 2>/dev/null; do sleep 0.02; done; wait $pid'");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_FALSE(nlohmann::json::parse(run.out)["offload"]["store"]["reused"].get<bool>());
  std::filesystem::remove_all(dir);
}

// A full disk: an 8 KiB tmpfs holding the old file. The command fails with the system's reason,
// exit status 1, and the old file stays whole.
TEST(CrashWrite, AFullDiskGivesAClearErrorAndKeepsTheOldFile) {
  const auto dir = testing::MakeTempDir("full-disk");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=8k") != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root with CAP_SYS_ADMIN): full-disk "
                    "test skipped";
  }
  std::ofstream(dir / "fit.json") << "old\n";
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  const testing::CliRun r = testing::RunMoelab("fit latency --profile " + profile + " --out " +
                                               (dir / "fit.json").string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(Slurp(dir / "fit.json"), "old\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left
  ::umount(dir.c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::cli
