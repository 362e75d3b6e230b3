// A real profile of a tiny model on a minimal grid (a few seconds), the O_DIRECT fallback, the
// schema check and the error paths.
#include "profiler/profiler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "fit/storage_tier_hardware.h"
#include "model/profiled_model.h"
#include "profiler/operator_bench.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

model::PresetStore Presets() { return model::PresetStore(testing::PresetDir()); }

// Mixtral's architecture at a tiny size, with a tiny dense draft.
ProfileRequest TinyRequest(const std::filesystem::path& storage_dir) {
  ProfileRequest r;
  r.model = "mixtral-8x7b";
  r.shape = model::ShapeOverrides{};
  r.shape.layers = 2;
  r.shape.hidden = 64;
  r.shape.intermediate = 128;
  r.shape.experts = 4;
  r.shape.top_k = 2;
  r.shape.heads = 4;
  r.shape.kv_heads = 2;
  r.shape.head_dim = 16;
  r.shape.vocab = 256;
  r.shape.max_positions = 256;
  r.draft_shape = model::ShapeOverrides{};
  r.draft_shape.layers = 1;
  r.draft_shape.hidden = 64;
  r.draft_shape.dense_intermediate = 96;
  r.draft_shape.heads = 4;
  r.draft_shape.kv_heads = 2;
  r.draft_shape.head_dim = 16;
  r.quick = true;
  GridSpec grid;
  grid.expert_tokens = {1, 4, 16};
  grid.ridge_points = 3;
  grid.matmul_tokens = {1, 8};
  grid.decode_contexts = {16, 64};
  grid.decode_batches = {1, 2};
  grid.prefill_tokens = {8, 32};
  grid.transfer_fixed_bytes = {4096};
  grid.transfer_expert_divisors = {1};
  grid.storage_file_blocks = 2;
  grid.repetitions = 2;
  grid.min_time_s = 0.002;
  r.grid = grid;
  r.threads = 2;
  r.storage_dir = storage_dir;
  r.use_gpu = false;
  // What these tests check does not need weights from DRAM, and against the default cache (2 x a
  // VM's reported host L3 of up to 508 MiB) building each family's buffers took most of their
  // minutes. TinyProfileHasEveryCpuFamilyAndIsSchemaValid checks the note it leaves.
  r.cache_bytes = int64_t{8} << 20;
  return r;
}

std::map<std::string, std::vector<nlohmann::json>> ByOperator(const nlohmann::json& profile) {
  std::map<std::string, std::vector<nlohmann::json>> by;
  for (const auto& s : profile["samples"]) by[s["operator"].get<std::string>()].push_back(s);
  return by;
}

