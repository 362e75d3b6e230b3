// CLI list syntax (base/number_lists): "1,2,4", "1-8", "1-256:x2", number lists "0.5:0.9:0.1" and
// single numbers. The first byte picks the parser and the minimum.
#include "base/number_lists.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(moelab::fuzz::Text(data + 1, size - 1));
  moelab::fuzz::Refuses([&] {
    switch (data[0] % 3) {
      case 0:
        moelab::base::ParseIntList(text, "batch", data[0] % 2);
        break;
      case 1:
        moelab::base::ParseNumberList(text, "alpha");
        break;
      default:
        moelab::base::ParseNumber(text, "alpha");
        break;
    }
  });
  return 0;
}
