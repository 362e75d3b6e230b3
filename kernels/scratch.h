#pragma once

#include <cstdint>
#include <vector>

namespace moelab::kernels {

// Grows `v` to at least `count` elements, value-initialized: written, so its pages are resident
// before a timed call uses them (the Reserve* functions, ForwardModel::ReservePass). Never shrinks.
template <typename T>
void GrowTouched(std::vector<T>& v, int64_t count) {
  if (static_cast<int64_t>(v.size()) < count) v.resize(static_cast<size_t>(count));
}

}  // namespace moelab::kernels