bool HasNote(const nlohmann::json& profile, const std::string& text) {
  for (const auto& note : profile["notes"]) {
    if (note.get<std::string>().find(text) != std::string::npos) return true;
  }
  return false;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("profiler"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ProfilerTest, TinyProfileHasEveryCpuFamilyAndIsSchemaValid) {
  std::ostringstream progress;
  ProfileRequest request = TinyRequest(dir_);
  request.progress = &progress;
  // The caller's hook runs after each of the grid's rounds, while the profile is still going
  // (validate runs its case rounds there).
  std::vector<std::pair<int, int>> after_rounds;
  std::vector<size_t> progress_at;
  request.after_round = [&](int round, int rounds) {
    after_rounds.emplace_back(round, rounds);
    progress_at.push_back(progress.str().size());
  };
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  ASSERT_EQ(after_rounds, (std::vector<std::pair<int, int>>{{1, 2}, {2, 2}}));
  // A point's line is printed when its last round is in: none after round 1 of 2 (only the rounds'
  // lines with the time left), every point's, the ridge points' too, by the second call.
  const std::string first_round = progress.str().substr(0, progress_at[0]);
  EXPECT_EQ(first_round.find("median"), std::string::npos);
  EXPECT_NE(first_round.find(" s left\n"), std::string::npos);
  EXPECT_GT(progress_at[1], 0u);
  EXPECT_NE(progress.str().substr(0, progress_at[1]).find("expert_ffn"), std::string::npos);
  EXPECT_EQ(progress.str().size(), progress_at[1]);
  // The ridge points are placed after the expert family's first round and measured in every round
  // right after it (a bench built each round, as the grid's), not back to back after the grid: in
  // round 1, two expert rounds of 3 points (the grid's 3 and the 3 ridge points), before
  // attention's.
  const std::string expert_round = "expert_ffn cpu: a round of 3 points done";
  const size_t grid_round = first_round.find(expert_round);
  ASSERT_NE(grid_round, std::string::npos) << first_round;
  const size_t ridge_round = first_round.find(expert_round, grid_round + 1);
  ASSERT_NE(ridge_round, std::string::npos) << first_round;
  const size_t attention_round = first_round.find("attention_decode cpu: a round of");
  ASSERT_NE(attention_round, std::string::npos) << first_round;
  EXPECT_LT(ridge_round, attention_round) << first_round;

  EXPECT_EQ(profile["schema"], "moelab.profile/1");
  EXPECT_EQ(profile["quick"], true);
  EXPECT_EQ(profile["model"]["name"], "mixtral-8x7b");
  EXPECT_EQ(profile["model"]["shape"]["hidden"], 64);
  EXPECT_EQ(profile["draft"]["shape"]["vocab"], 256);  // the target's vocabulary
  EXPECT_EQ(profile["machine"]["threads"], 2);
  EXPECT_TRUE(profile["machine"]["gpu"].is_null());
  EXPECT_FALSE(profile["machine"]["libraries"]["google_benchmark"].get<std::string>().empty());
  EXPECT_GT(profile["machine"]["l3_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(HasNote(profile,
                      "weights cycled and caches flushed against a 8388608-byte cache "
                      "(--cache-bytes)"));
  // The DRAM probe's buffer follows the cache given (4 x, at least 256 MiB).
  EXPECT_NE(profile["machine"]["limits"]["method"].get<std::string>().find("268435456"),
            std::string::npos)
      << profile["machine"]["limits"];

  const auto by = ByOperator(profile);
  for (const char* family : {"expert_ffn", "attention_decode", "attention_prefill", "router",
                             "lm_head", "dense_ffn", "memcpy_host", "storage_read"}) {
    EXPECT_EQ(by.count(family), 1u) << family << " missing";
  }
  // 3 grid points + 3 around the measured ridge, all distinct, in token order.
  ASSERT_EQ(by.at("expert_ffn").size(), 6u);
  std::set<int64_t> tokens;
  for (const auto& s : by.at("expert_ffn")) tokens.insert(s["tokens"].get<int64_t>());
  EXPECT_EQ(tokens.size(), 6u);
  EXPECT_EQ(profile["grid"]["ridge"]["points"].size(), 3u);
  EXPECT_EQ(by.at("attention_decode").size(), 4u);
  EXPECT_EQ(by.at("attention_prefill").size(), 2u);
  EXPECT_EQ(by.at("router").size(), 2u);
  EXPECT_EQ(by.at("lm_head").size(), 2u);
  EXPECT_EQ(by.at("dense_ffn").size(), 2u);
  EXPECT_EQ(by.at("memcpy_host").size(), 2u);  // 4096 and the expert (3 x 64 x 128 x 2 = 49152)
  EXPECT_EQ(by.at("storage_read").size(), 2u);
  EXPECT_EQ(by.at("expert_load").size(), 2u);
  EXPECT_EQ(by.at("norms_residual").size(), 2u);  // the router's and LM head's token rows
  EXPECT_EQ(by.at("norms_residual").front()["shape"]["hidden"], 64);
  EXPECT_EQ(by.at("dense_ffn").front()["shape"]["intermediate"], 96);
  EXPECT_EQ(by.at("memcpy_host").back()["bytes"].get<double>(), 49152.0);
  for (const auto& s : profile["samples"]) {
    EXPECT_EQ(s["repetitions"], 2) << s.dump();
    EXPECT_EQ(s["repetition_s"].size(), 2u);
    EXPECT_EQ(s["device"], "cpu");
  }
  const auto& decode = by.at("attention_decode").front();
  EXPECT_EQ(decode["shape"]["context"], 16);
  EXPECT_EQ(decode["tokens"], 1);
  EXPECT_TRUE(HasNote(profile, "weights cycled over"));
  EXPECT_TRUE(HasNote(profile, "ridge point estimated"));
  EXPECT_TRUE(HasNote(profile, "GPU operators not measured"));

  // One progress line per point: 3 + 3 ridge + 4 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 2 = 26; the ridge
  // points right after the expert family's.
  const std::string lines = progress.str();
  EXPECT_NE(lines.find("[1/26] expert_ffn cpu tokens=1: median"), std::string::npos) << lines;
  EXPECT_NE(lines.find("[6/26] expert_ffn cpu"), std::string::npos) << lines;
  EXPECT_NE(lines.find("[7/26] attention_decode cpu"), std::string::npos) << lines;
  EXPECT_NE(lines.find("[21/26] storage_read cpu"), std::string::npos) << lines;
  EXPECT_NE(lines.find("[24/26] expert_load cpu"), std::string::npos) << lines;
  EXPECT_NE(lines.find("[26/26] norms_residual cpu"), std::string::npos) << lines;
  // And a line after every round of a group, before its points' lines, with the time left.
  EXPECT_NE(lines.find("[0/26] expert_ffn cpu: a round of "), std::string::npos) << lines;
  EXPECT_NE(lines.find(" s left\n"), std::string::npos) << lines;

  // Written atomically and read back unchanged; nothing else left in the folder.
  const std::filesystem::path out = dir_ / "profile.json";
  WriteProfile(profile, out);
  std::ifstream in(out);
  EXPECT_EQ(nlohmann::json::parse(in), profile);
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "profile.json");
  }
  EXPECT_EQ(entries, 1u) << "storage_read's temporary file must not outlive the profile";
}

