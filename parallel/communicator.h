#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace moelab::parallel {

// An error every rank of the job raised alike (bad options, a rank that could not start, ranks
// that differ): the CLI prints it once, on rank 0, and every rank exits non-zero.
class AgreedError : public base::Error {
 public:
  using base::Error::Error;
};

// A collective still in flight (MPI_Ialltoallv's request). Test() drives its progress and says
// whether it finished; Wait() blocks until it does or the communicator's timeout passes, then
// throws base::Error naming the collective (a dead or hung rank must not hang the others).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual bool Test() = 0;
  virtual void Wait() = 0;
};

// The processes one job runs as (MPI_COMM_WORLD) and the collectives expert parallelism needs.
// Every call is collective: each rank makes the same calls in the same order. Byte counts are per
// peer rank, indexed by rank. Only the thread that made the communicator calls it. Every wait is
// bounded by timeout_s(): past it the call throws base::Error instead of hanging.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual double timeout_s() const = 0;

  // All-to-all of one int64 per peer: recv[r] = what rank r sent to this rank.
  virtual std::unique_ptr<PendingCollective> StartAllToAll(const int64_t* send, int64_t* recv) = 0;
  // All-to-all(v) of bytes: send_bytes[r] bytes at send + send_offsets[r] go to rank r, which
  // must expect them (its recv_bytes[this rank]); recv_offsets say where each peer's bytes land.
  virtual std::unique_ptr<PendingCollective> StartAllToAllV(
      const void* send, const std::vector<int64_t>& send_bytes,
      const std::vector<int64_t>& send_offsets, void* recv, const std::vector<int64_t>& recv_bytes,
      const std::vector<int64_t>& recv_offsets) = 0;
  // Element-wise sum / max over ranks of `count` doubles, in place, every rank getting the result.
  virtual void AllReduceSum(double* values, int64_t count) = 0;
  virtual void AllReduceMax(double* values, int64_t count) = 0;
  // Every rank's value, indexed by rank.
  virtual std::vector<uint64_t> AllGather(uint64_t value) = 0;
  // Every rank's bytes, indexed by rank (they may differ in length).
  virtual std::vector<std::string> AllGatherBytes(const std::string& bytes) = 0;
  // Every rank's bytes at `root` (in rank order); an empty vector on the other ranks. Half the
  // traffic of AllGatherBytes, each rank's bytes received into their own string (a sweep's
  // outcomes, which only rank 0 writes: 25 MB a rank for 100,000 points on two ranks).
  virtual std::vector<std::string> GatherBytes(const std::string& bytes, int root) = 0;
  virtual void Barrier() = 0;
  // Ends the whole job at once (MPI_Abort): for a rank that cannot leave the collectives in step
  // (a timeout), so the others do not wait for it.
  [[noreturn]] virtual void Abort(int status) = 0;
};

// How long a collective may wait for a peer before the job is declared broken.
inline constexpr double kDefaultCollectiveTimeoutS = 120.0;

// Whether this build has MPI (CMake option MOELAB_MPI).
bool MpiBuilt();
// The rank count the launcher (mpirun, srun, mpiexec) started this process among, read from its
// environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE...); 0 when no launcher started it.
int LaunchedWorldSize();

// What the ranks will exchange: kHeavy, the expert-parallel step's all-to-alls (MPI's default
// transport); kLight, a few small collectives (a sweep's gathers), for which the start-up counts
// most: with Open MPI, the ob1 point-to-point layer is asked for unless the user chose one
// (OMPI_MCA_pml), since choosing one by default (Open MPI tries the others' components first) took
// 0.2 s of a 0.45-s two-rank sweep of two points on a 2-vCPU VM (0.25 s with ob1).
enum class Traffic { kHeavy, kLight };

// MPI_COMM_WORLD, initializing MPI (funneled threads) on the first call and finalizing it when the
// communicator is destroyed. Refused with a base::Error that names `option` when the build has no
// MPI or no launcher started this process.
std::unique_ptr<Communicator> MakeWorldCommunicator(const std::string& option,
                                                    double timeout_s = kDefaultCollectiveTimeoutS,
                                                    Traffic traffic = Traffic::kHeavy);

}  // namespace moelab::parallel
