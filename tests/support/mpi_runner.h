#pragma once

#include <string>

#include "tests/support/cli_runner.h"

namespace moelab::testing {

// `binary args` on `ranks` MPI ranks started by `mpiexec`: as root too (OpenMPI refuses root
// without these), more ranks than cores, no cross-memory attach (containers forbid its ptrace).
inline CliRun RunOnRanks(const std::string& mpiexec, const std::string& binary, int ranks,
                         const std::string& args) {
  const std::string environment =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none ";
  return RunShell(environment + mpiexec + " -n " + std::to_string(ranks) + " " + binary + " " +
                  args);
}

// Why an MPI test is skipped in a build without MPI.
inline constexpr const char* kNoMpiBuild =
    "this build has no MPI (MOELAB_MPI off): install libopenmpi-dev and openmpi-bin, then "
    "reconfigure";

}  // namespace moelab::testing
