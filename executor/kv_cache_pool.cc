#include "executor/kv_cache_pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"

namespace moelab::executor {

KvCachePool::KvCachePool(int64_t max_caches) : max_caches_(max_caches) {
  if (max_caches < 1)
    throw base::Error("KV cache pool: at least 1 cache, got " + std::to_string(max_caches));
}

KvCache KvCachePool::Take(const ForwardModel& model, int64_t capacity) {
  size_t best = spares_.size();
  for (size_t i = 0; i < spares_.size(); ++i) {
    if (spares_[i].capacity() >= capacity &&
        (best == spares_.size() || spares_[i].capacity() < spares_[best].capacity()))
      best = i;
  }
  ++in_use_;
  if (best < spares_.size()) {
    KvCache cache = std::move(spares_[best]);
    spares_.erase(spares_.begin() + static_cast<std::ptrdiff_t>(best));
    cache.Truncate(0);
    ++reused_;
    return cache;
  }
  // None fits: a new one, after dropping the smallest spares that would overfill the pool.
  while (!spares_.empty() && in_use_ + static_cast<int64_t>(spares_.size()) > max_caches_) {
    const auto smallest = std::min_element(
        spares_.begin(), spares_.end(),
        [](const KvCache& a, const KvCache& b) { return a.capacity() < b.capacity(); });
    spares_.erase(smallest);
  }
  return model.NewCache(capacity);
}

void KvCachePool::Give(KvCache cache) {
  if (in_use_ > 0) --in_use_;
  if (in_use_ + static_cast<int64_t>(spares_.size()) >= max_caches_) return;  // dropped
  spares_.push_back(std::move(cache));
}

}  // namespace moelab::executor
