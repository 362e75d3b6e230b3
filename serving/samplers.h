#pragma once

#include "base/hash.h"

namespace moelab::serving {

// Continuous draws from base/hash.h's SplitMix64Stream, the load's random variates (arrival gaps,
// lengths). Each consumes a deterministic sequence of the stream's numbers, so a seed gives the
// same values on every machine with the same libm.

// Uniform in [0, 1): the stream's top 53 bits.
double UniformDraw(base::SplitMix64Stream& stream);

// Exponential with `rate` (mean 1 / rate): -log(1 - U) / rate; Poisson arrivals' gaps.
double ExponentialDraw(base::SplitMix64Stream& stream, double rate);

// Standard normal by Box-Muller (two uniforms per draw, the second value dropped so a draw
// depends on no hidden state).
double NormalDraw(base::SplitMix64Stream& stream);

// Gamma with `shape` > 0 and scale 1 (mean `shape`, CV 1 / sqrt(shape)). Marsaglia and Tsang (ACM
// TOMS 26(3), 2000): for shape >= 1 a rejection from a transformed normal (accepts > 95 % of
// tries); for shape < 1 the boost Gamma(shape + 1) * U^(1 / shape). One method for every CV: a sum
// of exponentials would only cover CV = 1 / sqrt(n).
double GammaDraw(base::SplitMix64Stream& stream, double shape);

}  // namespace moelab::serving
