#include "cli/offload_options.h"

#include <string>

#include "base/error.h"
#include "base/units.h"
#include "cli/policy_options.h"
#include "executor/executor_config.h"
#include "executor/offload/expert_reader.h"
#include "model/preset_store.h"

namespace moelab::cli {

void AddOffloadOptions(po::options_description& options, OffloadFlags& flags) {
  // clang-format off
  options.add_options()
      ("offload", po::value<std::string>(&flags.offload.policy), "offload routed experts with this policy: to storage on --device cpu (on-demand, lru-prefetch, static-split, fmoe, stream-all), to pinned host memory behind a device cache on --device gpu (those and fiddler); needs --expert-memory")
      ("expert-memory", po::value<std::string>()->notifier([&flags](const std::string& text) { flags.offload.expert_memory_bytes = static_cast<int64_t>(base::ParseBytes(text, "--expert-memory")); }), "memory for the expert cache and staging buffers with --offload: RAM on --device cpu, GPU memory on --device gpu (bytes, or with a unit: 512MB, 2GiB)")
      ("offload-dir", po::value<std::string>()->notifier([&flags](const std::string& dir) { flags.offload.offload_dir = dir; }), "folder of the expert store with --offload (default $MOELAB_OFFLOAD_DIR, else $XDG_CACHE_HOME/moelab/experts, else ~/.cache/moelab/experts)")
      ("offload-readers", Into(&flags.offload.reader_threads), "asynchronous expert reads in flight with --offload")
      ("offload-reader", po::value<std::string>()->notifier([&flags](const std::string& kind) { flags.offload.reader = executor::offload::ParseReaderKind(kind); }), "how --offload issues its expert reads: threads (default; a blocking pread per reader thread) or io_uring (one ring of --offload-readers reads; needs liburing and a kernel that allows io_uring)")
      ("offload-calibration", po::value<std::string>(&flags.calibration), "routing the policy calibrates on before the first token with --offload (popularity, fMoE's expert maps), as sim offload calibrates on its --routing (e.g. trace:FILE; default none: flat popularity, no history)");
  // clang-format on
  AddPolicyOptions(options, flags.offload.policy_options);
}

void ApplyOffloadFlags(const po::variables_map& values, OffloadFlags& flags,
                       executor::RunRequest& request) {
  if (!values.count("offload")) {
    for (const char* flag : {"expert-memory", "offload-dir", "offload-calibration",
                             "offload-reader", "offload-readers"}) {
      // Given on the command line, not its default (--offload-readers has one).
      if (values.count(flag) && !values[flag].defaulted())
        throw base::Error(std::string("--") + flag + " applies with --offload POLICY only");
    }
    RefuseUnusedPolicyOptions(values, "it applies with --offload POLICY only");
    return;
  }
  if (!values.count("expert-memory"))
    throw base::Error("--offload needs --expert-memory BYTES (the RAM expert cache)");
  // An empty folder name fell back to the default folder; leaving the option out is how to ask.
  if (values.count("offload-dir") && flags.offload.offload_dir.empty()) {
    throw base::Error(
        "--offload-dir '': name a folder (leave the option out for $MOELAB_OFFLOAD_DIR, else "
        "$XDG_CACHE_HOME/moelab/experts, else ~/.cache/moelab/experts)");
  }
  if (values.count("offload-calibration")) {
    const executor::ExecutorConfig config = executor::ExecutorConfigFromSpec(
        model::PresetStore::Default().LoadModel(request.model), request.shape);
    flags.offload.CalibrateOn(flags.calibration, config.num_layers, config.num_experts,
                              config.top_k, request.seed);
  }
  if (request.device == "gpu") {
    for (const char* flag : {"offload-dir", "offload-readers", "offload-reader"}) {
      // Given on the command line, not its default (--offload-readers has one).
      if (values.count(flag) && !values[flag].defaulted()) {
        throw base::Error(std::string("--") + flag +
                          " applies to --device cpu (storage -> RAM); on --device gpu the "
                          "experts' slow tier is pinned host memory");
      }
    }
  }
  request.offload = flags.offload;
}

}  // namespace moelab::cli
