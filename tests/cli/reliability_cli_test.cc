// Issue 13 (reliability): hostile inputs and outputs through the real binary. Each case names the
// defect it pins: outputs never destroy a device or an input, deep or overflowing JSON is refused
// with file and field, sizes are bounded before any large allocation, no NaN is printed.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;
using testing::Slurp;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* kPlanSd =
    "plan sd --model qwen2-57b-a14b --draft qwen2-0.5b --hardware 2xa100-80gb-sxm --alpha 0.8 "
    "--batch 1,4 --gamma 1-2";
const char* kSmallRun =
    "run --layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 "
    "--vocab 101 --seed 1";

// A refusal: exit status 1 and one message containing `expected`, nothing on stdout.
void ExpectRefused(const std::string& args, const std::string& expected) {
  const CliRun r = RunMoelab(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  EXPECT_TRUE(Contains(r.err, expected))
      << args << "\nexpected: " << expected << "\ngot: " << r.err;
  EXPECT_FALSE(Contains(r.err, "internal error")) << r.err;
}

class ReliabilityCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("reliability-cli"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(ReliabilityCli, OutOntoAFifoWritesThroughItInsteadOfReplacingIt) {
  const auto fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = Slurp(fifo); });
  const CliRun r = RunMoelab(std::string(kPlanSd) + " --out " + fifo.string());
  reader.join();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_NO_THROW(nlohmann::json::parse(received));
}

TEST_F(ReliabilityCli, OutOntoDevNullKeepsTheDeviceAndDevFullFails) {
  EXPECT_EQ(RunMoelab(std::string(kPlanSd) + " --out /dev/null").status, 0);
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  ExpectRefused(std::string(kPlanSd) + " --out /dev/full",
                "/dev/full: write failed: No space left on device");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

TEST_F(ReliabilityCli, OutNamingAnInputOrAnotherOutputIsRefused) {
  const std::string spec = (dir_ / "spec.json").string();
  ASSERT_EQ(RunMoelab("model show --model mixtral-8x7b --layers 2 --spec-out " + spec).status, 0);
  const std::string before = Slurp(spec);
  ExpectRefused("model show --model " + spec + " --layers 3 --spec-out " + spec,
                "is an input of the same command");
  EXPECT_EQ(Slurp(spec), before);
  const std::string out = (dir_ / "sim.json").string();
  ExpectRefused(
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident --prompt 8 --tokens "
      "4 --out " +
          out + " --trace-out " + (dir_ / "." / "sim.json").string(),
      "--out and --trace-out name the same file");
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A command's outputs are one group: --out failing (a full device, a folder that takes no files)
// left the --trace-out written beside the error; and a folder that takes no files is found before
// the work, not after it.
TEST_F(ReliabilityCli, AFailingOutputLeavesNoneOfTheOthers) {
  const std::string sim =
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident --prompt 8 --tokens "
      "4 --trace-out " +
      (dir_ / "timeline.json").string();
  ExpectRefused(sim + " --out /dev/full", "/dev/full: write failed");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "timeline.json"));
  ExpectRefused(sim + " --out /proc/moelab-sim.json",
                "/proc/moelab-sim.json: cannot write: cannot create a file in folder '/proc'");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "timeline.json"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            0);  // no temporary left behind either
  const std::string out = (dir_ / "sim.json").string();
  ASSERT_EQ(RunMoelab(sim + " --out " + out).status, 0);
  EXPECT_NO_THROW(nlohmann::json::parse(Slurp(out)));
  EXPECT_NO_THROW(nlohmann::json::parse(Slurp(dir_ / "timeline.json")));
  // An empty path (an unset shell variable) is refused, not taken as "print to stdout".
  ExpectRefused(std::string(kPlanSd) + " --out ''", "--out is empty: expected a file path");
  ExpectRefused(std::string(kPlanSd) + " --out " + out + " --csv --out ''",
                "cannot be specified more than once");
  ExpectRefused(
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident --prompt 8 "
      "--tokens 4 --trace-out ''",
      "--trace-out is empty");
}

