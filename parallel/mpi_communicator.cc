// The Communicator over MPI (builds with MOELAB_MPI). The only file that includes mpi.h.
// Only MPI's C API: OpenMPI's and MPICH's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <climits>
#include <memory>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "parallel/communicator.h"

namespace moelab::parallel {
namespace {

using Clock = std::chrono::steady_clock;

void Check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw base::Error(std::string(call) +
                    " failed: " + std::string(text, static_cast<size_t>(length)));
}

int ToInt(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX)
    throw base::Error(std::string(what) + " of " + std::to_string(value) +
                      " bytes is outside MPI's int counts");
  return static_cast<int>(value);
}

// Polls `request` until it completes or `timeout_s` passes. Every blocking collective goes
// through here, so no rank waits forever for one that died.
class MpiPending final : public PendingCollective {
 public:
  MpiPending(const char* name, double timeout_s) : name_(name), timeout_s_(timeout_s) {}
  ~MpiPending() override {
    // A request abandoned by an exception is left to MPI_Abort or MPI_Finalize; freeing an active
    // collective request is not allowed.
  }
  MPI_Request* request() { return &request_; }
  // All-to-all(v)'s int counts and displacements: MPI may read them until the request completes,
  // so they live as long as it does.
  std::vector<int> counts[4];
  bool Test() override {
    if (done_) return true;
    int flag = 0;
    Check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    done_ = flag != 0;
    return done_;
  }
  void Wait() override {
    const Clock::time_point deadline =
        Clock::now() +
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    while (!Test()) {
      if (Clock::now() > deadline) {
        throw base::Error(std::string(name_) + " waited more than " +
                          std::to_string(static_cast<int64_t>(timeout_s_)) +
                          " s for its peers: a rank died or hung");
      }
      std::this_thread::yield();
    }
  }
  // Withdraws a point-to-point receive still waiting, so that MPI no longer writes into its
  // buffer (one about to be freed by an exception); a receive's cancel completes locally.
  void CancelReceive() {
    if (done_ || request_ == MPI_REQUEST_NULL) return;
    MPI_Cancel(&request_);
    MPI_Wait(&request_, MPI_STATUS_IGNORE);
    done_ = true;
  }

