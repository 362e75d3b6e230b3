// The KV cache pool: a finished sequence's cache serves the next (the same memory, emptied), the
// smallest one that fits; it never holds more caches than running sequences; and the serving
// engine's tokens stay plain greedy decoding's while caches are reused.
#include "executor/kv_cache_pool.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

struct TinyModel {
  TinyModel()
      : pool(1),
        weights(MakeSyntheticWeights(testing::TinyMixtral(), 5, pool)),
        model(weights, pool) {}
  kernels::ThreadPool pool;
  ModelWeights weights;
  Transformer model;
};

TEST(KvCachePool, AFinishedCacheServesTheNextEmptiedTheSmallestThatFits) {
  TinyModel tiny;
  KvCachePool pool(4);
  KvCache big = pool.Take(tiny.model, 64);
  KvCache small = pool.Take(tiny.model, 20);
  EXPECT_EQ(pool.in_use(), 2);
  big.Append(30);
  const float* big_keys = big.keys(0);
  const float* small_keys = small.keys(0);
  pool.Give(std::move(big));
  pool.Give(std::move(small));
  EXPECT_EQ(pool.spares(), 2u);
  // 16 positions: both fit, the smaller is taken.
  KvCache a = pool.Take(tiny.model, 16);
  EXPECT_EQ(a.keys(0), small_keys);
  EXPECT_EQ(a.capacity(), 20);
  // 40: only the big one, emptied.
  KvCache b = pool.Take(tiny.model, 40);
  EXPECT_EQ(b.keys(0), big_keys);
  EXPECT_EQ(b.length(), 0);
  EXPECT_EQ(pool.reused(), 2);
  // 100: none left, a new one of exactly that.
  KvCache c = pool.Take(tiny.model, 100);
  EXPECT_EQ(c.capacity(), 100);
  EXPECT_EQ(pool.reused(), 2);
}

TEST(KvCachePool, HoldsNoMoreCachesThanRunningSequences) {
  TinyModel tiny;
  KvCachePool pool(2);
  KvCache a = pool.Take(tiny.model, 10);
  KvCache b = pool.Take(tiny.model, 10);
  pool.Give(std::move(a));
  EXPECT_EQ(pool.in_use() + static_cast<int64_t>(pool.spares()), 2);
  // Too small for 50: the spare is dropped before a new cache is made.
  KvCache c = pool.Take(tiny.model, 50);
  EXPECT_EQ(pool.spares(), 0u);
  EXPECT_EQ(pool.in_use(), 2);
  pool.Give(std::move(b));
  pool.Give(std::move(c));
  EXPECT_EQ(pool.spares(), 2u);
  EXPECT_THROW(KvCachePool(0), base::Error);
}

}  // namespace
}  // namespace moelab::executor
