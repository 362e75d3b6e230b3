// SD measurement files (fit/sd_measurements): CSV or JSON, read from a file as `fit sd` does.
#include "fit/sd_measurements.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = moelab::fuzz::WriteInput(data, size, "measurements.csv");
  moelab::fuzz::Refuses([&] {
    const auto measurements = moelab::fit::LoadSdMeasurements(file);
    moelab::fit::ValidateSdMeasurementSet(measurements, file.string());
  });
  return 0;
}
