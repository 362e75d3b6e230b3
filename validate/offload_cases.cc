#include "validate/offload_cases.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/atomic_file.h"
#include "base/error.h"
#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"
#include "executor/offload/reader_pass.h"
#include "kernels/matmul.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "fit/profile_cost_source.h"
#include "fit/storage_tier_hardware.h"
#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"
#include "model/parameter_count.h"
#include "policies/memory_plan.h"
#include "report/format.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"
#include "routing/routing_trace.h"
#include "policies/calibration.h"
#include "sim/offload_simulator.h"
#include "validate/offload_ranking.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {
namespace {

// Decode: a short prompt and 8 decode steps; prefill: 256 prompt tokens, TTFT only.
constexpr int64_t kDecodePrompt = 16, kDecodeOutput = 9, kPrefillPrompt = 256;

struct Workload {
  CaseKind kind;
  int64_t batch, prompt, output_tokens;
};
constexpr Workload kWorkloads[] = {{CaseKind::kOffload, 1, kDecodePrompt, kDecodeOutput},
                                   {CaseKind::kOffload, 4, kDecodePrompt, kDecodeOutput},
                                   {CaseKind::kOffloadPrefill, 1, kPrefillPrompt, 1}};

// What both engines replay for one workload: the executor's gate routing, the calibration the
// policies start from, and the prompts.
struct Recorded {
  routing::RoutingTrace trace;
  std::string file;
  policies::RoutingCalibration calibration;
  std::vector<executor::TokenIds> prompts;
  std::shared_ptr<const policies::GateSignals> signals;  // [case]: filled by the first run
};

struct Bench {
  executor::ExecutorConfig config;
  uint64_t seed = 1;
  kernels::ThreadPool* pool = nullptr;
  const executor::ModelWeights* weights = nullptr;
  const executor::offload::ExpertStore* store = nullptr;
  executor::Transformer* model = nullptr;  // shared by the runs, each with its own runtime
};

// One run of a case on the offload runtime.
struct OffloadRun {
  double value = 0;    // the case's quantity: TPOT or TTFT
  double total_s = 0;  // the whole run
  std::vector<double> decode_steps_s;
  executor::offload::OffloadStats stats;
  std::shared_ptr<executor::ExecutionTimeline> timeline;  // with --timelines
};

// A routing source replayed from a run's first pass: the shared model numbers its passes across
// runs, and forced routing asks for the step of that number.
class FromFirstPass : public routing::RoutingSource {
 public:
  FromFirstPass(std::unique_ptr<routing::RoutingSource> source, int64_t first_pass)
      : source_(std::move(source)), first_pass_(first_pass) {}
  std::string Describe() const override { return source_->Describe(); }
  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    source_->Route(step - first_pass_, layer, tokens, out);
  }

 private:
  std::unique_ptr<routing::RoutingSource> source_;
  int64_t first_pass_;
};

OffloadRun RunExecutor(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                       routing::RoutingTrace* record, bool timeline = false) {
  executor::Transformer& model = *bench.model;
  std::shared_ptr<executor::ExecutionTimeline> recorded_timeline;
  if (timeline) recorded_timeline = std::make_shared<executor::ExecutionTimeline>(model.passes());
  executor::offload::OffloadOptions options;
  options.timeline = recorded_timeline.get();
  options.policy = c.policy;
  options.expert_memory_bytes = c.expert_slots * bench.store->key().payload_bytes();
  options.popularity = recorded.calibration.popularity;
  options.history = recorded.calibration.history;
  options.seed = bench.seed;
  options.record_decisions =
      true;  // every run alike; the first run's gate signals feed the simulator
  executor::offload::OffloadRuntime runtime(bench.config, *bench.store, options);
  model.set_expert_provider(&runtime);
  model.set_timeline(recorded_timeline.get());
  // The model outlives this run's runtime: its provider is cleared when the run ends, error or not
  // (the next run's Forward takes whichever provider is set then).
  struct Detach {
    executor::Transformer& model;
    ~Detach() {
      model.set_expert_provider(nullptr);
      model.set_timeline(nullptr);
    }
  } detach{model};
  std::unique_ptr<routing::RoutingSource> routing;
  executor::DecodeOptions decode;
  decode.output_tokens = c.output_tokens;
  decode.seed = bench.seed;
  if (record) {
    decode.record = record;
  } else {
    routing = std::make_unique<FromFirstPass>(
        routing::MakeTraceRouting(recorded.trace, bench.config.num_layers, bench.config.num_experts,
                                  bench.config.top_k, recorded.file),
        model.passes());
    decode.routing = routing.get();
  }
  const executor::DecodeResult result = executor::RunDecode(model, recorded.prompts, decode);
  OffloadRun run;
  run.value = c.kind == CaseKind::kOffloadPrefill
                  ? result.prefill_s
                  : result.decode_s / static_cast<double>(c.output_tokens - 1);
  run.total_s = result.prefill_s + result.decode_s;
  for (const executor::StepTime& step : result.steps) {
    if (step.kind == "decode") run.decode_steps_s.push_back(step.seconds);
  }
  run.stats = runtime.Stats();
  run.timeline = std::move(recorded_timeline);
  return run;
}

// The storage tier's read bandwidth as the simulator is given it: alone, and while the host
// computes (0: the same). All zero: the profile's own (its expert_reader samples).
struct StorageRates {
  double alone_bytes_per_s = 0;
  double beside_compute_bytes_per_s = 0;
  // The computation's rate beside the reader's passes against alone (TimeReaderPass); 0: the
  // simulator's computation does not slow while reads are in flight.
  double measured_compute_rate = 0;
};

