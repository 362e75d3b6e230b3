#include "validate/impl/offload_state.h"

#include <utility>

#include "profiler/expert_store_probes.h"
#include "validate/offload_cases.h"

namespace moelab::validate::impl {

OffloadState::OffloadState(const ValidationRequest& r, const executor::ExecutorConfig& t,
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

void OffloadState::ProbeReaderPairs(int pairs) {
  for (int k = 0; k < pairs; ++k) {
    const bool beside_first = (reader_alone.size() % 2) == 1;
    profiler::ReaderProbe alone, beside;
    for (const bool beside_compute : {beside_first, !beside_first}) {
      (beside_compute ? beside : alone) =
          profiler::ProbeReaderPass(*store, weights, pool, beside_compute);
    }
    reader_alone.push_back(alone.bytes_per_s);
    reader_beside_compute.push_back(beside.bytes_per_s);
    if (beside.compute_rate > 0) compute_rate_beside_reads.push_back(beside.compute_rate);
  }
}

Bench OffloadState::MakeBench() const {
  return Bench{target, request.seed, &pool, &weights, store.get(), model.get()};
}

}  // namespace moelab::validate::impl