GridSpec StorageOnly() {
  GridSpec grid;
  grid.transfer_fixed_bytes = {4096};
  grid.transfer_expert_divisors = {1};
  grid.repetitions = 2;
  grid.min_time_s = 0.001;
  return grid;
}

// --expert-bits 4: the experts are measured as q4_0 (the executor's stored bytes), the shape
// records both formats, and the storage blocks are the quantized expert's size.
TEST_F(ProfilerTest, QuantizedExpertsAreMeasuredInTheirFormatAndRecorded) {
  ProfileRequest request = TinyRequest(dir_);
  request.expert_bits = 4;
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  const nlohmann::json& shape = profile["model"]["shape"];
  EXPECT_EQ(shape["expert_format"], "q4_0");
  EXPECT_DOUBLE_EQ(shape["expert_stored_bits"].get<double>(), 4.5);
  EXPECT_EQ(shape["attention_format"], "bf16");
  EXPECT_DOUBLE_EQ(shape["attention_stored_bits"].get<double>(), 16.0);
  EXPECT_EQ(profile["draft"]["shape"]["expert_format"], "bf16");
  // What the profiler wrote is what every reader gets (model/profiled_model.h), and it refuses a
  // prediction at other bits or on another kernel path.
  const model::ProfiledModel measured =
      model::ProfiledModel::FromJson(profile["model"], profile["machine"], "profile.json");
  EXPECT_EQ(measured.ToJson(), profile["model"]);
  EXPECT_EQ(measured.ExpertFormat(), "q4_0");
  EXPECT_EQ(measured.shape.hidden, 64);
  ASSERT_TRUE(measured.isa.has_value());
  model::ProfiledModel bf16_experts;
  bf16_experts.expert_format = "bf16";
  EXPECT_NE(testing::ErrorOf([&] { measured.Require(bf16_experts, "test"); })
                .find("profile.json: the profile measured expert weights as q4_0 (4.5 bits per "
                      "weight), not bf16 (test): field 'model.shape.expert_format'"),
            std::string::npos);
  const auto by = ByOperator(profile);
  ASSERT_TRUE(by.count("expert_ffn"));
  EXPECT_TRUE(HasNote(profile, "expert_ffn cpu (q4_0)"));
  // One expert: 3 x 64 x 128 weights at 4.5 bits.
  bool expert_block = false;
  for (const nlohmann::json& s : by.at("storage_read"))
    expert_block |=
        s["bytes"].get<double>() == std::ceil(3.0 * 64 * 128 * 2 * 4.5 / 16 / 4096) * 4096;
  EXPECT_TRUE(expert_block);

  request.expert_bits = 5;
  EXPECT_NE(testing::ErrorOf([&] { RunProfile(request, Presets()); }).find("--expert-bits"),
            std::string::npos);
}

TEST_F(ProfilerTest, BufferedStorageReadsWhenODirectIsNotAvailableSayWhy) {
  ProfileRequest request = TinyRequest(dir_);
  request.grid = StorageOnly();
  request.storage_direct_io = false;  // what a filesystem that refuses O_DIRECT gets
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  const auto by = ByOperator(profile);
  ASSERT_EQ(by.at("storage_read").size(), 2u);
  for (const auto& s : by.at("storage_read")) EXPECT_EQ(s["direct_io"], false);
  EXPECT_TRUE(HasNote(profile, "buffered pread")) << profile["notes"].dump(1);
}

