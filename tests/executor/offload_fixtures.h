#pragma once
// What the offload tests share: a fresh folder per test and a model whose experts went to a store.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"

namespace moelab::executor::offload {

// A fresh folder per test under the system temp dir (a real file system on this machine).
struct TempDir {
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("moelab-offload-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

// `c`'s synthetic weights of `seed`, the routed experts in (or reused from) the store under `dir`.
struct Offloaded {
  Offloaded(const ExecutorConfig& c, uint64_t seed, const std::filesystem::path& dir)
      : pool(2), config(c) {
    const std::string source = "synthetic seed " + std::to_string(seed);
    bool built = false;
    store = PrepareExpertStore(config, source, dir, [&](ExpertStoreWriter& writer) {
      const ExpertSink add = [&](int64_t l, int64_t e, const FfnWeights& w) {
        writer.Add(l, e, w);
      };
      weights = MakeSyntheticWeights(config, seed, pool, &add);
      built = true;
    });
    if (!built) {
      const ExpertSink skip;
      weights = MakeSyntheticWeights(config, seed, pool, &skip);
    }
  }
  kernels::ThreadPool pool;
  ExecutorConfig config;
  ModelWeights weights;
  PreparedStore store;
};

}  // namespace moelab::executor::offload
