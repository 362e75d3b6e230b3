#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

// fMoE's map store, one layer of it: the distinct rows (a map's E gate probabilities at this
// layer, compared bit for bit) its stored maps carry, each a class numbered from 0. A pass's dot
// product with every stored map at this layer then costs one dot product per class and a lookup
// per map, the same float sum as a dot product per map: at batch 1 a layer's rows are the
// C(E, K) routings of one token (28 for Mixtral, and the prompt's row) over a store of up to 1024
// maps.
namespace moelab::policies::impl {

class FmoeRowClasses {
 public:
  // The most classes kept per layer, as many as the search picks from with register permutes
  // (two AVX-512 registers): more distinct rows than this (batched passes, whose rows rarely
  // repeat) leave maps without a class, and the search reads their rows directly.
  static constexpr int32_t kCapacity = 32;

  // `lanes`: classes per block of BlockedRows().
  FmoeRowClasses(int64_t experts, size_t lanes);

  // Stored map `slot` (at most the number of maps so far: the next one, or one replaced) now
  // carries `row` (E floats); the class of the row it carried before loses it.
  void Set(size_t slot, const float* row);

  // Whether every stored map's row has a class (then Ids() covers every map).
  bool Complete() const { return unclassed_ == 0; }
  // Classes numbered so far, some perhaps carried by no map any more: ids are below it.
  int32_t Count() const { return static_cast<int32_t>(carriers_.size()); }
  const float* Rows() const { return rows_.data(); }  // [class][expert]
  // The rows in blocks of `lanes` classes, expert-major (the search's layout of stored maps):
  // expert e of class c at (c / lanes) * lanes * E + e * lanes + c % lanes; zeros past Count().
  const float* BlockedRows() const { return blocked_.data(); }
  const int32_t* Ids() const { return ids_.data(); }  // [slot]: its row's class, -1 for none

 private:
  int32_t Find(const float* row, uint64_t hash) const;
  int32_t AddClass(const float* row, uint64_t hash);
  void Index(int32_t id, uint64_t hash);
  void Place(int32_t id);  // its row into blocked_
  // Renumbers the classes still carried by a map (their rows and ids), dropping the others.
  void Compact();
  uint64_t HashOf(const float* row) const;

  size_t experts_, lanes_;
  std::vector<float> rows_;        // [class][expert]
  std::vector<float> blocked_;     // BlockedRows()
  std::vector<int32_t> carriers_;  // [class]: stored maps carrying it
  std::vector<int32_t> index_;     // open addressing by the row's hash: class, or -1
  std::vector<int32_t> ids_;       // [slot]
  int64_t unclassed_ = 0;          // stored maps whose row has no class
  int32_t dead_ = 0;               // classes no map carries
};

}  // namespace moelab::policies::impl
