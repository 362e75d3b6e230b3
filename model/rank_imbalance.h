#pragma once
// How unevenly uniform routing loads the ranks of expert parallelism: a layer's step waits for the
// rank whose local experts received the most token copies.
#include <cstdint>

namespace moelab::model {

// E[max of n independent standard normals] (0 for n <= 1), by quadrature.
double ExpectedMaxOfStandardNormals(int64_t n);

// How far the busiest of `ranks` ranks' rows (token copies its `group` local experts receive) lies
// above a rank's mean `tokens` top_k group / experts, when each of `tokens` tokens picks `top_k`
// distinct of `experts` experts uniformly and every rank holds `group` of them (disjoint). Per
// token a rank's count is hypergeometric, variance k p (1 - p) (E - k) / (E - 1) with
// p = group / E, and two ranks' counts covary by -k p^2 (E - k) / (E - 1): correlation
// -p / (1 - p). Summed over the tokens, near normal; the largest of n exchangeable normals of
// correlation rho lies sqrt(1 - rho) E[max of n standard normals] deviations above the mean.
// 0 with one rank (or a group of every expert).
double BusiestRankExcessRows(double tokens, int64_t experts, int64_t top_k, int64_t group,
                             int64_t ranks);

}  // namespace moelab::model