TEST_F(ReliabilityCli, DeeplyNestedJsonIsRefusedWithoutACrash) {
  const std::string deep = Write("deep.json", std::string(100000, '['));
  ExpectRefused("model show --model " + deep, "deep.json: JSON nested deeper than 256 levels");
  ExpectRefused("hw show --hardware " + deep, "nested deeper");
  const std::string deep_object =
      Write("deep2.json", "{\"schema\": " + std::string(100000, '[') + "}");
  ExpectRefused("fit predict --fit " + deep_object + " --batch 1 --gamma 1 --K 1 --E 2 --sigma 0.5",
                "nested deeper");
  ExpectRefused("fit latency --profile " + deep + " --out " + (dir_ / "fit.json").string(),
                "nested deeper");
  const std::string sim =
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident --routing ";
  ExpectRefused(sim + "popularity:" + deep, "nested deeper");
  ExpectRefused(sim + "trace:" + deep, "nested deeper");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fit.json"));
}

TEST_F(ReliabilityCli, NumberOverflowNamesFileAndField) {
  nlohmann::json model =
      nlohmann::json::parse(Slurp(testing::PresetDir() / "models/mixtral-8x7b.json"));
  std::string text = model.dump();
  const std::string key = "\"hidden_size\":";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at + key.size(), text.find_first_of(",}", at) - at - key.size(), "1e400");
  const std::string file = Write("big.json", text);
  ExpectRefused("model show --model " + file,
                "big.json: field 'hidden_size': number 1e400 is beyond the range");
}

TEST_F(ReliabilityCli, ParameterAndMemoryOverflowAreErrorsNotNegativeNumbers) {
  // --layers is bounded before any count (1,024, as a model file's num_layers: docs/limits.md);
  // a width still overflows the executor's products, named as such.
  ExpectRefused("model show --model mixtral-8x7b --layers 9223372036854775807",
                "--layers 9223372036854775807: above the limit of 1024");
  ExpectRefused("model show --model mixtral-8x7b --hidden 9223372036854775807",
                "overflows a 64-bit integer");
  ExpectRefused(
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident --accelerator-memory "
      "1e30GB",
      "above the largest size accepted, 1 EiB");
}

TEST_F(ReliabilityCli, SimulationSizesAreBoundedBeforeAnyWork) {
  const std::string sim = "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy resident ";
  ExpectRefused(sim + "--workload beam --beam 1000000000",
                "--beam 1000000000 is above the limit of 1024");
  ExpectRefused(sim + "--prompt 100000000", "--prompt 100000000 is above the limit of 1048576");
  ExpectRefused(sim + "--tokens 100000000", "--tokens 100000000 is above the limit");
  ExpectRefused(sim + "--workload batch --batch 1000000000",
                "--batch 1000000000 is above the limit of 65536");
  ExpectRefused(sim + "--prompt 40000 --tokens 4", "exceed model 'mixtral-8x7b''s 32768 positions");
}

TEST_F(ReliabilityCli, RunSizesAreBoundedBeforeWeightsAreBuilt) {
  ExpectRefused(std::string(kSmallRun) + " --batch 1000000000 --prompt 6 --tokens 4",
                "this machine has available");
  // Beam search holds two caches a beam (its children beside their parents), all allocated at
  // its start.
  ExpectRefused(std::string(kSmallRun) + " --workload beam --beam 100000000 --prompt 6 --tokens 4",
                "100000000 beams (2 x 100000000 KV caches");
  ExpectRefused(
      std::string(kSmallRun) + " --workload beam --beam 9223372036854775807 --prompt 6 --tokens 4",
      "9223372036854775807 beams (2 x 9223372036854775807 KV caches");
  ExpectRefused(std::string(kSmallRun) + " --threads 100000",
                "--threads 100000 is above the limit of 1024");
  // The default shape has 1.6 GB of weights; the refusal must come before they are built.
  const auto start = std::chrono::steady_clock::now();
  ExpectRefused("run --tokens 5000 --threads 1", "max_positions 4096");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // A prompt of 2^63 - 1 tokens wrapped the prompt + tokens check and generated prompts until
  // memory ran out.
  ExpectRefused(std::string(kSmallRun) + " --prompt 9223372036854775807 --tokens 1",
                "--prompt 9223372036854775807 is more than any executor model's positions");
  ExpectRefused(std::string(kSmallRun) + " --prompt 8 --tokens 9223372036854775807",
                "--tokens 9223372036854775807 is more than");
}

