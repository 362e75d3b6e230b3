// The expert store under the conditions users meet: runs of one model with other seeds sharing a
// folder, concurrent runs, Ctrl-C, kill -9 and a full disk during a build.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "executor/offload/expert_store.h"
#include "executor/run_workload.h"
#include "tests/executor/offload_fixtures.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::executor::offload {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> Temporaries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp-") != std::string::npos) names.push_back(name);
  }
  return names;
}

// Every routed expert of the store read back equals the same seed's experts built in RAM.
void ExpectStoreHoldsSeed(const ExecutorConfig& c, uint64_t seed, const fs::path& dir) {
  const std::unique_ptr<ExpertStore> store =
      ExpertStore::Open(dir, ExpertStoreKeyFor(c, "synthetic seed " + std::to_string(seed)));
  ASSERT_TRUE(store) << "seed " << seed;
  kernels::ThreadPool pool(1);
  const ModelWeights in_ram = MakeSyntheticWeights(c, seed, pool);
  AlignedBuffer buffer(store->key().block_bytes());
  FfnWeights expert;
  expert.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
  for (int64_t layer = 0; layer < store->key().moe_layers; ++layer) {
    for (int64_t e = 0; e < c.num_experts; ++e) {
      store->Read(layer, e, buffer, expert);
      const FfnWeights& want = in_ram.layers[layer + c.first_dense_layers].experts[e];
      const auto got = expert.gate_up.Storage(), expected = want.gate_up.Storage();
      ASSERT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end()))
          << "seed " << seed << " layer " << layer << " expert " << e;
    }
  }
}

TEST(ExpertStoreSafety, StoresOfOtherSeedsLiveSideBySideAndAreReused) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  EXPECT_FALSE(Offloaded(c, 1, dir.path).store.reused);
  EXPECT_FALSE(Offloaded(c, 2, dir.path).store.reused);
  EXPECT_TRUE(Offloaded(c, 1, dir.path).store.reused) << "seed 2 replaced seed 1's store";
  EXPECT_TRUE(Offloaded(c, 2, dir.path).store.reused);
  EXPECT_NE(StoreDataPath(dir.path, ExpertStoreKeyFor(c, "synthetic seed 1")),
            StoreDataPath(dir.path, ExpertStoreKeyFor(c, "synthetic seed 2")));
}

TEST(ExpertStoreSafety, ConcurrentRunsWithOtherKeysNeverCorruptEachOther) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  constexpr int kRuns = 8;
  std::vector<std::string> errors(kRuns);
  std::vector<std::thread> runs;
  for (int run = 0; run < kRuns; ++run) {
    runs.emplace_back([&, run] {
      try {
        Offloaded(c, 1 + run % 2, dir.path);  // seeds 1 and 2 at once, four runs of each
      } catch (const std::exception& e) {
        errors[run] = e.what();
      }
    });
  }
  for (std::thread& run : runs) run.join();
  for (int run = 0; run < kRuns; ++run) EXPECT_EQ(errors[run], "") << "run " << run;
  ExpectStoreHoldsSeed(c, 1, dir.path);
  ExpectStoreHoldsSeed(c, 2, dir.path);
  EXPECT_TRUE(Temporaries(dir.path).empty());
}