 private:
  const char* name_;
  double timeout_s_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

// GatherBytes' point-to-point messages: no other point-to-point traffic shares the communicator.
constexpr int kGatherTag = 7311;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(double timeout_s, Traffic traffic) : timeout_s_(timeout_s) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // Read by Open MPI's MPI_Init from this process's environment; other MPIs ignore it.
      if (traffic == Traffic::kLight) ::setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0);
      int provided = 0;
      Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
    }
    // Errors come back as codes (Check turns them into base::Error) instead of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    if (owns_mpi_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_s() const override { return timeout_s_; }

  std::unique_ptr<PendingCollective> StartAllToAll(const int64_t* send, int64_t* recv) override {
    auto pending = std::make_unique<MpiPending>("all-to-all", timeout_s_);
    Check(MPI_Ialltoall(send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, MPI_COMM_WORLD,
                        pending->request()),
          "MPI_Ialltoall");
    return pending;
  }

  std::unique_ptr<PendingCollective> StartAllToAllV(
      const void* send, const std::vector<int64_t>& send_bytes,
      const std::vector<int64_t>& send_offsets, void* recv, const std::vector<int64_t>& recv_bytes,
      const std::vector<int64_t>& recv_offsets) override {
    const size_t n = static_cast<size_t>(size_);
    if (send_bytes.size() != n || send_offsets.size() != n || recv_bytes.size() != n ||
        recv_offsets.size() != n)
      throw base::Error("all-to-all(v): counts and offsets need one entry per rank");
    auto pending = std::make_unique<MpiPending>("all-to-all(v)", timeout_s_);
    for (std::vector<int>& list : pending->counts) list.resize(n);
    std::vector<int>& sc = pending->counts[0];
    std::vector<int>& sd = pending->counts[1];
    std::vector<int>& rc = pending->counts[2];
    std::vector<int>& rd = pending->counts[3];
    for (size_t r = 0; r < n; ++r) {
      sc[r] = ToInt(send_bytes[r], "an all-to-all(v) message");
      sd[r] = ToInt(send_offsets[r], "an all-to-all(v) offset");
      rc[r] = ToInt(recv_bytes[r], "an all-to-all(v) message");
      rd[r] = ToInt(recv_offsets[r], "an all-to-all(v) offset");
    }
    Check(MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                         MPI_COMM_WORLD, pending->request()),
          "MPI_Ialltoallv");
    return pending;
  }

  void AllReduceSum(double* values, int64_t count) override { AllReduce(values, count, MPI_SUM); }
  void AllReduceMax(double* values, int64_t count) override { AllReduce(values, count, MPI_MAX); }

  std::vector<uint64_t> AllGather(uint64_t value) override {
    std::vector<uint64_t> all(static_cast<size_t>(size_));
    MpiPending pending("all-gather", timeout_s_);
    Check(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD,
                         pending.request()),
          "MPI_Iallgather");
    pending.Wait();
    return all;
  }

  std::vector<std::string> AllGatherBytes(const std::string& bytes) override {
    const std::vector<uint64_t> sizes = AllGather(bytes.size());
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      counts[r] = ToInt(static_cast<int64_t>(sizes[r]), "an all-gather(v) message");
      displs[r] = ToInt(total, "an all-gather(v) offset");
      total += counts[r];
    }
    std::string all(static_cast<size_t>(total), '\0');
    MpiPending pending("all-gather(v)", timeout_s_);
    Check(
        MPI_Iallgatherv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, all.data(),
                        counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD, pending.request()),
        "MPI_Iallgatherv");
    pending.Wait();
    std::vector<std::string> each;
    for (int r = 0; r < size_; ++r) each.push_back(all.substr(displs[r], counts[r]));
    return each;
  }

  std::vector<std::string> GatherBytes(const std::string& bytes, int root) override {
    if (root < 0 || root >= size_) throw base::Error("gather: no rank " + std::to_string(root));
    const uint64_t size = bytes.size();
    std::vector<uint64_t> sizes(rank_ == root ? static_cast<size_t>(size_) : 0);
    {
      MpiPending pending("gather", timeout_s_);
      Check(MPI_Igather(&size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, root, MPI_COMM_WORLD,
                        pending.request()),
            "MPI_Igather");
      pending.Wait();
    }
    // Each rank's bytes go straight into their own string at the root: a gather(v) into one buffer
    // split afterwards copied every byte once more (25 MB a rank for a 100,000-point sweep).
    if (rank_ != root) {
      const int count = ToInt(static_cast<int64_t>(size), "a gather(v) message");
      MpiPending pending("gather(v)", timeout_s_);
      Check(MPI_Isend(bytes.data(), count, MPI_BYTE, root, kGatherTag, MPI_COMM_WORLD,
                      pending.request()),
            "MPI_Isend");
      pending.Wait();
      return {};
    }
    // Every count checked and every buffer made before the first receive is posted, so nothing
    // after that can throw but a receive itself (then the others are withdrawn first).
    std::vector<int> counts(static_cast<size_t>(size_));
    std::vector<std::string> each(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      counts[r] = ToInt(static_cast<int64_t>(sizes[r]), "a gather(v) message");
      if (r == root) {
        each[r] = bytes;
      } else {
        each[r].resize(sizes[r]);
      }
    }
    std::vector<std::unique_ptr<MpiPending>> receives;
    for (int r = 0; r < size_; ++r) {
      if (r != root) receives.push_back(std::make_unique<MpiPending>("gather(v)", timeout_s_));
    }
    try {
      for (int r = 0, i = 0; r < size_; ++r) {
        if (r == root) continue;
        Check(MPI_Irecv(each[r].data(), counts[r], MPI_BYTE, r, kGatherTag, MPI_COMM_WORLD,
                        receives[i++]->request()),
              "MPI_Irecv");
      }
      for (const std::unique_ptr<MpiPending>& receive : receives) receive->Wait();
    } catch (...) {
      for (const std::unique_ptr<MpiPending>& receive : receives) receive->CancelReceive();
      throw;
    }
    return each;
  }

  void Barrier() override {
    MpiPending pending("barrier", timeout_s_);
    Check(MPI_Ibarrier(MPI_COMM_WORLD, pending.request()), "MPI_Ibarrier");
    pending.Wait();
  }

  [[noreturn]] void Abort(int status) override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  void AllReduce(double* values, int64_t count, MPI_Op op) {
    MpiPending pending("all-reduce", timeout_s_);
    Check(MPI_Iallreduce(MPI_IN_PLACE, values, ToInt(count, "an all-reduce"), MPI_DOUBLE, op,
                         MPI_COMM_WORLD, pending.request()),
          "MPI_Iallreduce");
    pending.Wait();
  }
  double timeout_s_;
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool MpiBuilt() { return true; }

std::unique_ptr<Communicator> MakeWorldCommunicator(const std::string& option, double timeout_s,
                                                    Traffic traffic) {
  if (LaunchedWorldSize() == 0) {
    throw base::Error(option +
                      " needs MPI ranks: start moelab under mpirun (e.g. mpirun -n 2 moelab ...)");
  }
  return std::make_unique<MpiCommunicator>(timeout_s, traffic);
}

}  // namespace moelab::parallel
