#include <cstdlib>
#include <string>

#include "parallel/communicator.h"

namespace moelab::parallel {

int LaunchedWorldSize() {
  // OpenMPI's mpirun, then PMIx and PMI launchers (Slurm's srun, MPICH's hydra).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    try {
      const int size = std::stoi(value);
      if (size >= 1) return size;
    } catch (const std::exception&) {
    }
  }
  return 0;
}

}  // namespace moelab::parallel