TEST_F(ProfilerTest, VerifyAttentionRunsSeveralQueriesPerSequenceOverTheCache) {
  ProfileRequest request = TinyRequest(dir_);
  GridSpec grid;
  grid.verify_queries = {2, 5};
  grid.verify_contexts = {16, 64};
  grid.verify_batches = {1, 3};
  grid.repetitions = 2;
  grid.min_time_s = 0.001;
  request.grid = grid;
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  const auto by = ByOperator(profile);
  ASSERT_EQ(by.size(), 1u);
  const std::vector<nlohmann::json>& samples = by.at("attention_verify");
  ASSERT_EQ(samples.size(), 8u);
  // Written by queries, then context, then batch.
  EXPECT_EQ(samples.front()["shape"]["queries_per_sequence"], 2);
  EXPECT_EQ(samples.front()["shape"]["context"], 16);
  EXPECT_EQ(samples.front()["tokens"], 1);
  EXPECT_EQ(samples.back()["shape"]["queries_per_sequence"], 5);
  EXPECT_EQ(samples.back()["shape"]["context"], 64);
  EXPECT_EQ(samples.back()["tokens"], 3);
  // 3 sequences' K/V (32 wide, fp32) up to position 64 + 5 read once, plus the projections.
  const double weights = 2.0 * (64.0 * (64 + 2 * 32) + 64.0 * 64);
  EXPECT_EQ(samples.back()["bytes"].get<double>(), weights + 3.0 * 69 * 32 * 8);
  for (const auto& s : samples) EXPECT_GT(s["median_s"].get<double>(), 0.0);
  EXPECT_TRUE(HasNote(profile, "attention_verify cpu: the executor's Transformer attention"));

  nlohmann::json bad = profile;
  bad["samples"][0]["shape"].erase("queries_per_sequence");
  try {
    ValidateProfile(bad);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("samples[0].shape.queries_per_sequence"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ProfilerTest, StorageOnAMemoryFilesystemIsNoted) {
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) GTEST_SKIP() << "no /dev/shm on this machine";
  ProfileRequest request = TinyRequest(shm);
  request.grid = StorageOnly();
  const nlohmann::json profile = RunProfile(request, Presets());
  const auto by = ByOperator(profile);
  ASSERT_EQ(by.count("storage_read"), 1u) << profile["notes"].dump(1);
  EXPECT_TRUE(HasNote(profile, "keeps files in memory")) << profile["notes"].dump(1);
  // Kernels before 6.6 refuse O_DIRECT on tmpfs: then the fallback is taken and explained.
  if (by.at("storage_read").front()["direct_io"] == false) {
    EXPECT_TRUE(HasNote(profile, "refused O_DIRECT")) << profile["notes"].dump(1);
  }
}

// expert_reader: the executor's reader over a store of the model's experts, alone and beside
// computation; `hw from-profile` prices a storage tier's reads at those two samples.
TEST_F(ProfilerTest, ExpertReaderTimesTheExecutorsReaderAloneAndBesideComputation) {
  ProfileRequest request = TinyRequest(dir_);
  request.grid = StorageOnly();
  request.grid->expert_reader_store_bytes = int64_t{1} << 20;
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  const auto by = ByOperator(profile);
  ASSERT_EQ(by.count("expert_reader"), 1u) << profile["notes"].dump(1);
  const std::vector<nlohmann::json>& samples = by.at("expert_reader");
  ASSERT_EQ(samples.size(), 2u);
  // One expert of the tiny model (3 x 64 x 128 bf16); 1 MiB holds 21 of its 4 KiB-padded blocks,
  // more than the model's 2 x 4 routed experts, so the store is the whole model.
  for (size_t i = 0; i < samples.size(); ++i) {
    const nlohmann::json& s = samples[i];
    EXPECT_EQ(s["bytes"].get<double>(), 49152.0);
    EXPECT_EQ(s["shape"]["beside_compute"], i == 1) << s.dump();
    EXPECT_EQ(s["shape"]["reads_in_flight"], 2);
    EXPECT_EQ(s["shape"]["reader"], "threads");
    EXPECT_EQ(s["store_experts"], 8);
    EXPECT_TRUE(s["direct_io"].is_boolean());
    EXPECT_GT(s["median_s"].get<double>(), 0.0);
  }
  EXPECT_TRUE(HasNote(profile,
                      "expert_reader cpu: the executor's reader (threads, 2 reads in "
                      "flight) over one pass of a store of 8 of the model's 8 routed"))
      << profile["notes"].dump(1);
  // The store's folder was removed as soon as the store was open.
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    ADD_FAILURE() << "left behind: " << entry.path();

  // The schema check names a malformed reader sample's field.
  nlohmann::json bad = profile;
  for (nlohmann::json& s : bad["samples"]) {
    if (s["operator"] == "expert_reader") s["shape"]["beside_compute"] = 1;
  }
  EXPECT_NE(testing::ErrorOf([&] { ValidateProfile(bad); }).find("shape.beside_compute"),
            std::string::npos);

  const std::filesystem::path out = dir_ / "profile.json";
  WriteProfile(profile, out);
  const model::HardwareSpec hw =
      fit::StorageTierHardwareFromProfile(fit::LoadProfile(out.string()), 1e9, 0, 2);
  const auto rate = [](const nlohmann::json& s) {
    return s["bytes"].get<double>() / s["median_s"].get<double>();
  };
  EXPECT_DOUBLE_EQ(hw.host->storage_read_bandwidth_bytes_per_s, rate(samples[0]));
  EXPECT_DOUBLE_EQ(hw.host->storage_read_bandwidth_beside_compute_bytes_per_s, rate(samples[1]));
  // Beside computation the sample also has the computation's rate during the passes against the
  // same steps alone (the tiny LM head takes microseconds, the pass far longer), which prices the
  // computation while reads are in flight.
  EXPECT_FALSE(samples[0].contains("compute_rate"));
  ASSERT_TRUE(samples[1].contains("compute_rate")) << samples[1].dump();
  const double compute_rate = samples[1]["compute_rate"].get<double>();
  EXPECT_GT(compute_rate, 0.0);
  // One value a repetition, every round's (a family's bench is built afresh each round).
  EXPECT_EQ(samples[1]["compute_rate_repetitions"].get<int64_t>(),
            samples[1]["repetitions"].get<int64_t>());
  const double copy_s = 49152.0 / hw.host_link->host_to_device_bandwidth_bytes_per_s;
  EXPECT_DOUBLE_EQ(
      hw.host->compute_rate_while_storage_reads,
      fit::ComputeRateWhileReading(compute_rate, copy_s, samples[1]["median_s"].get<double>()));
}

TEST_F(ProfilerTest, AFamilyThatCannotBePreparedIsSkippedWithANote) {
  ProfileRequest request = TinyRequest(dir_ / "missing");
  request.grid = StorageOnly();
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  EXPECT_EQ(ByOperator(profile).count("storage_read"), 0u);
  EXPECT_EQ(ByOperator(profile).count("memcpy_host"), 1u);
  EXPECT_TRUE(HasNote(profile, "storage_read cpu: skipped")) << profile["notes"].dump(1);
}

// A ridge that cannot be placed (one expert token count: no slope) leaves grid.ridge null with a
// note, and the progress still reaches its total, which counted the ridge points.
TEST_F(ProfilerTest, RidgePointsThatCannotBePlacedAreNotedAndCountedDone) {
  std::ostringstream progress;
  ProfileRequest request = TinyRequest(dir_);
  request.progress = &progress;
  GridSpec grid;
  grid.expert_tokens = {4};
  grid.ridge_points = 3;
  grid.repetitions = 2;
  grid.min_time_s = 0.001;
  request.grid = grid;
  const nlohmann::json profile = RunProfile(request, Presets());
  ASSERT_NO_THROW(ValidateProfile(profile));
  EXPECT_TRUE(profile["grid"]["ridge"].is_null()) << profile["grid"].dump();
  EXPECT_EQ(ByOperator(profile).at("expert_ffn").size(), 1u);
  EXPECT_TRUE(HasNote(profile, "expert_ffn cpu: no ridge points: ")) << profile["notes"].dump(1);
  const std::string lines = progress.str();
  // Given up after the first round (counted then), the grid's point done after the last.
  EXPECT_NE(lines.find("[3/4] expert_ffn cpu: no ridge points: "), std::string::npos) << lines;
  EXPECT_NE(lines.find("[4/4] expert_ffn cpu tokens=4: median"), std::string::npos) << lines;
}

TEST_F(ProfilerTest, BadInputIsRefusedBeforeAnythingRuns) {
  ProfileRequest request = TinyRequest(dir_);
  request.model = "mixtral-8x8b";
  try {
    RunProfile(request, Presets());
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'mixtral-8x7b'"), std::string::npos)
        << e.what();
  }
  request = TinyRequest(dir_);
  request.shape.hidden = 0;
  EXPECT_THROW(RunProfile(request, Presets()), base::Error);
  request = TinyRequest(dir_);
  request.shape.kv_heads = 3;  // does not divide 4 heads
  EXPECT_THROW(RunProfile(request, Presets()), base::Error);
  request = TinyRequest(dir_);
  request.threads = -1;
  EXPECT_THROW(RunProfile(request, Presets()), base::Error);
  request = TinyRequest(dir_);
  request.grid->repetitions = 0;
  EXPECT_THROW(RunProfile(request, Presets()), base::Error);
  for (const int64_t bytes : {int64_t{1} << 19, (int64_t{64} << 30) + 1}) {
    request = TinyRequest(dir_);
    request.cache_bytes = bytes;
    try {
      RunProfile(request, Presets());
      FAIL() << "expected an error for --cache-bytes " << bytes;
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--cache-bytes must be between 1 MiB and 64 GiB"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(ProfilerTest, OutputInAMissingFolderIsRefusedAndLeavesNoFile) {
  const std::filesystem::path out = dir_ / "no-such-folder" / "profile.json";
  EXPECT_THROW(RequireOutputFolder(out), base::Error);
  EXPECT_THROW(RequireOutputFolder(dir_), base::Error);  // a folder, not a file
  EXPECT_THROW(RequireOutputFolder(""), base::Error);
  EXPECT_NO_THROW(RequireOutputFolder(dir_ / "profile.json"));
  ProfileRequest request = TinyRequest(dir_);
  request.grid = StorageOnly();
  const nlohmann::json profile = RunProfile(request, Presets());
  EXPECT_THROW(WriteProfile(profile, out), base::Error);
  EXPECT_FALSE(std::filesystem::exists(out.parent_path()));
}

// The attention benches' flush writes lines back before dropping them: whatever the length and
// alignment (the last partial line included, an empty span a no-op), the bytes are unchanged.
TEST(FlushFromCaches, WritesBackWhateverTheLengthOrAlignment) {
  std::vector<std::byte> bytes(4099);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 37 + 11);
  const std::vector<std::byte> before = bytes;
  FlushFromCaches(std::span(bytes).subspan(3, 4093));  // neither end on a line boundary
  FlushFromCaches(std::span(bytes).subspan(0, 1));
  FlushFromCaches(std::span<const std::byte>());
  EXPECT_EQ(bytes, before);
}

TEST(ValidateProfile, NamesTheFirstBadField) {
  auto message = [](const nlohmann::json& p) {
    try {
      ValidateProfile(p);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("valid");
  };
  const nlohmann::json good = {{"schema", "moelab.profile/1"},
                               {"machine",
                                {{"cpu", "x"},
                                 {"flags", {"avx2"}},
                                 {"cores", 2},
                                 {"threads", 2},
                                 {"memory_bytes", 1e9},
                                 {"l3_bytes", 1 << 25},
                                 {"isa", "avx2"},
                                 {"gpu", nullptr},
                                 {"libraries", nlohmann::json::object()}}},
                               {"model", {{"name", "m"}, {"shape", nlohmann::json::object()}}},
                               {"quick", true},
                               {"samples",
                                {{{"operator", "memcpy_host"},
                                  {"device", "cpu"},
                                  {"shape", {{"bytes", 4096}}},
                                  {"tokens", 1},
                                  {"repetitions", 3},
                                  {"median_s", 2e-6},
                                  {"min_s", 1e-6},
                                  {"max_s", 3e-6},
                                  {"stddev_s", 1e-6},
                                  {"bytes", 4096},
                                  {"flops", 0}}}},
                               {"notes", nlohmann::json::array()}};
  EXPECT_EQ(message(good), "valid");
  nlohmann::json bad = good;
  bad["schema"] = "moelab.profile/2";
  EXPECT_NE(message(bad).find("schema"), std::string::npos);
  bad = good;
  bad["samples"][0]["min_s"] = 5e-6;
  EXPECT_NE(message(bad).find("samples[0].median_s"), std::string::npos) << message(bad);
  bad = good;
  bad["samples"][0]["tokens"] = 2;
  EXPECT_NE(message(bad).find("samples[0].tokens"), std::string::npos) << message(bad);
  bad = good;
  bad["samples"][0]["operator"] = "warp_drive";
  EXPECT_NE(message(bad).find("samples[0].operator"), std::string::npos) << message(bad);
  bad = good;
  bad["machine"].erase("l3_bytes");
  EXPECT_NE(message(bad).find("machine.l3_bytes"), std::string::npos) << message(bad);
}

}  // namespace
}  // namespace moelab::profiler
