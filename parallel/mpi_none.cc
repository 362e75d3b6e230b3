// Builds without MPI (MOELAB_MPI off): no communicator, and a message that says why.
#include "base/error.h"
#include "parallel/communicator.h"

namespace moelab::parallel {

bool MpiBuilt() { return false; }

std::unique_ptr<Communicator> MakeWorldCommunicator(const std::string& option, double /*timeout_s*/,
                                                    Traffic /*traffic*/) {
  throw base::Error(option +
                    " needs MPI, and this moelab was built without it (install libopenmpi-dev "
                    "and openmpi-bin, scripts/install-deps.sh, then rebuild: CMake finds MPI and "
                    "sets MOELAB_MPI=ON)");
}

}  // namespace moelab::parallel
