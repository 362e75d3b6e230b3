#include "policies/impl/fmoe_row_classes.h"

#include <algorithm>
#include <cstring>

#include "base/hash.h"

namespace moelab::policies::impl {
namespace {

// Open addressing at most half full: a probe ends at an empty entry within a few steps.
constexpr size_t kIndexSize = 2 * static_cast<size_t>(FmoeRowClasses::kCapacity);
static_assert((kIndexSize & (kIndexSize - 1)) == 0, "the index is masked, not divided");

}  // namespace

FmoeRowClasses::FmoeRowClasses(int64_t experts, size_t lanes)
    : experts_(static_cast<size_t>(experts)), lanes_(lanes), index_(kIndexSize, -1) {}

// A multiply per value and one Mix64 at the end: the index only needs the low bits spread.
uint64_t FmoeRowClasses::HashOf(const float* row) const {
  uint64_t hash = 0;
  for (size_t e = 0; e < experts_; ++e) {
    uint32_t bits;
    std::memcpy(&bits, row + e, sizeof(bits));
    hash = (hash ^ bits) * base::kSplitMix64Golden;
  }
  return base::Mix64(hash);
}

int32_t FmoeRowClasses::Find(const float* row, uint64_t hash) const {
  for (size_t at = hash & (kIndexSize - 1);; at = (at + 1) & (kIndexSize - 1)) {
    const int32_t id = index_[at];
    if (id < 0) return -1;
    if (std::memcmp(&rows_[static_cast<size_t>(id) * experts_], row, experts_ * sizeof(float)) ==
        0) {
      return id;
    }
  }
}

void FmoeRowClasses::Index(int32_t id, uint64_t hash) {
  size_t at = hash & (kIndexSize - 1);
  while (index_[at] >= 0) at = (at + 1) & (kIndexSize - 1);
  index_[at] = id;
}

int32_t FmoeRowClasses::AddClass(const float* row, uint64_t hash) {
  const int32_t id = Count();
  rows_.insert(rows_.end(), row, row + experts_);
  carriers_.push_back(0);
  ++dead_;  // until a map carries it
  Index(id, hash);
  Place(id);
  return id;
}

void FmoeRowClasses::Place(int32_t id) {
  const size_t c = static_cast<size_t>(id);
  const size_t block_start = c / lanes_ * lanes_ * experts_;
  if (blocked_.size() < block_start + lanes_ * experts_) {
    blocked_.resize(block_start + lanes_ * experts_, 0.0f);
  }
  for (size_t e = 0; e < experts_; ++e) {
    blocked_[block_start + e * lanes_ + c % lanes_] = rows_[c * experts_ + e];
  }
}

void FmoeRowClasses::Compact() {
  std::vector<int32_t> renumbered(carriers_.size(), -1);
  std::vector<float> rows;
  std::vector<int32_t> carriers;
  for (size_t c = 0; c < carriers_.size(); ++c) {
    if (carriers_[c] == 0) continue;
    renumbered[c] = static_cast<int32_t>(carriers.size());
    rows.insert(rows.end(), rows_.begin() + static_cast<std::ptrdiff_t>(c * experts_),
                rows_.begin() + static_cast<std::ptrdiff_t>((c + 1) * experts_));
    carriers.push_back(carriers_[c]);
  }
  rows_ = std::move(rows);
  carriers_ = std::move(carriers);
  dead_ = 0;
  std::fill(index_.begin(), index_.end(), -1);
  blocked_.clear();
  for (int32_t id = 0; id < Count(); ++id) {
    const float* row = &rows_[static_cast<size_t>(id) * experts_];
    Index(id, HashOf(row));
    Place(id);
  }
  for (int32_t& id : ids_) id = id < 0 ? -1 : renumbered[static_cast<size_t>(id)];
}

void FmoeRowClasses::Set(size_t slot, const float* row) {
  if (slot == ids_.size()) {
    ids_.push_back(-1);
    ++unclassed_;  // as if it carried a row without a class, released just below
  }
  const int32_t previous = ids_[slot];
  if (previous < 0) {
    --unclassed_;
  } else if (--carriers_[static_cast<size_t>(previous)] == 0) {
    ++dead_;
  }
  const uint64_t hash = HashOf(row);
  int32_t id = Find(row, hash);
  if (id < 0) {
    // Full: renumber once half the classes are carried by no map (so at most once every
    // kCapacity / 2 new rows), else the row goes without a class.
    if (Count() == kCapacity && dead_ >= kCapacity / 2) Compact();
    if (Count() < kCapacity) id = AddClass(row, hash);
  }
  if (id < 0) {
    ++unclassed_;
  } else if (carriers_[static_cast<size_t>(id)]++ == 0) {
    --dead_;
  }
  ids_[slot] = id;
}

}  // namespace moelab::policies::impl
