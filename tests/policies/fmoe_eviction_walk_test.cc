#include "policies/impl/fmoe_eviction_walk.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace moelab::policies::impl {
namespace {

using Walk = void (*)(const uint64_t*, size_t, const EvictionValues&, FmoeLowestFew&);

struct Case {
  std::vector<uint64_t> words;
  std::vector<float> probabilities;  // empty: none (the floor alone)
  std::vector<double> frequencies;
  double floor = 1e-3;
};

// The lowest two finite (value, flat) pairs among the candidates, by brute force.
std::vector<int64_t> Expected(const Case& c) {
  std::vector<std::pair<double, int64_t>> values;
  for (size_t flat = 0; flat < c.frequencies.size(); ++flat) {
    if (!(c.words[flat / 64] >> (flat % 64) & 1)) continue;
    const double p = c.probabilities.empty() ? c.floor : c.probabilities[flat] + c.floor;
    const double value = p * c.frequencies[flat];
    if (value < std::numeric_limits<double>::infinity())
      values.push_back({value, static_cast<int64_t>(flat)});
  }
  std::sort(values.begin(), values.end());
  std::vector<int64_t> lowest;
  for (size_t i = 0; i < values.size() && i < 2; ++i) lowest.push_back(values[i].second);
  return lowest;
}

// What `few` keeps, in order.
std::vector<int64_t> Kept(const FmoeLowestFew& few) {
  std::vector<int64_t> kept;
  const int64_t first = few.First([](int64_t) { return true; });
  if (first < 0) return kept;
  kept.push_back(first);
  const int64_t second = few.First([first](int64_t i) { return i != first; });
  if (second >= 0) kept.push_back(second);
  return kept;
}

std::vector<int64_t> Walked(Walk walk, const Case& c) {
  FmoeLowestFew few;
  few.Offer(12345, -1.0);  // stale content: every walk starts from a cleared set
  const EvictionValues values{c.probabilities.empty() ? nullptr : c.probabilities.data(), c.floor,
                              c.frequencies.data()};
  walk(c.words.data(), c.words.size(), values, few);
  return Kept(few);
}

// Random candidates over `flats` experts (a partial last word), values from a few levels so that
// equal values (ties broken by the lower index) are common, signed zeros, negative and infinite
// values among them (the walk only needs ordered values).
Case RandomCase(std::mt19937_64& rng, size_t flats, bool with_probabilities, double density) {
  Case c;
  c.words.assign((flats + 63) / 64, 0);
  std::uniform_real_distribution<double> uniform(0, 1);
  const float levels[] = {0.0f, -0.0f, 0.125f, 0.25f, 0.5f, -0.25f};
  const double infinity = std::numeric_limits<double>::infinity();
  for (size_t flat = 0; flat < flats; ++flat) {
    if (uniform(rng) < density) c.words[flat / 64] |= uint64_t{1} << (flat % 64);
    if (with_probabilities) c.probabilities.push_back(levels[rng() % 6]);
    const double draw = uniform(rng);
    c.frequencies.push_back(draw < 0.05   ? infinity
                            : draw < 0.08 ? -infinity
                            : draw < 0.12 ? -static_cast<double>(1 + rng() % 3)
                            : draw < 0.5  ? static_cast<double>(1 + rng() % 4)
                                          : 1 + 1000 * uniform(rng));
  }
  return c;
}

std::vector<std::pair<std::string, Walk>> Walks() {
  std::vector<std::pair<std::string, Walk>> walks = {{"scalar", &OfferLowestEvictableScalar},
                                                     {"dispatched", &OfferLowestEvictable}};
  if (CpuHasAvx512()) walks.push_back({"avx512", &OfferLowestEvictableAvx512});
  return walks;
}

TEST(FmoeEvictionWalk, EveryVariantKeepsTheLowestTwoAsTheScalarWalk) {
  if (!CpuHasAvx512()) std::printf("note: no AVX-512 on this CPU, its walk is not checked\n");
  std::mt19937_64 rng(7);
  int cases = 0;
  for (const size_t flats : {1, 5, 16, 63, 64, 65, 130, 256, 1664}) {
    for (const bool with_probabilities : {true, false}) {
      for (const double density : {0.0, 0.02, 0.3, 1.0}) {
        for (int repeat = 0; repeat < 20; ++repeat, ++cases) {
          const Case c = RandomCase(rng, flats, with_probabilities, density);
          const std::vector<int64_t> expected = Expected(c);
          for (const auto& [name, walk] : Walks()) {
            ASSERT_EQ(Walked(walk, c), expected)
                << name << ": " << flats << " flats, density " << density
                << (with_probabilities ? "" : ", floor alone") << ", repeat " << repeat;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 9 * 2 * 4 * 20);
}

TEST(FmoeEvictionWalk, EqualValuesKeepTheLowerIndicesAcrossLanesAndWords) {
  // Every candidate has the same value: the two lowest flats win, whichever lane holds them.
  Case c;
  c.words = {0, (uint64_t{1} << 9) | (uint64_t{1} << 3) | (uint64_t{1} << 62), 1};
  c.frequencies.assign(129, 2.0);
  c.probabilities.assign(129, 0.25f);
  for (const auto& [name, walk] : Walks())
    EXPECT_EQ(Walked(walk, c), (std::vector<int64_t>{67, 73})) << name;
  // A lower value later wins over an earlier, higher one; infinite values are never kept.
  c.frequencies[128] = 1.0;
  c.frequencies[67] = std::numeric_limits<double>::infinity();
  for (const auto& [name, walk] : Walks())
    EXPECT_EQ(Walked(walk, c), (std::vector<int64_t>{128, 73})) << name;
  c.words = {0, 0, 0};
  for (const auto& [name, walk] : Walks()) EXPECT_TRUE(Walked(walk, c).empty()) << name;
}

// The arrays end where an unreadable page begins and the last word is partial: a walk that read
// past the flats it was given (an unmasked load of a last, partial group) would fault here.
TEST(FmoeEvictionWalk, ReadsNothingPastTheArrays) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped =
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  char* base = static_cast<char*>(mapped);
  ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);      // after the probabilities
  ASSERT_EQ(mprotect(base + 3 * page, page, PROT_NONE), 0);  // after the frequencies
  const size_t flats = 67;  // one whole word and 3 flats of the second
  float* probabilities = reinterpret_cast<float*>(base + page) - flats;
  double* frequencies = reinterpret_cast<double*>(base + 3 * page) - flats;
  for (size_t flat = 0; flat < flats; ++flat) {
    probabilities[flat] = 0.5f;
    frequencies[flat] = static_cast<double>(100 - flat);
  }
  const std::vector<uint64_t> words = {uint64_t{1} << 5, 0b101};  // flats 5, 64 and 66
  for (const auto& [name, walk] : Walks()) {
    FmoeLowestFew few;
    walk(words.data(), words.size(), {probabilities, 1e-3, frequencies}, few);
    EXPECT_EQ(Kept(few), (std::vector<int64_t>{66, 64})) << name;
    walk(words.data(), words.size(), {nullptr, 1e-3, frequencies}, few);
    EXPECT_EQ(Kept(few), (std::vector<int64_t>{66, 64})) << name << ", floor alone";
  }
  munmap(mapped, 4 * page);
}

}  // namespace
}  // namespace moelab::policies::impl
