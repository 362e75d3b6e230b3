// The offload runtime's expert readers (threads, io_uring): the order the shared queue starts jobs
// in, every expert read back byte for byte whatever the reads in flight, and errors reaching Wait.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "executor/offload/expert_reader.h"
#include "executor/offload/expert_store.h"
#include "executor/offload/read_queue.h"
#include "executor/offload/reader_pass.h"
#include "executor/weights.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor::offload {
namespace {
namespace fs = std::filesystem;

ExpertReader::Job JobOf(int64_t expert, int priority_class, double priority, int64_t after = -1) {
  ExpertReader::Job job;
  job.expert = expert;
  job.priority_class = priority_class;
  job.priority = priority;
  job.after = after;
  return job;
}

TEST(ReadQueue, DemandBeforePrefetchThenPriorityThenFirstComeAndWaitsForItsPredecessor) {
  ReadQueue queue;
  const int64_t first = queue.Add(JobOf(0, 1, 0));
  ASSERT_EQ(queue.StartNext(), first);
  const int64_t after_first = queue.Add(JobOf(1, 0, 9, first));  // waits for `first`
  const int64_t prefetch_low = queue.Add(JobOf(2, 1, 1));
  const int64_t prefetch_high = queue.Add(JobOf(3, 1, 5));
  const int64_t demand_a = queue.Add(JobOf(4, 0, 0));
  const int64_t demand_b = queue.Add(JobOf(5, 0, 0));
  EXPECT_EQ(queue.StartNext(), demand_a);
  EXPECT_EQ(queue.StartNext(), demand_b);  // same class and priority: first come
  EXPECT_EQ(queue.StartNext(), prefetch_high);
  EXPECT_EQ(queue.StartNext(), prefetch_low);
  EXPECT_EQ(queue.StartNext(), std::nullopt);  // `after_first` still waits
  queue.Finish(first, nullptr);
  EXPECT_TRUE(queue.done(first));
  EXPECT_EQ(queue.StartNext(), after_first);
  EXPECT_EQ(queue.StartNext(), std::nullopt);
  EXPECT_EQ(queue.finished(), 1);
}

// The busy time counts the spans with at least one job running, once however many overlap, and
// none while the queue is idle.
TEST(ReadQueue, BusyTimeIsTheUnionOfTheRunningSpans) {
  ReadQueue queue;
  EXPECT_EQ(queue.busy_s(), 0.0);
  const int64_t a = queue.Add(JobOf(0, 0, 0));
  const int64_t b = queue.Add(JobOf(1, 0, 0));
  const auto start = std::chrono::steady_clock::now();
  queue.StartNext();
  queue.StartNext();  // two running, overlapping
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  queue.Finish(a, nullptr);
  const double while_one_runs = queue.busy_s();
  EXPECT_GE(while_one_runs, 0.03);  // still counting: b runs
  queue.Finish(b, nullptr);
  const double closed = queue.busy_s();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(closed, while_one_runs);
  EXPECT_LE(closed, elapsed);  // the overlap counted once, not twice
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(queue.busy_s(), closed);  // idle: no time added
  queue.Add(JobOf(2, 0, 0));
  queue.StartNext();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(queue.busy_s(), closed + 0.01);
}

// Each finished job's time is split into queued (added until started) and running (started until
// finished); a wake-up is the time from a job's end to the waiter noting it.
TEST(ReadQueue, SpansSplitEachJobIntoQueuedAndRunningAndCountWakeUps) {
  ReadQueue queue;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point before_add = Clock::now();
  const int64_t a = queue.Add(JobOf(0, 0, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a queued
  queue.StartNext();
  const Clock::time_point after_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a running
  queue.Finish(a, nullptr);
  ExpertReader::Spans spans = queue.spans();
  EXPECT_EQ(spans.reads, 1);
  EXPECT_GE(spans.queued_s, 0.02);
  // Not the running time too: that would add at least its 30 ms past `after_start`, however long
  // a stall of this process made either sleep.
  EXPECT_LE(spans.queued_s, std::chrono::duration<double>(after_start - before_add).count());
  EXPECT_GE(spans.running_s, 0.03);
  EXPECT_EQ(spans.waits, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  queue.NoteWake(a);
  spans = queue.spans();
  EXPECT_EQ(spans.waits, 1);
  EXPECT_GE(spans.wake_s, 0.01);
  // A job still queued or running adds nothing yet.
  queue.Add(JobOf(1, 0, 0));
  queue.StartNext();
  EXPECT_EQ(queue.spans().reads, 1);
  EXPECT_EQ(queue.spans().running_s, spans.running_s);
}

struct Store {
  Store() : config(testing::TinyMixtral()), pool(2) {
    dir = fs::temp_directory_path() / ("moelab-reader-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    weights = MakeSyntheticWeights(config, 5, pool);
    const ExpertStoreKey key = ExpertStoreKeyFor(config, "synthetic seed 5");
    {
      ExpertStoreWriter writer(dir, key);
      for (size_t l = 0; l < weights.layers.size(); ++l) {
        for (size_t e = 0; e < weights.layers[l].experts.size(); ++e)
          writer.Add(moe_layers, static_cast<int64_t>(e), weights.layers[l].experts[e]);
        if (!weights.layers[l].experts.empty()) {
          moe_layer_index.push_back(l);
          ++moe_layers;
        }
      }
      writer.Commit();
    }
    store = ExpertStore::Open(dir, key);
  }
  ~Store() {
    store.reset();
    fs::remove_all(dir);
  }
  ExecutorConfig config;
  kernels::ThreadPool pool;
  ModelWeights weights;
  fs::path dir;
  int64_t moe_layers = 0;
  std::vector<size_t> moe_layer_index;
  std::unique_ptr<ExpertStore> store;
};

std::vector<ReaderKind> ReadersHere() {
  std::vector<ReaderKind> kinds = {ReaderKind::kThreads};
  std::string why;
  if (IoUringAvailable(&why)) {
    kinds.push_back(ReaderKind::kIoUring);
  } else {
    std::cout << "io_uring reader not tested here: " << why << "\n";
  }
  return kinds;
}

bool SameBytes(const kernels::WeightMatrix& a, const kernels::WeightMatrix& b) {
  const auto x = a.Storage(), y = b.Storage();
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

TEST(ExpertReader, ReadsEveryExpertByteForByteWhateverTheReadsInFlight) {
  Store s;
  ASSERT_TRUE(s.store);
  ASSERT_GT(s.moe_layers, 0);
  for (const ReaderKind kind : ReadersHere()) {
    for (const int in_flight : {1, 3}) {
      std::unique_ptr<ExpertReader> reader = MakeExpertReader(kind, *s.store, in_flight);
      const int64_t experts = s.config.num_experts;
      std::vector<FfnWeights> out(static_cast<size_t>(s.moe_layers * experts));
      std::vector<int64_t> ids;
      for (int64_t l = 0; l < s.moe_layers; ++l) {
        for (int64_t e = 0; e < experts; ++e) {
          FfnWeights& w = out[static_cast<size_t>(l * experts + e)];
          w.Allocate(s.config.hidden_size, s.config.expert_intermediate_size,
                     s.config.expert_format);
          ExpertReader::Job job = JobOf(e, static_cast<int>(e % 2), static_cast<double>(l));
          job.layer = l;
          job.destination = &w;
          // Every other job waits for the one before it (the same buffer refilled, in the runtime).
          if (e % 2 == 1) job.after = ids.back();
          ids.push_back(reader->Submit(job));
        }
      }
      for (const int64_t id : ids) reader->Wait(id);
      EXPECT_EQ(reader->reads(), static_cast<int64_t>(ids.size()));
      EXPECT_GT(reader->busy_s(), 0.0) << ToString(kind);  // the reads' time on the storage
      // Every read's time split: all finished, each ran, and a waiter noted every wake-up it had.
      const ExpertReader::Spans spans = reader->spans();
      EXPECT_EQ(spans.reads, static_cast<int64_t>(ids.size())) << ToString(kind);
      EXPECT_GT(spans.running_s, 0.0) << ToString(kind);
      EXPECT_GE(spans.queued_s, 0.0) << ToString(kind);
      EXPECT_LE(spans.waits, static_cast<int64_t>(ids.size())) << ToString(kind);
      for (int64_t l = 0; l < s.moe_layers; ++l) {
        for (int64_t e = 0; e < experts; ++e) {
          const FfnWeights& expected = s.weights.layers[s.moe_layer_index[l]].experts[e];
          const FfnWeights& got = out[static_cast<size_t>(l * experts + e)];
          EXPECT_TRUE(SameBytes(got.gate_up, expected.gate_up))
              << ToString(kind) << " layer " << l << " expert " << e;
          EXPECT_TRUE(SameBytes(got.down, expected.down))
              << ToString(kind) << " layer " << l << " expert " << e;
        }
      }
    }
  }
}

TEST(ExpertReader, ACorruptedBlockFailsItsOwnReadOnly) {
  Store s;
  ASSERT_TRUE(s.store);
  const fs::path data = s.store->data_path();
  const int64_t block = s.store->key().block_bytes();
  s.store.reset();
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(block * 2 + 100);
    file.put('\x33');
  }
  s.store = ExpertStore::Open(s.dir, ExpertStoreKeyFor(s.config, "synthetic seed 5"));
  ASSERT_TRUE(s.store);
  for (const ReaderKind kind : ReadersHere()) {
    std::unique_ptr<ExpertReader> reader = MakeExpertReader(kind, *s.store, 2);
    std::vector<FfnWeights> out(3);
    std::vector<int64_t> ids;
    for (int64_t e = 0; e < 3; ++e) {
      out[e].Allocate(s.config.hidden_size, s.config.expert_intermediate_size,
                      s.config.expert_format);
      ExpertReader::Job job = JobOf(e, 0, 0);
      job.destination = &out[e];
      ids.push_back(reader->Submit(job));
    }
    reader->Wait(ids[0]);
    reader->Wait(ids[1]);
    try {
      reader->Wait(ids[2]);
      ADD_FAILURE() << ToString(kind) << ": a corrupted block was trusted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("checksum mismatch for MoE layer 0 expert 2"),
                std::string::npos)
          << e.what();
    }
  }
}

// One pass of the reader over the whole store: every read lands (a corrupted block is an error
// here too), and a computation given runs beside it for the whole pass and is stopped after.
TEST(ReaderPass, TimesOnePassOverTheStoreWithTheComputationBesideIt) {
  Store s;
  ASSERT_TRUE(s.store);
  for (const ReaderKind kind : ReadersHere()) {
    EXPECT_GT(ReaderPassSeconds(*s.store, kind, 2), 0.0) << ToString(kind);
    std::atomic<int64_t> steps{0};
    const double beside = ReaderPassSeconds(*s.store, kind, 2, [&] {
      ++steps;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    EXPECT_GT(beside, 0.0) << ToString(kind);
    const int64_t after_pass = steps.load();
    EXPECT_GE(after_pass, 1) << ToString(kind);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(steps.load(), after_pass) << ToString(kind) << ": the computation outlived the pass";
  }
  EXPECT_NE(std::string([&] {
              try {
                ReaderPassSeconds(*s.store, ReaderKind::kThreads, 0);
              } catch (const std::exception& e) {
                return std::string(e.what());
              }
              return std::string();
            }())
                .find("reads in flight must be at least 1"),
            std::string::npos);
  // A corrupted block fails the pass, and the computation beside it still stops.
  const fs::path data = s.store->data_path();
  const int64_t block = s.store->key().block_bytes();
  s.store.reset();
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(block + 7);
    file.put('\x5a');
  }
  s.store = ExpertStore::Open(s.dir, ExpertStoreKeyFor(s.config, "synthetic seed 5"));
  ASSERT_TRUE(s.store);
  std::atomic<int64_t> steps{0};
  EXPECT_THROW(ReaderPassSeconds(*s.store, ReaderKind::kThreads, 2, [&] { ++steps; }),
               std::exception);
  const int64_t after_failure = steps.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(steps.load(), after_failure);
}

// TimeReaderPass: the computation's rate beside the pass is its steps inside the pass against the
// same steps alone after it, on the caller's thread. A step that takes four times as long on the
// computing thread as on the caller's reads as about a quarter of the rate alone (less when this
// machine is busy: the computing thread then shares the cores with the readers and the rest).
TEST(ReaderPass, TheComputationBesideThePassIsTimedAgainstTheSameStepsAlone) {
  Store s;
  ASSERT_TRUE(s.store);
  const ReaderPassTiming plain = TimeReaderPass(*s.store, ReaderKind::kThreads, 2);
  EXPECT_GT(plain.seconds, 0.0);
  EXPECT_EQ(plain.compute_rate, 0.0) << "no computation, no rate";
  EXPECT_EQ(plain.compute_steps, 0);
  const std::thread::id caller = std::this_thread::get_id();
  const auto busy = [](std::chrono::microseconds length) {
    const auto end = std::chrono::steady_clock::now() + length;
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  int64_t alone_steps = 0;
  const auto step = [&] {
    if (std::this_thread::get_id() == caller) {
      ++alone_steps;
      busy(std::chrono::microseconds(20));
    } else {
      busy(std::chrono::microseconds(80));
    }
  };
  // A tiny store's pass may end before two steps did (rate 0); more passes give ones that did not.
  // The rate is judged on the median of five: on a loaded machine (ctest -j) one pass's few alone
  // steps can lose the core and come out slower than the steps beside it.
  std::vector<double> rates;
  for (int attempt = 0; attempt < 250 && rates.size() < 5; ++attempt) {
    alone_steps = 0;
    const ReaderPassTiming timed = TimeReaderPass(*s.store, ReaderKind::kThreads, 2, step);
    if (timed.compute_steps == 0) {
      EXPECT_EQ(timed.compute_rate, 0.0);
      EXPECT_EQ(alone_steps, 0) << "no steps timed alone without a rate";
      continue;
    }
    EXPECT_EQ(alone_steps, timed.compute_steps) << "the same number of steps, alone";
    EXPECT_GT(timed.compute_rate, 0.0);
    rates.push_back(timed.compute_rate);
  }
  ASSERT_EQ(rates.size(), 5u) << "fewer than five passes outlasted two 80 us steps";
  std::nth_element(rates.begin(), rates.begin() + 2, rates.end());
  EXPECT_LT(rates[2], 0.75) << "steps four times slower beside the pass than alone";
}

TEST(ExpertReader, AJobThatFailsBeforeItsReadLetsTheNextOneRun) {
  Store s;
  ASSERT_TRUE(s.store);
  for (const ReaderKind kind : ReadersHere()) {
    // One read in flight; two jobs wait for the first, so both become runnable at once: the
    // demand job names a layer the store lacks and fails before any read, the prefetch must
    // still run in the slot it leaves.
    std::unique_ptr<ExpertReader> reader = MakeExpertReader(kind, *s.store, 1);
    std::vector<FfnWeights> out(3);
    for (FfnWeights& w : out)
      w.Allocate(s.config.hidden_size, s.config.expert_intermediate_size, s.config.expert_format);
    ExpertReader::Job first = JobOf(0, 0, 0);
    first.destination = &out[0];
    const int64_t first_id = reader->Submit(first);
    ExpertReader::Job bad = JobOf(1, 0, 0, first_id);
    bad.layer = 99;
    bad.destination = &out[1];
    ExpertReader::Job next = JobOf(2, 1, 0, first_id);
    next.destination = &out[2];
    const int64_t bad_id = reader->Submit(bad);
    const int64_t next_id = reader->Submit(next);
    reader->Wait(first_id);
    try {
      reader->Wait(bad_id);
      ADD_FAILURE() << ToString(kind) << ": a read of MoE layer 99 succeeded";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("no MoE layer 99 expert 1 in this store"),
                std::string::npos)
          << e.what();
    }
    reader->Wait(next_id);
    EXPECT_TRUE(SameBytes(out[2].down, s.weights.layers[s.moe_layer_index[0]].experts[2].down))
        << ToString(kind);
  }
}

TEST(ExpertReader, NamesTheFlagForAnUnknownKind) {
  EXPECT_EQ(ParseReaderKind("io_uring"), ReaderKind::kIoUring);
  EXPECT_EQ(ParseReaderKind("threads"), ReaderKind::kThreads);
  try {
    ParseReaderKind("aio");
    ADD_FAILURE() << "accepted 'aio'";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--offload-reader"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moelab::executor::offload
