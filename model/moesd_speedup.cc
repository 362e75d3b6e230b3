#include "model/moesd_speedup.h"

#include "base/error.h"

namespace moelab::model {

std::string ToString(SdDenominator denominator) {
  return denominator == SdDenominator::kAlgorithm1 ? "algorithm1" : "equation4";
}

SdDenominator SdDenominatorFromString(const std::string& name) {
  if (name == "algorithm1") return SdDenominator::kAlgorithm1;
  if (name == "equation4") return SdDenominator::kEquation4;
  throw base::Error("unknown SD denominator '" + name +
                    "': expected \"algorithm1\" or \"equation4\"");
}

}  // namespace moelab::model
