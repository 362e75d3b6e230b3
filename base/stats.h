#pragma once

#include <cstdint>
#include <vector>

namespace moelab::base {

// Order statistics of measured samples (repetitions of a timing, rates, errors). Two definitions
// on purpose: they differ in the last bit for an even count (0.5 * (a + b) is not a + (b - a) / 2
// in floating point), and each has results recorded with it.

// The middle value of `values`, or the mean 0.5 * (a + b) of the two middle ones for an even
// count (the textbook median: profiles and fits). Throws Error on no values.
double Median(std::vector<double> values);
// ln |Gamma(x)|, as std::lgamma, without writing the C library's global `signgam` (std::lgamma
// does: a data race when a sweep's points run on threads, found by ThreadSanitizer).
double LogGamma(double x);

// The q-quantile, linearly interpolated between order statistics (type 7, numpy's default):
// values sorted, position q * (n - 1). Quantile(v, 0.5) is the median as a + (b - a) / 2 (the
// validation reports'). Throws Error on no values or q outside [0, 1].
double Quantile(std::vector<double> values, double q);

// The two-sided sign test: the chance, if either of two alternatives were as likely to win each
// of `pairs` paired trials, of a split at least as uneven as `wins` of them: min(1, 2 P(X >= m)),
// X ~ Binomial(pairs, 1/2), m = max(wins, pairs - wins). 1 with no pairs. Throws Error unless
// 0 <= wins <= pairs.
double SignTestP(int64_t wins, int64_t pairs);

}  // namespace moelab::base
