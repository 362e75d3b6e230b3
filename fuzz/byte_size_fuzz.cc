// Byte sizes as users write them (base/units ParseBytes): "24GB", "16GiB", plain bytes.
#include <cmath>
#include <cstdlib>

#include "base/units.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::Refuses([&] {
    const double bytes = moelab::base::ParseBytes(std::string(moelab::fuzz::Text(data, size)),
                                                  "--accelerator-memory");
    // The contract: a finite size of at least one byte and no larger than kMaxBytes.
    if (!(std::isfinite(bytes) && bytes >= 1 && bytes <= moelab::base::kMaxBytes)) std::abort();
  });
  return 0;
}