// The simulator's rate of the computation while reads are in flight, from `storage`'s measured one:
// an expert's checksum and copy at the link's bandwidth, one read landing every expert's bytes at
// the bandwidth beside computation (fit::ComputeRateWhileReading). 1 where nothing was measured.
double CoupledComputeRate(const StorageRates& storage, double expert_bytes,
                          double link_bytes_per_s) {
  if (!(storage.measured_compute_rate > 0 && storage.beside_compute_bytes_per_s > 0)) return 1.0;
  return fit::ComputeRateWhileReading(storage.measured_compute_rate,
                                      expert_bytes / link_bytes_per_s,
                                      expert_bytes / storage.beside_compute_bytes_per_s);
}

sim::SimResult Simulate(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                        const fit::Profile& profile, const StorageRates& storage,
                        const std::shared_ptr<const model::CostSource>& costs, int threads,
                        bool record_timeline = false) {
  sim::SimConfig config;
  config.record_timeline = record_timeline;
  config.model = executor::SpecFromExecutorConfig(bench.config);
  config.policy = c.policy;
  config.workload.kind = c.kind == CaseKind::kOffloadPrefill ? sim::WorkloadKind::kPrefill
                         : c.batch > 1                       ? sim::WorkloadKind::kBatch
                                                             : sim::WorkloadKind::kDecode;
  config.workload.batch = c.batch;
  config.workload.prompt_tokens = c.prompt;
  config.workload.output_tokens = c.output_tokens;
  config.routing = routing::ParseRoutingSpec("trace:" + recorded.file);
  config.seed = bench.seed;
  config.cpu_threads = threads;
  config.accelerator_costs = costs;
  config.host_costs = costs;
  config.gate_signals = recorded.signals;
  // The executor's budget holds expert_slots experts beside the non-expert weights it keeps in RAM
  // anyway: the simulator's memory is those bytes plus the same slots (and half of one, so
  // rounding cannot take a slot away).
  const policies::ModelMemory memory =
      policies::ModelMemoryOf(config.model, config.cost.kv_bits, config.workload.KvTokens());
  double dense = 0;
  for (double bytes : memory.dense_layer_bytes) dense += bytes;
  const double memory_bytes = memory.fixed_bytes + dense +
                              (static_cast<double>(c.expert_slots) + 0.5) *
                                  static_cast<double>(model::ExpertBytes(config.model));
  config.hardware =
      fit::StorageTierHardwareFromProfile(profile, memory_bytes, storage.alone_bytes_per_s,
                                          executor::offload::OffloadOptions{}.reader_threads);
  if (storage.alone_bytes_per_s > 0) {
    config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s =
        storage.beside_compute_bytes_per_s;
    config.hardware.host->compute_rate_while_storage_reads =
        CoupledComputeRate(storage, static_cast<double>(model::ExpertBytes(config.model)),
                           config.hardware.host_link->host_to_device_bandwidth_bytes_per_s);
  }
  config.accelerator_bytes = memory_bytes;
  std::unique_ptr<routing::RoutingSource> routing =
      routing::MakeTraceRouting(recorded.trace, bench.config.num_layers, bench.config.num_experts,
                                bench.config.top_k, recorded.file);
  sim::SimResult simulated = sim::SimulateOffload(config, *routing, recorded.calibration);
  if (c.kind == CaseKind::kOffload && !simulated.tpot_s)
    throw base::Error("validate offload: the simulator gave no TPOT for " + c.Label() + " (a bug)");
  return simulated;
}

// The line of a storage-tier hardware's sources that says how its reads were priced.
std::string ReadPricingSource(const model::HardwareSpec& hardware) {
  for (const std::string& source : hardware.sources) {
    if (source.find("expert_reader") != std::string::npos) return source;
  }
  return "no source says (a bug)";
}

// A case's measured quantity over its runs: the median of the runs' values, or for a decode of
// three runs or more each step's median over the runs, summed, as the in-memory cases (the runs
// make the same decisions, so their steps are the same work); with the runs' min and max.
struct Measured {
  double value = 0, min = 0, max = 0;
  int runs = 0;
};

Measured MeasuredOf(const ValidationCase& c, const std::vector<OffloadRun>& runs) {
  std::vector<double> values;
  std::vector<std::vector<double>> decode_steps;
  for (const OffloadRun& run : runs) {
    values.push_back(run.value);
    decode_steps.push_back(run.decode_steps_s);
  }
  if (values.empty()) throw base::Error("validate offload: " + c.Label() + " has no run (a bug)");
  Measured m;
  m.value = Median(values);
  const std::optional<double> steps_sum = SumOfStepMedians(decode_steps);
  if (c.kind == CaseKind::kOffload && values.size() >= 3 && steps_sum)
    m.value = *steps_sum / static_cast<double>(c.output_tokens - 1);
  m.min = *std::min_element(values.begin(), values.end());
  m.max = *std::max_element(values.begin(), values.end());
  m.runs = static_cast<int>(values.size());
  return m;
}

// Cases of the same workload on each side of a case whose reads are set beside its own: a few
// seconds of runs, inside the minutes over which this cloud disk's delivered bandwidth moves.
constexpr int kNeighbourReach = 2;

// The storage probe: the store's experts read in order, pass after pass, for at least
// kProbeSeconds, by `readers` threads each doing what a reader thread of the executor does
// (ExpertStore::Read: an O_DIRECT pread of the block, buffered when O_DIRECT was refused, then the
// checksum and the copy into an expert's buffers): experts / wall time, in bytes. The reader's
// pipeline, not the bare disk: while a thread checksums, its next read is not issued, and the
// cloud disk here delivers less with one read in flight than with two. Bare preads of one pass
// (a tenth of a second) read 1.25-2.1 GB/s across six validations while their stream-all decodes
// (288 reads each) got 1.52-1.85 GB/s, and the decode predictions followed the probe (-10 % to
// +26 %). The checksum and copy's CPU time is still charged to the cores as the simulator's link.
constexpr double kProbeSeconds = 0.5;