// Shapes whose sizes do not fit an int64 (or a machine) are errors naming the product, never
// "internal error" (exit 3), a crash or a hang: the executor's products used to wrap before the
// memory check (--heads 2^62 gave q_width 0 and a segfault, --experts 9e18 bad_alloc), and the
// weight estimate looped once per layer (--layers 9e18 never finished).
TEST_F(ReliabilityCli, UnallocatableRunShapesAreRefusedBeforeAnyAllocation) {
  const auto run = [](const std::string& layers, const std::string& heads,
                      const std::string& head_dim, const std::string& experts,
                      const std::string& intermediate) {
    return "run --hidden 64 --top-k 2 --kv-heads 2 --vocab 101 --seed 1 --prompt 2 --tokens 1 "
           "--threads 1 --layers " +
           layers + " --heads " + heads + " --head-dim " + head_dim + " --experts " + experts +
           " --intermediate " + intermediate;
  };
  const std::string huge = "9000000000000000000";
  const auto start = std::chrono::steady_clock::now();
  ExpectRefused(
      run("2", "4", "16", huge, "96"),
      "experts x hidden x intermediate: 9000000000000000000 x 64 overflows a 64-bit integer");
  ExpectRefused(run("2", "4", huge, "4", "96"),
                "heads x head_dim: 4 x 9000000000000000000 overflows");
  ExpectRefused(run("2", "4611686018427387904", "16", "4", "96"),
                "heads x head_dim: 4611686018427387904 x 16 overflows");
  ExpectRefused(run("2", "4", "16", "4", huge),
                "experts x hidden x intermediate: 256 x 9000000000000000000 overflows");
  // --layers has the model files' bound (it used to reach the weight estimate, whose loop over
  // 9e18 layers never finished, and then that estimate's refusal); within the bound, weights
  // beyond the machine are refused from the estimate.
  ExpectRefused(run(huge, "4", "16", "4", "96"), "--layers 9000000000000000000: above the limit");
  ExpectRefused(run("1025", "4", "16", "4", "96"), "--layers 1025: above the limit of 1024");
  ExpectRefused(run("1024", "4", "16", "4", "100000000"), "GB of weights but this machine has");
  ExpectRefused(
      run("2", "4", "16", "4", "96") + " --max-positions " + huge,
      "max_positions: must be 2..1048576 (the rotary table and attention scores are sized by it)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// `fit sd` on a huge CSV is refused from its size before any byte is read (a 1 GB file took 7.3
// GB); a sparse file makes the size without the disk.
TEST_F(ReliabilityCli, AnOversizedMeasurementFileIsRefusedFromItsSize) {
  const auto big = dir_ / "big.csv";
  std::ofstream(big) << "batch,gamma,K,E,sigma,speedup\n";
  std::filesystem::resize_file(big, (std::uintmax_t{1} << 30));
  ExpectRefused("fit sd --measurements " + big.string() +
                    " --model qwen2-57b-a14b --draft qwen2-0.5b --hardware 2xa100-80gb-sxm --out " +
                    (dir_ / "fit.json").string(),
                "measurements file is 1073741824 bytes, above the limit of 67108864 bytes");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fit.json"));
}

TEST_F(ReliabilityCli, AFifoGivenWhereAFileIsNeededIsRefusedWithoutBlocking) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout` turns a hang into exit 124, which fails the status check instead of the suite.
  ExpectRefused(std::string(kSmallRun) + " --prompt 4 --tokens 2 --weights " + fifo.string(),
                "not a regular file");
  ExpectRefused("fit sd --measurements " + fifo.string() +
                    " --model qwen2-57b-a14b --draft qwen2-0.5b --hardware 2xa100-80gb-sxm --out " +
                    (dir_ / "fit.json").string(),
                "must be a regular file, but this is a FIFO");
}

TEST_F(ReliabilityCli, SilentAcceptancesAreRefused) {
  ExpectRefused(std::string(kPlanSd) + " --dtype xyz", "unknown compute data type 'xyz'");
  const std::string no_type =
      Write("config.json", R"({"hidden_size": 64, "num_hidden_layers": 2})");
  ExpectRefused("model show --model " + no_type, "missing field 'model_type'");
  // A one-sample profile: no curve can be fitted, so no fit file is written.
  nlohmann::json profile =
      nlohmann::json::parse(Slurp(testing::TestDataDir() / "profiles/quick-cpu.json"));
  profile["samples"] = nlohmann::json::array({profile["samples"][0]});
  const std::string one = Write("one.json", profile.dump());
  const std::string fit = (dir_ / "fit.json").string();
  ExpectRefused("fit latency --profile " + one + " --out " + fit,
                "no operator curve could be fitted");
  EXPECT_FALSE(std::filesystem::exists(fit));
  // A policy option another policy reads, an unknown device, a 64-bit peak priced at a 16-bit
  // one: each was taken without a word.
  ExpectRefused(
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy on-demand --prompt "
      "8 --tokens 2 --speculative-recall 0.3",
      "--speculative-recall sets lru-prefetch's speculative gate; policy 'on-demand' has none");
  ExpectRefused("fit calibrate --profile " +
                    (testing::TestDataDir() / "profiles/quick-cpu.json").string() + " --device tpu",
                "--device must be cpu or gpu, got 'tpu'");
  ExpectRefused(std::string(kPlanSd) + " --dtype fp64", "no peak FLOP/s for data type 'fp64'");
  // Ranges and lists where they do not belong say what is wrong with them.
  ExpectRefused("sim sd --alpha 0.9:0.1:0.1", "expected start:stop:step with start <= stop");
  ExpectRefused("plan sd --alpha 0.5,0.6", "(one value here, not a list or range)");
}

// Boost guessed a unique prefix (--hard ran as --hardware, --gam as --gamma): a half-typed name
// was taken without a word, and an abbreviation in a script changed meaning when an option was
// added. Exact names only; --draft is the draft model's name in every command that takes one.
TEST_F(ReliabilityCli, OptionNamesAreExactNeverGuessedFromAPrefix) {
  ExpectRefused("plan sd --model qwen2-57b-a14b --draft qwen2-0.5b --hard 2xa100-80gb-sxm",
                "unrecognised option '--hard'");
  ExpectRefused(std::string(kPlanSd) + " --conte 512", "unrecognised option '--conte'");
  const std::string serve =
      "sim serve --model mixtral-8x7b --hardware 8xh100-sxm --arrivals poisson:1 --requests 4 "
      "--prompt-tokens 16 --output-tokens 4 --seed 1 --gamma 2 ";
  const CliRun by_draft = RunMoelab(serve + "--draft qwen2-0.5b --json");
  const CliRun by_draft_model = RunMoelab(serve + "--draft-model qwen2-0.5b --json");
  ASSERT_EQ(by_draft.status, 0) << by_draft.err;
  ASSERT_EQ(by_draft_model.status, 0) << by_draft_model.err;
  const auto summary = [](const std::string& out) {
    nlohmann::json json = nlohmann::json::parse(out);
    json.erase("provenance");
    return json;
  };
  EXPECT_EQ(summary(by_draft.out), summary(by_draft_model.out));
  EXPECT_NE(summary(by_draft.out), summary(RunMoelab(serve + "--json").out));  // llama-3.2-1b
  ExpectRefused(serve + "--draft qwen2-0.5b --draft-model qwen2-0.5b", "give it once");
  ExpectRefused(
      "plan capacity --model qwen2-57b-a14b --hardware h100-sxm --rate 1 "
      "--slo-ttft-p99 1 --slo-tpot-p99 0.1 --draft qwen2-0.5b",
      "--draft applies with --gamma G (G >= 1) only");
}

// A fit of a profile that measured another draft prices that draft whatever --draft names: refused.
TEST_F(ReliabilityCli, AFitPricesOnlyTheDraftItsProfileMeasured) {
  nlohmann::json fit =
      nlohmann::json::parse(Slurp(testing::TestDataDir() / "fits/latency-quick-cpu.json"));
  fit["draft"] = {{"name", "llama-3.2-1b"}};
  const std::string path = Write("fit.json", fit.dump());
  const std::string sd =
      "plan sd --model mixtral-8x7b --profile " + path + " --batch 1,2 --gamma 1-2 --draft ";
  EXPECT_EQ(RunMoelab(sd + "llama-3.2-1b").status, 0);
  ExpectRefused(sd + "qwen2-0.5b", "the profile measured draft 'llama-3.2-1b', not 'qwen2-0.5b'");
  ExpectRefused("sim serve --model mixtral-8x7b --profile " + path +
                    " --gamma 2 --draft qwen2-0.5b --arrivals poisson:1 --requests 4 "
                    "--prompt-tokens 16 --output-tokens 4 --seed 1",
                "the profile measured draft 'llama-3.2-1b', not 'qwen2-0.5b'");
}

// A misspelt field of a latency fit (top level, or an operator curve's) was ignored: refused by
// name.
TEST_F(ReliabilityCli, AFitsUnknownFieldsAreRefused) {
  nlohmann::json fit =
      nlohmann::json::parse(Slurp(testing::TestDataDir() / "fits/latency-quick-cpu.json"));
  const std::string sd = "plan sd --model mixtral-8x7b --batch 1 --gamma 1 --profile ";
  EXPECT_EQ(RunMoelab(sd + Write("fit.json", fit.dump())).status, 0);
  nlohmann::json misspelt = fit;
  misspelt["operator"] = misspelt["operators"];
  ExpectRefused(sd + Write("misspelt.json", misspelt.dump()),
                "field 'operator': unknown (not a field of a latency fit");
  fit["operators"][0]["bset"] = "linear";
  ExpectRefused(
      sd + Write("curve.json", fit.dump()),
      "field 'operators[0].bset': unknown (not a field of a latency fit's operator curve");
}

// A profile time beyond base::kMaxSeconds (1e6 s) is refused when the profile is read, naming the
// sample, before any fit: `fit latency` used to take any finite time and left out the forms whose
// squared residuals overflowed (expert_ffn times near 1e305 s), writing the other curves; times are
// now bounded as a hardware file's, so such a profile writes nothing.
TEST_F(ReliabilityCli, FitLatencyRefusesTimesBeyondTheBound) {
  nlohmann::json profile =
      nlohmann::json::parse(Slurp(testing::TestDataDir() / "profiles/quick-cpu.json"));
  size_t first_ffn = profile["samples"].size();
  for (size_t i = 0; i < profile["samples"].size(); ++i) {
    nlohmann::json& sample = profile["samples"][i];
    if (sample["operator"] != "expert_ffn") continue;
    first_ffn = std::min(first_ffn, i);
    sample["median_s"] = sample["median_s"].get<double>() * 1e305;
    // The repetitions' spread must agree with the median (refused otherwise): not this test's.
    for (const char* spread : {"min_s", "max_s", "repetition_s"}) sample.erase(spread);
  }
  ASSERT_LT(first_ffn, profile["samples"].size());
  const std::string huge = Write("huge.json", profile.dump());
  const std::string fit = (dir_ / "fit.json").string();
  ExpectRefused("fit latency --profile " + huge + " --out " + fit,
                "field 'samples[" + std::to_string(first_ffn) +
                    "].median_s': expected a time of at most 1e+06 seconds");
  EXPECT_FALSE(std::filesystem::exists(fit));
  // At the bound itself the profile is read and fitted.
  profile["samples"][first_ffn]["median_s"] = 1e6;
  for (auto& sample : profile["samples"]) {
    if (sample["median_s"].get<double>() > 1e6) sample["median_s"] = 1e-3;
  }
  const CliRun r =
      RunMoelab("fit latency --profile " + Write("bound.json", profile.dump()) + " --out " + fit);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(fit));
}

TEST_F(ReliabilityCli, ControlBytesFromInputNeverReachTheTerminal) {
  const std::string file = Write("evil.json", "{\"schema\": \"\\u001b]0;pwned\\u0007\\u001b[2J\"}");
  const CliRun r = RunMoelab("model show --model " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(Contains(r.err, "\x1b")) << r.err;
  EXPECT_FALSE(Contains(r.err, "\x07")) << r.err;
}

// Issue 40 (reliability of the newer surfaces): every count, size, time and rate an option or
// file carries has one named bound (base/limits.h, docs/limits.md), checked before any work;
// refusals name the option or field as the user wrote it; validate leaves nothing behind; input is
// never quietly changed.

// The interface every refusal keeps: exit 1, one line on stderr naming `expected`, no control
// bytes, nothing on stdout, no internal error.
void ExpectRefusedInOneLine(const std::string& args, const std::string& expected) {
  const CliRun r = RunMoelab(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  EXPECT_TRUE(Contains(r.err, expected))
      << args << "\nexpected: " << expected << "\ngot: " << r.err;
  EXPECT_FALSE(Contains(r.err, "internal error")) << args << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  ASSERT_FALSE(r.err.empty()) << args;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": more than one line\n" << r.err;
  for (const char c : r.err.substr(0, r.err.size() - 1))
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) << args << ": control byte";
}

const char kTinyRun[] =
    "run --layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 --vocab 101 --prompt 4 --tokens 2 --threads 1";
const char kSimOffload[] =
    "sim offload --hardware rtx-3090 --policy lru-prefetch --accelerator-memory 24GB";

class BoundsCli : public ReliabilityCli {
 protected:
  // The Mixtral-8x7B Hugging Face config with `field` set to `value`.
  std::string HfConfig(const std::string& name, const std::string& field, int64_t value) {
    nlohmann::json config =
        nlohmann::json::parse(Slurp(testing::TestDataDir() / "hf_configs/mixtral-8x7b.json"));
    config[field] = value;
    return Write(name, config.dump());
  }
};

TEST_F(BoundsCli, EveryCountAndSizeHasABoundCheckedBeforeAnyWork) {
  const std::string layers = HfConfig("layers.json", "num_hidden_layers", 100000);
  const std::string experts = HfConfig("experts.json", "num_local_experts", 100000);
  const std::string offload = std::string(kTinyRun) +
                              " --offload lru-prefetch --expert-memory 1GB"
                              " --offload-dir " +
                              (dir_ / "store").string();
  const std::string profile = (testing::TestDataDir() / "profiles/quick-cpu.json").string();
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      // Readers in flight: one thread or io_uring entry with a buffer each.
      {offload + " --offload-readers 1000000000", "--offload-readers 1000000000: above the limit"},
      {offload + " --offload-readers 65", "--offload-readers 65: above the limit of 64"},
      {offload + " --offload-reader io_uring --offload-readers 5000", "--offload-readers 5000"},
      {"hw from-profile " + profile + " --memory 8GB --reads-in-flight 5000",
       "--reads-in-flight 5000: above the limit of 64"},
      // Threads: 1,024 wherever a pool is started.
      {"run --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --vocab 101 "
       "--threads 5000",
       "--threads 5000 is above the limit of 1024"},
      {"validate --quick --threads 5000", "--threads 5000: above the limit of 1024"},
      {"profile --model mixtral-8x7b --out " + (dir_ / "p.json").string() + " --threads 5000",
       "--threads 5000: above the limit of 1024"},
      {std::string(kSimOffload) + " --model mixtral-8x7b --cpu-threads 5000",
       "--cpu-threads 5000: above the limit of 1024"},
      // Layers and experts: the same bound for sim, plan and run, from files and options.
      {std::string(kSimOffload) + " --model " + layers, "'num_hidden_layers': expected an integer"},
      {std::string(kSimOffload) + " --model " + experts,
       "'num_local_experts': expected an integer"},
      {"plan offload --hardware rtx-3090 --model " + layers, "'num_hidden_layers'"},
      {"plan offload --hardware rtx-3090 --model " + experts, "'num_local_experts'"},
      {"run --model " + layers, "'num_hidden_layers'"},
      {"model show --model " + experts, "from 1 to 4096"},
      {"run --experts 100000 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --vocab 101",
       "experts: must be at most 4096"},
      // --layers overrides: the model files' 1,024, wherever an executor shape is taken.
      {"model show --model mixtral-8x7b --layers 100000",
       "--layers 100000: above the limit of 1024"},
      {"run --layers 1025 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --vocab 101",
       "--layers 1025: above the limit of 1024"},
      {std::string(kTinyRun) + " --workload sd --draft mixtral-8x7b --draft-layers 100000",
       "--draft-layers 100000: above the limit of 1024"},
      {"profile --model mixtral-8x7b --layers 100000 --out " + (dir_ / "p.json").string(),
       "--layers 100000: above the limit of 1024"},
      {"validate --quick --layers 100000", "--layers 100000: above the limit of 1024"},
      // Seconds: finite, >= 0, at most 1e6.
      {std::string(kSimOffload) + " --model mixtral-8x7b --layer-overhead-s 1e308",
       "--layer-overhead-s 1e+308 s: above the limit of 1e+06 s"},
      {std::string(kSimOffload) + " --model mixtral-8x7b --layer-overhead-s 1e300",
       "--layer-overhead-s 1e+300 s: above the limit"},
      {std::string(kSimOffload) + " --model mixtral-8x7b --kernel-launch-s 1e300",
       "--kernel-launch-s 1e+300 s: above the limit"},
      // Bytes: 2^60 for every memory size.
      {"plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 1e300",
       "--memory 1e+300: expected at most 2^60 bytes"},
      {"plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 1e300",
       "at most 2^60 bytes"},
  };
  for (const Case& c : cases) ExpectRefusedInOneLine(c.args, c.expected);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "store")) << "a refused run built its store";
}

TEST_F(BoundsCli, FileTimesAndRatesAreBounded) {
  // A profile whose storage reads took 1e300 s was fitted and written on as hardware.
  nlohmann::json profile =
      nlohmann::json::parse(Slurp(testing::TestDataDir() / "profiles/quick-cpu.json"));
  for (nlohmann::json& sample : profile["samples"]) {
    if (sample["operator"] == "storage_read") {
      sample["median_s"] = 1e300;
      sample["max_s"] = 1e300;
    }
  }
  const std::string slow = Write("slow.json", profile.dump());
  const std::string hw = (dir_ / "hw.json").string();
  ExpectRefusedInOneLine("hw from-profile " + slow + " --memory 8GB --out " + hw, "median_s");
  EXPECT_FALSE(std::filesystem::exists(hw));

  nlohmann::json hardware = nlohmann::json::parse(RunMoelab("hw show rtx-3090 --json").out);
  hardware["host_link"]["latency_s"] = 1e300;
  ExpectRefusedInOneLine("hw show " + Write("latency.json", hardware.dump()),
                         "'host_link.latency_s': expected at most 1e+06 seconds");
  hardware["host_link"]["latency_s"] = 1e-6;
  hardware["accelerator"]["memory_bandwidth_bytes_per_s"] = 1e300;
  ExpectRefusedInOneLine("hw show " + Write("bandwidth.json", hardware.dump()),
                         "'accelerator.memory_bandwidth_bytes_per_s': expected at most 2^60 bytes");
  // A top-level field the reader never asks for (here sm_count beside "accelerator", not in it)
  // was ignored; hw show's own output still reads back.
  hardware["accelerator"]["memory_bandwidth_bytes_per_s"] = 936e9;
  EXPECT_EQ(RunMoelab("hw show " + Write("roundtrip.json", hardware.dump())).status, 0);
  hardware["sm_count"] = 82;
  ExpectRefusedInOneLine("hw show " + Write("misplaced.json", hardware.dump()),
                         "field 'sm_count': unknown (not a field of moelab.hardware/1");
}

TEST_F(BoundsCli, MessagesNameTheOptionTheUserGave) {
  ExpectRefusedInOneLine(std::string(kTinyRun) +
                             " --offload bogus --expert-memory 1GB --offload-dir " +
                             (dir_ / "store").string(),
                         "--offload: unknown offload policy 'bogus'");
  const CliRun policy = RunMoelab(std::string(kTinyRun) + " --offload bogus --expert-memory 1GB");
  EXPECT_FALSE(Contains(policy.err, "--policy")) << policy.err;
  ExpectRefusedInOneLine(std::string(kTinyRun) +
                             " --offload lru-prefetch --expert-memory 1GB "
                             "--offload-calibration gate --offload-dir " +
                             (dir_ / "store").string(),
                         "--offload-calibration gate: ");
  // Seeds are whole numbers from 0: Boost read "-1" as 2^64-1.
  ExpectRefusedInOneLine(std::string(kSimOffload) + " --model mixtral-8x7b --seed -1",
                         "the argument ('-1') for option '--seed' is invalid");
  ExpectRefusedInOneLine(std::string(kTinyRun) + " --seed -1", "'--seed' is invalid");
  ExpectRefusedInOneLine("validate --quick --seed -1", "'--seed' is invalid");
  ExpectRefusedInOneLine("plan offload --model mixtral-8x7b --hardware rtx-3090 --seed -5",
                         "'--seed' is invalid");
  // Input never quietly changed: a repeated key, a trace step of an unknown kind, --repeat 0,
  // --offload-dir "", a prompt past the model's positions.
  nlohmann::json hardware = nlohmann::json::parse(RunMoelab("hw show rtx-3090 --json").out);
  std::string text = hardware.dump();
  text.insert(1, "\"name\": \"first\", ");
  ExpectRefusedInOneLine("hw show " + Write("repeated.json", text), "key repeated in its object");
  ExpectRefusedInOneLine("validate --quick --repeat 0", "--repeat 0: must be at least 1");
  // plan offload's cells speak of its --memory, not the simulator's --accelerator-memory.
  const CliRun plan = RunMoelab(
      "plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 12 --policies lru-prefetch "
      "--prompt 32 --tokens 8 --json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_TRUE(
      Contains(plan.out, "raise --memory (or lower --staging-buffers in moelab sim offload)"))
      << plan.out;
  EXPECT_FALSE(Contains(plan.out, "--accelerator-memory")) << plan.out;
  ExpectRefusedInOneLine(std::string(kTinyRun) +
                             " --offload lru-prefetch --expert-memory 1GB "
                             "--offload-dir ''",
                         "--offload-dir");
  ExpectRefusedInOneLine("plan hardware --model mixtral-8x7b --tpot-max 1 --prompt 100000000",
                         "--prompt 100000000 exceeds model 'mixtral-8x7b''s 32768 positions");

  const std::string trace = (dir_ / "trace.json").string();
  ASSERT_EQ(RunMoelab(std::string(kTinyRun) + " --trace-out " + trace).status, 0);
  nlohmann::json recorded = nlohmann::json::parse(Slurp(trace));
  recorded["steps"][1]["kind"] = "teleport";
  ExpectRefusedInOneLine(
      std::string(kTinyRun) + " --routing trace:" + Write("odd.json", recorded.dump()),
      "'steps[1].kind': expected prefill, decode, beam, draft, verify or warm-up");

  // Control bytes and a 300-character path: escaped and shortened, one line.
  ExpectRefusedInOneLine("model show --model " + (dir_ / "a\x1b[31mred").string(), "\\x1b");
  const std::string long_path = "/nonexistent/" + std::string(300, 'p') + ".json";
  const CliRun shortened = RunMoelab("model show --model " + long_path);
  EXPECT_EQ(shortened.status, 1);
  EXPECT_LT(shortened.err.size(), 300u) << shortened.err;
}

TEST_F(BoundsCli, ValidateLeavesNothingBehindAndNeverMixesIntoAFullFolder) {
  // Under a regular file: a message, not "internal error: filesystem error".
  const std::string file = Write("plain", "x");
  ExpectRefusedInOneLine("validate --quick --out " + file + "/sub", "is not a folder");
  // A folder with the user's files in it is refused, the files untouched.
  const std::string full = (dir_ / "full").string();
  std::filesystem::create_directories(full);
  Write("full/mine.txt", "keep");
  ExpectRefusedInOneLine("validate --quick --out " + full, "folder not empty");
  EXPECT_EQ(Slurp(dir_ / "full/mine.txt"), "keep");
  // A refused --profile leaves no file in --out (its routing traces were left behind), in a new
  // folder or in an empty one.
  for (const std::string name : {"new", "empty"}) {
    const std::filesystem::path out = dir_ / name;
    if (name == "empty") std::filesystem::create_directories(out);
    const CliRun r =
        RunMoelab("validate --quick --quiet --profile " + file + " --out " + out.string() +
                  " --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --vocab 101");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, "malformed JSON")) << r.err;
    EXPECT_TRUE(!std::filesystem::exists(out) || std::filesystem::is_empty(out)) << out;
    EXPECT_EQ(std::filesystem::exists(out), name == "empty");
  }
}

TEST_F(BoundsCli, NewcomerFriction) {
  const CliRun help = RunMoelab("validate --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_FALSE(Contains(help.out, "0.80000000000000004")) << help.out;
  EXPECT_TRUE(Contains(help.out, "--alpha arg (=0.8)")) << help.out;
  // fMoE on a 2-layer model runs on its default distance (it failed on --prefetch-distance 3).
  const std::string two = HfConfig("two.json", "num_hidden_layers", 2);
  const CliRun fmoe = RunMoelab("sim offload --hardware rtx-3090 --policy fmoe --model " + two +
                                " --accelerator-memory 8GB --tokens 4 --json");
  EXPECT_EQ(fmoe.status, 0) << fmoe.err;
  ExpectRefusedInOneLine("sim offload --hardware rtx-3090 --policy fmoe --model " + two +
                             " --accelerator-memory 8GB --prefetch-distance 3",
                         "--prefetch-distance 3 must be below the 2 MoE layers");
}

}  // namespace
}  // namespace moelab::cli
