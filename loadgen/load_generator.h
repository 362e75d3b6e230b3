#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/completion_client.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"

namespace moelab::loadgen {

// An open-loop load generator: every request is sent at its arrival time whether or not earlier
// ones have finished. A scheduler thread releases the requests at their times to a pool of
// `concurrency_max` worker threads, each running one streaming request at a time.
struct LoadgenOptions {
  CompletionSettings completion;
  int64_t concurrency_max = 256;  // requests in flight at most (worker threads)
  bool progress = false;          // a progress line on stderr (the CLI: when it is a terminal)

  void Validate() const;  // Error naming the option
};

// Requests in flight at most (--concurrency-max): each is a thread with its own connection.
inline constexpr int64_t kMaxConcurrency = 4096;
// Prompt token ids' range (--vocab): the largest vocabularies released have about 260,000 entries.
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;

struct LoadgenResult {
  std::vector<serving::RequestOutcome> outcomes;  // in request order
  // Requests that came due while all `concurrency_max` workers were busy: each was sent when one
  // freed, late, and its TTFT counts the wait from its arrival (so the client's cap shows as
  // queueing rather than lowering the load, a closed loop's distortion). Any late send means the
  // measured load was not the one asked for: raise --concurrency-max.
  int64_t late_sends = 0;
  double max_send_lateness_s =
      0;  // the largest send - arrival over all requests (timer jitter too)
  double wall_s = 0;
};

LoadgenResult RunLoad(const LoadgenOptions& options,
                      const std::vector<serving::RequestSpec>& requests);

}  // namespace moelab::loadgen