// `threads` threads read the store's experts in turn, pass after pass, each through its own
// `read(layer, expert)` (from `make_read`, called once per thread), until at least `min_reads`
// were taken and `seconds` have passed: experts read / wall time, times `bytes_per_read`. The
// first error stops every thread and is rethrown (it names the file and the expert).
double ProbeReads(const executor::offload::ExpertStore& store, int threads, int64_t min_reads,
                  double seconds, double bytes_per_read,
                  const std::function<std::function<void(int64_t, int64_t)>()>& make_read) {
  const int64_t experts = store.key().experts;
  const int64_t blocks = store.key().moe_layers * experts;
  std::atomic<int64_t> next{0}, read{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::function<void(int64_t, int64_t)>> reads;
  for (int t = 0; t < threads; ++t) reads.push_back(make_read());
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      try {
        for (int64_t i = next++; !failed && (i < min_reads || elapsed() < seconds); i = next++) {
          const int64_t at = i % blocks;
          reads[static_cast<size_t>(t)](at / experts, at % experts);
          ++read;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    });
  }
  for (std::thread& thread : running) thread.join();
  const double wall_s = elapsed();
  if (error) std::rethrow_exception(error);
  return static_cast<double>(read.load()) * bytes_per_read / wall_s;
}

double ProbeStorageReadBandwidth(const executor::offload::ExpertStore& store,
                                 const executor::ExecutorConfig& config, int readers) {
  // At least one pass, then until kProbeSeconds have passed.
  return ProbeReads(
      store, readers, store.key().moe_layers * store.key().experts, kProbeSeconds,
      static_cast<double>(store.key().payload_bytes()), [&] {
        auto buffer = std::make_shared<executor::offload::AlignedBuffer>(store.key().block_bytes());
        auto expert = std::make_shared<executor::FfnWeights>();
        expert->Allocate(config.hidden_size, config.expert_intermediate_size, config.expert_format);
        return [&store, buffer, expert](int64_t layer, int64_t e) {
          store.Read(layer, e, *buffer, *expert);
        };
      });
}

// The disk alone, by reads in flight: `in_flight` threads each pread the store's blocks back to
// back (O_DIRECT where the store has it; no checksum, no copy) for at least kBarePreadSeconds;
// blocks / wall time, in bytes. Reported beside the reader's probe: the simulator shares that
// bandwidth equally between the reads in flight (two issued together both land at twice a read's
// time), while the executor's timelines show this disk serving them one after the other.
constexpr double kBarePreadSeconds = 0.25;

double ProbeBarePreads(const executor::offload::ExpertStore& store, int in_flight) {
  return ProbeReads(
      store, in_flight, 0, kBarePreadSeconds, static_cast<double>(store.key().block_bytes()), [&] {
        auto buffer = std::make_shared<executor::offload::AlignedBuffer>(store.key().block_bytes());
        return [&store, buffer](int64_t layer, int64_t expert) {
          store.ReadBlock(layer, expert, *buffer);
        };
      });
}

// The executor's reader as a run drives it (executor/offload/reader_pass.h: the default reader
// kind and reads in flight, one pass over the store), alone or while the compute pool runs the
// model's LM head matrix-vector product (decode's largest operator) back to back; experts read /
// wall time, in bytes. Why the reader itself and not a loop of ExpertStore::Read as the plain
// probe: inside validate the reader read 0.78x that loop (414 interleaved triples, 2026-11-29),
// and beside computation 0.82x what it read alone. The profiler's expert_reader operator times
// the same pass, so a profile prices reads the way this does.
struct ReaderProbe {
  double bytes_per_s = 0;
  double compute_rate = 0;  // beside computation: TimeReaderPass's (0: not measured)
};

ReaderProbe ProbeReaderPass(const executor::offload::ExpertStore& store,
                            const executor::ModelWeights& weights, kernels::ThreadPool& pool,
                            bool beside_compute) {
  const executor::offload::OffloadOptions options;
  const kernels::PackedBf16Matrix& head = weights.lm_head;
  std::vector<float> x(static_cast<size_t>(head.cols()), 0.5f), y(static_cast<size_t>(head.rows()));
  std::function<void()> compute_step;
  if (beside_compute)
    compute_step = [&] { kernels::MatmulBf16(x.data(), 1, head, y.data(), head.rows(), pool); };
  const executor::offload::ReaderPassTiming timing = executor::offload::TimeReaderPass(
      store, options.reader, options.reader_threads, compute_step);
  const int64_t blocks = store.key().moe_layers * store.key().experts;
  return {static_cast<double>(blocks) * static_cast<double>(store.key().payload_bytes()) /
              timing.seconds,
          timing.compute_rate};
}

// Pairs of reader passes (ProbeReaderPass) run after every case and before every round: one
// pass alone and one beside computation each, the order alternating. The disk here moves by a
// third within half a second, so the two bandwidths are compared pair by pair, not round by round.
constexpr int kReaderPairsPerCase = 2;
constexpr int kReaderPairsPerRound = 4;

}  // namespace