// Runs `child` in a forked process and returns its wait status.
template <typename Child>
int InChildProcess(Child child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// A writer for `c`'s store with one expert written, as a build is when it is interrupted.
void StartBuilding(const ExecutorConfig& c, const fs::path& dir) {
  ExpertStoreWriter* writer = new ExpertStoreWriter(dir, ExpertStoreKeyFor(c, "synthetic seed 1"));
  FfnWeights zero;
  zero.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
  writer->Add(0, 0, zero);  // left unfinished on purpose: the signal ends the process
}

// A run that finds the store's lock held says it waits (a build of a large store holds it for
// minutes: a silent wait reads as a hang), then takes the lock once it is free; an uncontended
// lock says nothing.
TEST(ExpertStoreSafety, AWaitForTheStoresLockIsSaidBeforeIt) {
  TempDir dir;
  const ExpertStoreKey key = ExpertStoreKeyFor(testing::TinyMixtral(), "synthetic seed 1");
  std::ostringstream alone;
  { const ExpertStoreLock first(dir.path, key, &alone); }
  EXPECT_EQ(alone.str(), "");
  // The first lock is held until the second has said it waits (its std::endl flushes the
  // stream), so no stall of either thread can let the second come after the first is gone.
  struct SaidBuffer : std::stringbuf {
    std::mutex mutex;
    std::condition_variable flushed;
    bool said = false;
    int sync() override {
      {
        std::lock_guard<std::mutex> lock(mutex);
        said = true;
      }
      flushed.notify_all();
      return 0;
    }
  } said;
  std::ostream waited(&said);
  std::atomic<bool> second_has_it{false};
  std::thread second;
  {
    const ExpertStoreLock first(dir.path, key);
    second = std::thread([&] {
      const ExpertStoreLock lock(dir.path, key, &waited);
      second_has_it = true;
    });
    std::unique_lock<std::mutex> lock(said.mutex);
    EXPECT_TRUE(said.flushed.wait_for(lock, std::chrono::seconds(60), [&] { return said.said; }))
        << "the second lock said nothing in 60 s";
    EXPECT_FALSE(second_has_it) << "the second lock did not wait for the first";
  }
  second.join();
  EXPECT_TRUE(second_has_it);
  EXPECT_NE(said.str().find("moelab: waiting for the expert store "), std::string::npos)
      << said.str();
  EXPECT_NE(said.str().find("another process holds its lock"), std::string::npos) << said.str();
}

TEST(ExpertStoreSafety, AnInterruptDuringABuildLeavesNoTemporary) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  for (const int signal_number : {SIGINT, SIGTERM}) {
    const int status = InChildProcess([&] {
      StartBuilding(c, dir.path);
      if (Temporaries(dir.path).empty()) ::_exit(2);  // the test would prove nothing
      ::raise(signal_number);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), signal_number) << "the signal's own action still ends the run";
    EXPECT_TRUE(Temporaries(dir.path).empty()) << Temporaries(dir.path).front();
  }
}

TEST(ExpertStoreSafety, AKilledBuildsTemporaryIsReclaimedByTheNextRun) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  const int status = InChildProcess([&] {
    StartBuilding(c, dir.path);
    ::raise(SIGKILL);  // no handler runs: the temporary stays behind
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(Temporaries(dir.path).size(), 1u);
  EXPECT_FALSE(Offloaded(c, 7, dir.path).store.reused);  // another key's build reclaims it
  EXPECT_TRUE(Temporaries(dir.path).empty()) << Temporaries(dir.path).front();
}

TEST(ExpertStoreSafety, AFullDiskLeavesNoTemporary) {
  TempDir dir;
  const ExecutorConfig c = testing::TinyMixtral();
  // A file size limit makes the up-front reservation fail as a full disk does (EFBIG, not ENOSPC),
  // without a small file system to mount.
  const int status = InChildProcess([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string error = testing::ErrorOf([&] { Offloaded(c, 1, dir.path); });
    if (error.find("cannot reserve") == std::string::npos) ::_exit(3);
    if (!Temporaries(dir.path).empty()) ::_exit(4);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: no reservation error, 4: a temporary was left";
  EXPECT_TRUE(Temporaries(dir.path).empty());
}

TEST(ExpertStoreSafety, AStoreLargerThanTheDiskIsRefusedBeforeAnyByte) {
  TempDir dir;
  ExpertStoreKey key;
  key.model = "huge";
  key.format = "bf16";
  key.moe_layers = 1'000'000;
  key.experts = 1'000;
  key.gate_up_bytes = 4096;  // 4 TB in all
  const std::string error = testing::ErrorOf([&] { ExpertStoreWriter writer(dir.path, key); });
  EXPECT_NE(error.find("the expert store needs 4.10 TB"), std::string::npos) << error;
  EXPECT_NE(error.find("free"), std::string::npos) << error;
  EXPECT_TRUE(Temporaries(dir.path).empty());
}

TEST(ExpertStoreSafety, ARefusedBudgetWritesNoStore) {
  TempDir dir;
  RunRequest request = testing::SmallRunRequest();
  for (const auto& [policy, memory_bytes, expected] :
       {std::tuple<std::string, int64_t, std::string>{"on-demand", 1, "fewer than one layer's"},
        {"fiddler", int64_t{1} << 30, "--offload fiddler"},
        {"bogus", int64_t{1} << 30, "bogus"}}) {
    request.offload.emplace();
    request.offload->policy = policy;
    request.offload->expert_memory_bytes = memory_bytes;
    request.offload->offload_dir = dir.path;
    const std::string error =
        testing::ErrorOf([&] { RunWorkload(request, model::PresetStore::Default()); });
    EXPECT_NE(error.find(expected), std::string::npos) << policy << ": " << error;
    EXPECT_FALSE(fs::exists(dir.path) && !fs::is_empty(dir.path))
        << policy << ": the store was written before the run was refused";
  }
}

}  // namespace
}  // namespace moelab::executor::offload
