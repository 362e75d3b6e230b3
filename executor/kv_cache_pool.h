#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "executor/forward_model.h"
#include "executor/kv_cache.h"

namespace moelab::executor {

// Finished sequences' KV caches kept for the next ones, as a server keeps its KV memory: a fresh
// cache is zero-filled memory the process touches for the first time, which on a VM costs a page
// fault per 4 KiB (about 5 ms for a 400-position cache of the default validate model on a 2-vCPU
// EPYC guest, inside the iteration that admits the sequence; validate --cases serving measured its
// mixed iterations 5.5 ms a prefill chunk above their price). A reused cache is truncated to 0:
// attention reads only positions below a cache's length, so stale positions are never read.
class KvCachePool {
 public:
  // At most `max_caches` caches alive at once, in use or spare (the scheduler's running
  // sequences): a spare is dropped rather than let the pool hold more memory than running ones.
  explicit KvCachePool(int64_t max_caches);

  // The smallest spare of at least `capacity` positions, emptied, or a new one from `model`.
  KvCache Take(const ForwardModel& model, int64_t capacity);
  // A sequence's cache back: a spare from now on.
  void Give(KvCache cache);

  size_t spares() const { return spares_.size(); }
  int64_t in_use() const { return in_use_; }
  int64_t reused() const { return reused_; }

 private:
  int64_t max_caches_;
  int64_t in_use_ = 0, reused_ = 0;
  std::vector<KvCache> spares_;
};

}  // namespace moelab::executor