std::vector<ValidationCase> OffloadPlan(const executor::ExecutorConfig& target) {
  const int64_t total = (target.num_layers - target.first_dense_layers) * target.num_experts;
  // A quarter, half and three quarters of the routed experts; at least one layer's experts
  // (stream-all reads a whole layer into staging buffers, every policy needs top-k).
  std::vector<int64_t> budgets;
  for (int64_t quarters : {1, 2, 3}) {
    const int64_t slots = std::max(total * quarters / 4, target.num_experts);
    if (budgets.empty() || slots > budgets.back()) budgets.push_back(slots);
  }
  if (budgets.size() < 3) {
    throw base::Error("--cases offload: model '" + target.name + "' has " + std::to_string(total) +
                      " routed experts, too few for three expert budgets above one layer's " +
                      std::to_string(target.num_experts) + " (use more layers or experts)");
  }
  std::vector<ValidationCase> cases;
  for (const Workload& w : kWorkloads) {
    for (int64_t slots : budgets) {
      for (const std::string& policy : OffloadPolicies()) {
        ValidationCase c;
        c.kind = w.kind;
        c.batch = w.batch;
        c.prompt = w.prompt;
        c.output_tokens = w.output_tokens;
        c.policy = policy;
        c.expert_slots = slots;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

// Everything the rounds share: the store, the weights, the recorded routing, the runs so far.
struct OffloadValidation::State {
  ValidationRequest request;
  executor::ExecutorConfig target;
  std::vector<ValidationCase> cases;
  std::function<void(const std::string&)> say;
  mutable kernels::ThreadPool pool;  // runs the kernels; Judge only simulates
  executor::ModelWeights weights;
  // One model for every run, as a server keeps one (and as the in-memory cases' bench does): its
  // scratch buffers grow to the largest pass once, not in every run's prefill (a fresh model's
  // first 256-token pass page-faults megabytes of activations, ~1.7 us a page on this VM).
  std::unique_ptr<executor::Transformer> model;
  std::unique_ptr<executor::offload::ExpertStore> store;
  std::map<std::string, Recorded> recorded;
  std::vector<std::vector<OffloadRun>> runs;
  // Per workload, every routed expert in RAM (static-split over all layers: no read): the
  // computation the cases add reads to, measured in the same rounds. Reported, not judged.
  std::vector<ValidationCase> baselines;
  std::vector<std::vector<OffloadRun>> baseline_runs;
  std::vector<std::shared_ptr<const policies::GateSignals>> signals;  // [case]: the first run's
  std::vector<double> probes;  // storage read bandwidth, before and after every round
  // Bare preads, 1 and 2 in flight, before every round (ProbeBarePreads): reported.
  std::vector<double> bare_one, bare_two;
  // The executor's reader, alone and beside computation, pair by pair (ProbeReaderPass): the
  // bandwidths the simulator is given.
  std::vector<double> reader_alone, reader_beside_compute;
  // The LM head's rate beside those passes against alone, where measured (TimeReaderPass).
  std::vector<double> compute_rate_beside_reads;
  std::vector<std::string> notes;
  int rounds = 0;

  State(const ValidationRequest& r, const executor::ExecutorConfig& t,
        std::function<void(const std::string&)> s)
      : request(r),
        target(t),
        cases(OffloadPlan(t)),
        say(std::move(s)),
        pool(r.threads > 0 ? r.threads : kernels::DefaultThreadCount()),
        runs(cases.size()),
        signals(cases.size()) {
    const int64_t all = (t.num_layers - t.first_dense_layers) * t.num_experts;
    for (const ValidationCase& c : cases) {
      if (!baselines.empty() && WorkloadLabel(baselines.back()) == WorkloadLabel(c)) continue;
      ValidationCase baseline = c;
      baseline.policy = "static-split";
      baseline.expert_slots = all;
      baselines.push_back(baseline);
    }
    baseline_runs.resize(baselines.size());
  }
  void ProbeReaderPairs(int pairs) {
    for (int k = 0; k < pairs; ++k) {
      const bool beside_first = (reader_alone.size() % 2) == 1;
      ReaderProbe alone, beside;
      for (const bool beside_compute : {beside_first, !beside_first}) {
        (beside_compute ? beside : alone) = ProbeReaderPass(*store, weights, pool, beside_compute);
      }
      reader_alone.push_back(alone.bytes_per_s);
      reader_beside_compute.push_back(beside.bytes_per_s);
      if (beside.compute_rate > 0) compute_rate_beside_reads.push_back(beside.compute_rate);
    }
  }
  Bench MakeBench() const {
    return Bench{target, request.seed, &pool, &weights, store.get(), model.get()};
  }
};

OffloadValidation::OffloadValidation(const ValidationRequest& request,
                                     const executor::ExecutorConfig& target,
                                     std::function<void(const std::string&)> say)
    : state_(std::make_unique<State>(request, target, std::move(say))) {
  State& st = *state_;
  const std::filesystem::path dir = request.work_dir / "offload-store";
  const std::string source = "synthetic seed " + std::to_string(request.seed);
  st.say("offload: preparing the expert store in " + dir.string());
  bool built = false;
  st.store = executor::offload::PrepareExpertStore(
                 target, source, dir,
                 [&](executor::offload::ExpertStoreWriter& writer) {
                   const executor::ExpertSink add = [&](int64_t layer, int64_t expert,
                                                        const executor::FfnWeights& w) {
                     writer.Add(layer, expert, w);
                   };
                   st.weights = executor::MakeSyntheticWeights(target, request.seed, st.pool, &add);
                   built = true;
                 })
                 .store;
  if (!built) {
    const executor::ExpertSink skip;
    st.weights = executor::MakeSyntheticWeights(target, request.seed, st.pool, &skip);
  }
  if (!st.store->direct_io())
    st.notes.push_back("offload: " + st.store->warning() + " -- the storage tier was not cold");
  st.model = std::make_unique<executor::Transformer>(st.weights, st.pool);
  const Bench bench = st.MakeBench();

  // The executor's own gate routing per workload, recorded by an on-demand run at the largest
  // budget (the routing does not depend on the policy: offloaded outputs equal in-RAM ones).
  for (const ValidationCase& c : st.cases) {
    const std::string key = WorkloadLabel(c);
    if (st.recorded.count(key)) continue;
    st.say("offload: recording the executor's gate routing, " + key);
    Recorded& r = st.recorded[key];
    r.prompts = executor::SyntheticPrompts(c.batch, c.prompt, target.vocab_size, request.seed);
    r.trace.num_layers = target.num_layers;
    r.trace.num_experts = target.num_experts;
    r.trace.top_k = target.top_k;
    r.trace.source = "the executor's gate (validate --cases offload, " + key + ")";
    ValidationCase recording = c;
    recording.policy = "on-demand";
    recording.expert_slots = st.cases.back().expert_slots;
    RunExecutor(bench, recording, r, &r.trace);
    std::string name = key;
    std::replace(name.begin(), name.end(), ' ', '-');
    std::replace(name.begin(), name.end(), '=', '-');
    r.file = (request.work_dir / ("offload-routing-" + name + ".json")).string();
    routing::SaveRoutingTrace(r.trace, r.file);
    r.calibration =
        policies::CalibrateRouting("trace:" + r.file, target.num_layers, target.num_experts,
                                   target.top_k, request.seed, policies::CalibrationOptions{});
  }
}

OffloadValidation::~OffloadValidation() = default;

void OffloadValidation::RunRound() {
  State& st = *state_;
  const Bench bench = st.MakeBench();
  ++st.rounds;
  // Two probes (half a second each) per round, one before its cases and one after, not one per
  // case: the cloud disk's delivered bandwidth is not stationary (the runs' stream-all decodes got
  // 0.84-1.11 GB/s across three validations, the probes read 0.95-1.25), and a probe before every
  // case doubled the bytes read and the runs then got the least of all (0.84-0.95 against 1.25).
  // Probes on both sides bracket the round's cases; their median over the rounds prices reads.
  const int readers = executor::offload::OffloadOptions{}.reader_threads;
  st.bare_one.push_back(ProbeBarePreads(*st.store, 1));
  st.bare_two.push_back(ProbeBarePreads(*st.store, 2));
  st.probes.push_back(ProbeStorageReadBandwidth(*st.store, st.target, readers));
  st.ProbeReaderPairs(kReaderPairsPerRound);
  for (size_t i = 0; i < st.baselines.size(); ++i) {
    const ValidationCase& c = st.baselines[i];
    st.say("offload round " + std::to_string(st.rounds) + ", baseline: " + c.Label());
    for (int t = 0; t < RunsPerRound(c.kind); ++t) {
      OffloadRun run =
          RunExecutor(bench, c, st.recorded.at(WorkloadLabel(c)), nullptr, st.request.timelines);
      if (!st.baseline_runs[i].empty()) st.baseline_runs[i].back().timeline.reset();
      if (run.stats.reads != 0)
        throw base::Error("validate offload: the all-in-RAM baseline " + c.Label() + " read " +
                          std::to_string(run.stats.reads) + " experts (a bug)");
      run.stats = {};
      st.baseline_runs[i].push_back(std::move(run));
    }
  }
  for (size_t i = 0; i < st.cases.size(); ++i) {
    st.say("offload round " + std::to_string(st.rounds) + ", case " + std::to_string(i + 1) + "/" +
           std::to_string(st.cases.size()) + ": " + st.cases[i].Label());
    for (int t = 0; t < RunsPerRound(st.cases[i].kind); ++t) {
      OffloadRun run = RunExecutor(bench, st.cases[i], st.recorded.at(WorkloadLabel(st.cases[i])),
                                   nullptr, st.request.timelines);
      // Only the last run's timeline is written: the earlier ones are dropped as they are replaced.
      if (!st.runs[i].empty()) st.runs[i].back().timeline.reset();
      if (!st.signals[i])
        st.signals[i] = std::make_shared<const policies::GateSignals>(std::move(run.stats.signals));
      run.stats.signals = {};
      run.stats.decisions.clear();
      st.runs[i].push_back(std::move(run));
    }
    st.ProbeReaderPairs(kReaderPairsPerCase);
  }
  st.probes.push_back(ProbeStorageReadBandwidth(*st.store, st.target, readers));
}

void OffloadValidation::Judge(const fit::Profile& profile, const fit::LatencyFit& fit,
                              ValidationResult& result) const {
  const State& st = *state_;
  if (st.rounds == 0) throw base::Error("validate offload: no round was run (a bug)");
  for (const std::string& note : st.notes) result.notes.push_back(note);
  const Bench bench = st.MakeBench();
  const auto costs = std::make_shared<fit::FittedProfileCostSource>(
      fit, executor::SpecFromExecutorConfig(st.target), "cpu");
  const int threads = static_cast<int>(st.pool.size());

  // The executor's reader, alone and beside computation (the pairs of ProbeReaderPass): the
  // simulator's read bandwidth while the host computes and while it does not.
  if (st.reader_alone.empty()) throw base::Error("validate offload: no reader probe ran (a bug)");
  const double measured_compute_rate =
      st.compute_rate_beside_reads.empty() ? 0.0 : Median(st.compute_rate_beside_reads);
  const StorageRates storage{Median(st.reader_alone), Median(st.reader_beside_compute),
                             measured_compute_rate};
  {
    std::vector<double> ratios;
    for (size_t k = 0; k < st.reader_alone.size(); ++k)
      ratios.push_back(st.reader_beside_compute[k] / st.reader_alone[k]);
    const auto mb = [](double bytes_per_s) {
      return std::to_string(static_cast<int64_t>(bytes_per_s / 1e6));
    };
    result.notes.push_back(
        "offload: storage read bandwidth, the executor's reader (" +
        std::to_string(executor::offload::OffloadOptions{}.reader_threads) +
        " reads in flight sharing it; O_DIRECT, checksum and copy) over one pass of the store, "
        "alone and beside the LM head's matrix-vector product, in " +
        std::to_string(st.reader_alone.size()) +
        " interleaved pairs (after every case, before every round): alone " +
        mb(storage.alone_bytes_per_s) + " MB/s (quartiles " + mb(Quantile(st.reader_alone, 0.25)) +
        "-" + mb(Quantile(st.reader_alone, 0.75)) + "), beside computation " +
        mb(storage.beside_compute_bytes_per_s) + " MB/s (" +
        mb(Quantile(st.reader_beside_compute, 0.25)) + "-" +
        mb(Quantile(st.reader_beside_compute, 0.75)) + "), x" +
        report::FormatNumber(Median(ratios), 3) + " pair by pair (quartiles " +
        report::FormatNumber(Quantile(ratios, 0.25), 3) + "-" +
        report::FormatNumber(Quantile(ratios, 0.75), 3) +
        "); the simulator reads at the second while the host computes, at the first otherwise");
  }
  if (measured_compute_rate > 0) {
    const model::HardwareSpec hardware =
        fit::StorageTierHardwareFromProfile(profile, 1.0, storage.alone_bytes_per_s,
                                            executor::offload::OffloadOptions{}.reader_threads);
    const double bytes =
        static_cast<double>(model::ExpertBytes(executor::SpecFromExecutorConfig(st.target)));
    const double link_bytes_per_s = hardware.host_link->host_to_device_bandwidth_bytes_per_s;
    const double copy_s = bytes / link_bytes_per_s;
    const double read_s = bytes / storage.beside_compute_bytes_per_s;
    result.notes.push_back(
        "offload: the computation beside the reader (the LM head's matrix-vector product during "
        "the probes' passes beside computation, against the same steps alone right after): x" +
        report::FormatNumber(measured_compute_rate, 3) + " of its rate alone (quartiles " +
        report::FormatNumber(Quantile(st.compute_rate_beside_reads, 0.25), 3) + "-" +
        report::FormatNumber(Quantile(st.compute_rate_beside_reads, 0.75), 3) + ", " +
        std::to_string(st.compute_rate_beside_reads.size()) +
        " passes); past the checksum and copy the simulator charges to the cores (" +
        report::FormatNumber(copy_s * 1e3, 2) + " ms a read, one read every " +
        report::FormatNumber(read_s * 1e3, 2) + " ms), the simulator computes at x" +
        report::FormatNumber(CoupledComputeRate(storage, bytes, link_bytes_per_s), 3) +
        " of its rate alone while reads are in flight (host.compute_rate_while_storage_reads)");
  } else {
    result.notes.push_back(
        "offload: the computation's rate beside the reader was not measured (every probe pass "
        "ended before two of its steps did); the simulator's computation does not slow while "
        "reads are in flight");
  }
  const double plain_probe_bytes_per_s = Median(st.probes);
  std::string rounds;
  for (double probe : st.probes)
    rounds += (rounds.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(probe / 1e6));
  result.notes.push_back(
      "offload: plain probe (two threads each calling ExpertStore::Read in a loop: O_DIRECT, "
      "checksum and copy; at least " +
      report::ShortestText(kProbeSeconds) + " s before and after every round, median of " +
      std::to_string(st.probes.size()) +
      "): " + std::to_string(static_cast<int64_t>(plain_probe_bytes_per_s / 1e6)) +
      " MB/s (in order: " + rounds + " MB/s), x" +
      report::FormatNumber(storage.alone_bytes_per_s / plain_probe_bytes_per_s, 3) +
      " for the reader alone; reported, not used");
  {
    const double one = Median(st.bare_one), two = Median(st.bare_two);
    result.notes.push_back(
        "offload: the disk by reads in flight (bare O_DIRECT preads of expert blocks, no checksum "
        "or copy, " +
        report::ShortestText(kBarePreadSeconds) + " s each before every round, median of " +
        std::to_string(st.bare_one.size()) + "): 1 in flight " +
        std::to_string(static_cast<int64_t>(one / 1e6)) + " MB/s, 2 in flight " +
        std::to_string(static_cast<int64_t>(two / 1e6)) + " MB/s (x" +
        report::FormatNumber(two / one, 3) +
        "); the simulator shares the reader's bandwidth between the reads in flight (x1)");
  }
  // Beside the probes: the bandwidth the disk delivered to the reads of the cases run next to each
  // case, under the same workload, in the same rounds (the runs' own measurement: a read's blocks
  // over the time one was in flight). Reported, not used for the prediction: over six
  // validations it priced prefill better than the plain probe in all six (median abs error
  // 2.1-5.2 % against 5.3-9.9 %: reads beside a prefill's GEMMs, which share the two cores with
  // the reader's checksum and copy, got 9-20 % less than the idle probe) and decode worse in four
  // (a case priced by its neighbours' pattern misses its own): the term that led to is the
  // reads' rate beside computation (StorageRates), which a single bandwidth cannot carry.
  std::vector<std::vector<std::vector<RunReads>>> reads(st.cases.size());
  for (size_t j = 0; j < st.cases.size(); ++j) {
    const size_t per_round = static_cast<size_t>(RunsPerRound(st.cases[j].kind));
    for (size_t k = 0; k < st.runs[j].size(); ++k) {
      const executor::offload::OffloadStats& stats = st.runs[j][k].stats;
      if (reads[j].size() <= k / per_round) reads[j].resize(k / per_round + 1);
      if (!stats.copy_busy_s) continue;
      reads[j][k / per_round].push_back(
          {static_cast<double>(stats.copies_done) * stats.copy_block_bytes, *stats.copy_busy_s});
    }
  }
  std::vector<int> workload(st.cases.size());
  std::map<std::string, int> workloads;
  for (size_t j = 0; j < st.cases.size(); ++j)
    workload[j] = workloads.emplace(WorkloadLabel(st.cases[j]), static_cast<int>(workloads.size()))
                      .first->second;
  // --timelines: the case's last executor run and its simulation (priced with the probes), named
  // after the case ("offload-on-demand-24-experts-B-1.executor.json", ".sim.json"; a workload's
  // all-in-RAM baseline "baseline-offload-static-split-32-experts-B-1...").
  const std::filesystem::path timelines_dir = st.request.work_dir / "timelines";
  if (st.request.timelines) std::filesystem::create_directories(timelines_dir);
  const auto write_timelines = [&](const ValidationCase& c, const std::vector<OffloadRun>& runs,
                                   const sim::SimResult& simulated, const std::string& prefix) {
    std::string name = c.Label();
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
    }
    name = prefix + name;
    const std::shared_ptr<executor::ExecutionTimeline>& executed = runs.back().timeline;
    if (!executed) throw base::Error("validate --timelines: " + name + " has no timeline (a bug)");
    base::WriteFileAtomically(timelines_dir / (name + ".executor.json"),
                              executed->TraceJson(kernels::CpuModelName() + " (" +
                                                  std::to_string(threads) + " threads)"));
    base::WriteFileAtomically(timelines_dir / (name + ".sim.json"), simulated.TimelineJson());
  };
  std::vector<double> neighbour_rates;
  // [decode, prefill]: as priced, at the neighbours' reads, at the plain probe's bandwidth.
  std::vector<double> probe_errors[2], neighbour_errors[2], plain_errors[2], profile_errors[2];
  std::vector<double> uncoupled_errors[2];  // the computation not slowed while reads are in flight
  std::vector<CaseResult> offload_results;
  for (size_t i = 0; i < st.cases.size(); ++i) {
    Recorded replay = st.recorded.at(WorkloadLabel(st.cases[i]));
    replay.signals = st.signals[i];
    CaseResult r;
    r.spec = st.cases[i];
    r.cost_source = costs->name();
    r.routing = "trace:" + replay.file;
    const bool prefill = st.cases[i].kind == CaseKind::kOffloadPrefill;
    const sim::SimResult simulated = Simulate(bench, st.cases[i], replay, profile, storage, costs,
                                              threads, st.request.timelines);
    if (st.request.timelines) write_timelines(st.cases[i], st.runs[i], simulated, "");
    r.predicted = prefill ? simulated.ttft_s : *simulated.tpot_s;
    const std::optional<double> neighbours =
        NeighbourReadBytesPerS(reads, workload, i, kNeighbourReach);
    std::optional<double> predicted_with_neighbours;
    if (neighbours) {
      neighbour_rates.push_back(*neighbours);
      const sim::SimResult priced =
          Simulate(bench, st.cases[i], replay, profile, {*neighbours, 0}, costs, threads);
      predicted_with_neighbours = prefill ? priced.ttft_s : *priced.tpot_s;
    }
    const Measured measured = MeasuredOf(st.cases[i], st.runs[i]);
    {
      const sim::SimResult plain = Simulate(bench, st.cases[i], replay, profile,
                                            {plain_probe_bytes_per_s, 0}, costs, threads);
      plain_errors[prefill].push_back(
          AbsError(prefill ? plain.ttft_s : *plain.tpot_s, measured.value));
    }
    if (storage.measured_compute_rate > 0) {
      const sim::SimResult uncoupled = Simulate(
          bench, st.cases[i], replay, profile,
          {storage.alone_bytes_per_s, storage.beside_compute_bytes_per_s, 0}, costs, threads);
      uncoupled_errors[prefill].push_back(
          AbsError(prefill ? uncoupled.ttft_s : *uncoupled.tpot_s, measured.value));
    }
    const sim::SimResult from_profile =
        Simulate(bench, st.cases[i], replay, profile, {}, costs, threads);
    const double predicted_from_profile = prefill ? from_profile.ttft_s : *from_profile.tpot_s;
    profile_errors[prefill].push_back(AbsError(predicted_from_profile, measured.value));
    std::vector<double> totals, stalls;
    for (const OffloadRun& run : st.runs[i]) {
      totals.push_back(run.total_s);
      stalls.push_back(run.stats.stall_s);
    }
    r.measured = measured.value;
    r.measured_min = measured.min;
    r.measured_max = measured.max;
    for (const OffloadRun& run : st.runs[i]) r.measured_runs.push_back(run.value);
    r.repeats = measured.runs;
    CaseResult::OffloadDetail detail;
    detail.predicted_reads = simulated.demand_fetches + simulated.transient_fetches +
                             simulated.prefetches + simulated.cpu_runs;
    detail.measured_reads = st.runs[i].front().stats.reads;
    detail.predicted_total_s = simulated.total_s;
    detail.measured_total_s = Median(totals);
    detail.predicted_compute_busy_s =
        simulated.busy_s[static_cast<int>(sim::Resource::kAcceleratorCompute)];
    detail.predicted_storage_busy_s =
        simulated.busy_s[static_cast<int>(sim::Resource::kStorageRead)];
    detail.predicted_link_busy_s = simulated.busy_s[static_cast<int>(sim::Resource::kHostToDevice)];
    detail.measured_stall_s = Median(stalls);
    detail.neighbour_read_bytes_per_s = neighbours;
    detail.predicted_with_neighbours = predicted_with_neighbours;
    detail.predicted_from_profile = predicted_from_profile;
    if (!prefill) {
      std::vector<std::vector<double>> steps_per_run;
      for (const OffloadRun& run : st.runs[i]) steps_per_run.push_back(run.decode_steps_s);
      if (const std::optional<std::vector<double>> medians = StepMedians(steps_per_run)) {
        detail.measured_decode_steps_s = *medians;
        for (size_t p = 1; p < simulated.pass_end_s.size(); ++p)
          detail.predicted_decode_steps_s.push_back(simulated.pass_end_s[p] -
                                                    simulated.pass_end_s[p - 1]);
      }
    }
    r.offload = detail;
    r.abs_error = AbsError(r.predicted, r.measured);
    probe_errors[prefill].push_back(r.abs_error);
    if (predicted_with_neighbours)
      neighbour_errors[prefill].push_back(AbsError(*predicted_with_neighbours, r.measured));
    offload_results.push_back(r);
  }
  const auto percent = [](const std::vector<double>& errors) {
    return errors.empty() ? std::string("-") : report::FormatNumber(100 * Median(errors), 1) + " %";
  };
  if (!neighbour_rates.empty()) {
    result.notes.push_back(
        "offload: the reads of the " + std::to_string(kNeighbourReach) +
        " cases of the same workload before and after each case got " +
        std::to_string(static_cast<int64_t>(Quantile(neighbour_rates, 0.0) / 1e6)) + "-" +
        std::to_string(static_cast<int64_t>(Quantile(neighbour_rates, 1.0) / 1e6)) +
        " MB/s in the same rounds (their blocks over the time a read was in flight; the median "
        "over rounds; offload_run.neighbour_read_bytes_per_s); priced with that instead of the "
        "reader's probes, the median abs error would be " +
        percent(neighbour_errors[0]) + " for decode (" + percent(probe_errors[0]) +
        " with the probes) and " + percent(neighbour_errors[1]) + " for prefill (" +
        percent(probe_errors[1]) + ")");
  }
  if (!uncoupled_errors[0].empty() || !uncoupled_errors[1].empty()) {
    result.notes.push_back(
        "offload: with the computation at its full rate while reads are in flight (as before "
        "2026-12-01), the median abs error would be " +
        percent(uncoupled_errors[0]) + " for decode (" + percent(probe_errors[0]) + ") and " +
        percent(uncoupled_errors[1]) + " for prefill (" + percent(probe_errors[1]) + ")");
  }
  result.notes.push_back(
      "offload: priced as before 2026-11-29 (the plain probe's bandwidth, whatever the host "
      "does), the median abs error would be " +
      percent(plain_errors[0]) + " for decode and " + percent(plain_errors[1]) + " for prefill");
  {
    // What a user who profiles and then runs `moelab hw from-profile` + `sim offload` gets: reads
    // priced from the profile alone, no probe of this validation's.
    const model::HardwareSpec profiled = fit::StorageTierHardwareFromProfile(
        profile, 1.0, 0, executor::offload::OffloadOptions{}.reader_threads);
    const model::HostSpec& host = *profiled.host;
    const std::string rates =
        host.storage_read_bandwidth_beside_compute_bytes_per_s > 0
            ? "the executor's reader as the profile's expert_reader samples timed it: " +
                  std::to_string(
                      static_cast<int64_t>(host.storage_read_bandwidth_bytes_per_s / 1e6)) +
                  " MB/s alone, " +
                  std::to_string(static_cast<int64_t>(
                      host.storage_read_bandwidth_beside_compute_bytes_per_s / 1e6)) +
                  " MB/s beside computation"
            : std::to_string(static_cast<int64_t>(host.storage_read_bandwidth_bytes_per_s / 1e6)) +
                  " MB/s (" + ReadPricingSource(profiled) + ")";
    result.notes.push_back("offload: priced from the profile alone (" + rates +
                           "; offload_run.predicted_from_profile), the median abs error is " +
                           percent(profile_errors[0]) + " for decode and " +
                           percent(profile_errors[1]) + " for prefill");
  }
  for (size_t i = 0; i < st.baselines.size(); ++i) {
    const ValidationCase& c = st.baselines[i];
    const bool prefill = c.kind == CaseKind::kOffloadPrefill;
    const sim::SimResult simulated = Simulate(bench, c, st.recorded.at(WorkloadLabel(c)), profile,
                                              storage, costs, threads, st.request.timelines);
    if (st.request.timelines) write_timelines(c, st.baseline_runs[i], simulated, "baseline-");
    const double predicted = prefill ? simulated.ttft_s : *simulated.tpot_s;
    const Measured measured = MeasuredOf(c, st.baseline_runs[i]);
    result.notes.push_back(
        "offload baseline, " + WorkloadLabel(c) + ": every routed expert in RAM (" +
        std::to_string(c.expert_slots) + ", static-split, no read) " + QuantityOf(c.kind) +
        " measured " + report::FormatNumber(measured.value, 5) + " s (" +
        report::FormatNumber(measured.min, 5) + ".." + report::FormatNumber(measured.max, 5) +
        ", " + std::to_string(measured.runs) + (measured.runs == 1 ? " run" : " runs") +
        "), predicted " + report::FormatNumber(predicted, 5) + " s, signed error " +
        report::FormatNumber(100 * (predicted / measured.value - 1), 1) +
        " %: the computation the cases of this workload add their reads to");
  }
  OffloadRanking ranking = RankOffloadPolicies(offload_results);
  for (const std::string& note : OffloadRankingNotes(ranking)) result.notes.push_back(note);
  result.offload_ranking = std::move(ranking);
  result.cases.insert(result.cases.end(), offload_results.begin(), offload_results.end());
}

std::optional<double> NeighbourReadBytesPerS(
    const std::vector<std::vector<std::vector<RunReads>>>& reads, const std::vector<int>& group,
    size_t index, int reach) {
  if (index >= reads.size() || group.size() != reads.size())
    throw base::Error("neighbour reads: case out of range or groups mismatched (a bug)");
  size_t rounds = 0;
  for (const auto& by_round : reads) rounds = std::max(rounds, by_round.size());
  // The `reach` nearest cases of the group on each side, in run order.
  std::vector<size_t> neighbours;
  for (size_t j = index, found = 0; j-- > 0 && found < static_cast<size_t>(reach);) {
    if (group[j] == group[index]) neighbours.push_back(j), ++found;
  }
  for (size_t j = index + 1, found = 0; j < reads.size() && found < static_cast<size_t>(reach);
       ++j) {
    if (group[j] == group[index]) neighbours.push_back(j), ++found;
  }
  std::vector<double> per_round;
  for (size_t round = 0; round < rounds; ++round) {
    double bytes = 0, busy_s = 0;
    for (const size_t j : neighbours) {
      if (round >= reads[j].size()) continue;
      for (const RunReads& run : reads[j][round]) {
        if (!(run.busy_s > 0)) continue;
        bytes += run.bytes;
        busy_s += run.busy_s;
      }
    }
    if (busy_s > 0) per_round.push_back(bytes / busy_s);
  }
  if (per_round.empty()) return std::nullopt;
  return Median(per_round);
}

void RunOffloadValidation(const ValidationRequest& request, const executor::ExecutorConfig& target,
                          const fit::Profile& profile, const fit::LatencyFit& fit,
                          const std::function<void(const std::string&)>& say,
                          ValidationResult& result) {
  OffloadValidation validation(request, target, say);
  for (int round = 0; round < request.Repeats(); ++round) validation.RunRound();
  validation.Judge(profile, fit, result);
}

}  // namespace moelab::validate
