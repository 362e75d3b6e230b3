#include "policies/impl/fmoe_row_classes.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace moelab::policies::impl {
namespace {

constexpr int64_t kExperts = 3;
constexpr size_t kLanes = 4;
using Row = std::array<float, kExperts>;

// A row no other value of `n` gives.
Row RowOf(int n) { return {static_cast<float>(n), 0.5f, -static_cast<float>(n)}; }

// Every stored map's class holds its row, and BlockedRows() holds every class's row in lanes.
void ExpectConsistent(const FmoeRowClasses& classes, const std::vector<Row>& stored) {
  for (size_t slot = 0; slot < stored.size(); ++slot) {
    const int32_t id = classes.Ids()[slot];
    if (id < 0) continue;
    ASSERT_LT(id, classes.Count());
    for (int64_t e = 0; e < kExperts; ++e) {
      const size_t c = static_cast<size_t>(id);
      EXPECT_EQ(classes.Rows()[c * kExperts + static_cast<size_t>(e)], stored[slot][e])
          << "slot " << slot << ", expert " << e;
      EXPECT_EQ(classes.BlockedRows()[c / kLanes * kLanes * kExperts + e * kLanes + c % kLanes],
                stored[slot][e])
          << "slot " << slot << ", expert " << e;
    }
  }
}

TEST(FmoeRowClasses, EqualRowsShareAClassBitForBit) {
  FmoeRowClasses classes(kExperts, kLanes);
  const std::vector<Row> stored = {RowOf(1), RowOf(2), RowOf(1), {0.0f, 0.5f, 0.0f}, RowOf(0)};
  for (size_t slot = 0; slot < stored.size(); ++slot) classes.Set(slot, stored[slot].data());
  EXPECT_TRUE(classes.Complete());
  EXPECT_EQ(classes.Ids()[0], classes.Ids()[2]);
  EXPECT_NE(classes.Ids()[0], classes.Ids()[1]);
  // RowOf(0) ends in -0: equal to +0 but other bits, so kept apart (compared bit for bit, as
  // the row's bytes are what the search multiplies).
  EXPECT_NE(classes.Ids()[3], classes.Ids()[4]);
  EXPECT_EQ(classes.Count(), 4);
  ExpectConsistent(classes, stored);
}

TEST(FmoeRowClasses, ReplacedMapsReleaseTheirClass) {
  FmoeRowClasses classes(kExperts, kLanes);
  std::vector<Row> stored = {RowOf(1), RowOf(2)};
  for (size_t slot = 0; slot < stored.size(); ++slot) classes.Set(slot, stored[slot].data());
  stored[0] = RowOf(2);  // the only map of row 1 replaced
  classes.Set(0, stored[0].data());
  EXPECT_EQ(classes.Ids()[0], classes.Ids()[1]);
  stored[1] = RowOf(1);  // row 1 comes back: its class, carried by no map meanwhile, again
  classes.Set(1, stored[1].data());
  EXPECT_EQ(classes.Count(), 2);
  ExpectConsistent(classes, stored);
}

TEST(FmoeRowClasses, RowsPastTheCapacityHaveNoClassUntilReplaced) {
  FmoeRowClasses classes(kExperts, kLanes);
  const int capacity = FmoeRowClasses::kCapacity;
  std::vector<Row> stored;
  for (int n = 0; n <= capacity; ++n) {
    stored.push_back(RowOf(n));
    classes.Set(stored.size() - 1, stored.back().data());
  }
  EXPECT_EQ(classes.Count(), capacity);
  EXPECT_FALSE(classes.Complete());
  EXPECT_EQ(classes.Ids()[static_cast<size_t>(capacity)], -1);
  // The map without a class takes a known row: every map has a class again.
  stored.back() = RowOf(0);
  classes.Set(stored.size() - 1, stored.back().data());
  EXPECT_TRUE(classes.Complete());
  ExpectConsistent(classes, stored);
}

TEST(FmoeRowClasses, HalfTheClassesUnusedAreRenumberedToMakeRoom) {
  FmoeRowClasses classes(kExperts, kLanes);
  const int capacity = FmoeRowClasses::kCapacity;
  std::vector<Row> stored;
  for (int n = 0; n < capacity; ++n) {
    stored.push_back(RowOf(n));
    classes.Set(stored.size() - 1, stored.back().data());
  }
  // Half the maps (the even ones) take row 1: their classes are carried by no map.
  for (size_t slot = 0; slot < stored.size(); slot += 2) {
    stored[slot] = RowOf(1);
    classes.Set(slot, stored[slot].data());
  }
  EXPECT_EQ(classes.Count(), capacity);
  // A new row: the unused classes are dropped, the rest renumbered, and it gets a class.
  stored[2] = RowOf(capacity + 7);
  classes.Set(2, stored[2].data());
  EXPECT_TRUE(classes.Complete());
  EXPECT_LE(classes.Count(), capacity / 2 + 1);
  ExpectConsistent(classes, stored);
  EXPECT_EQ(classes.Ids()[0], classes.Ids()[1]);  // row 1 at both
}

}  // namespace
}  // namespace moelab::policies::impl
