#pragma once
// The cuda backend's tensor-parallel group: one NCCL communicator per rank, the sums of the
// forward's partial outputs (all-reduce) on the rank's stream. The ranks meet through NCCL's
// unique id: in one process it is made here; across processes the rank-0 side publishes it in
// the data plane's rendezvous store (kernels/rendezvous_store.hpp, served by a cluster's head
// over the actors, as for Gloo) and the others read it there.

#include "kernels/cuda/elementwise.hpp"
#include "kernels/rendezvous_store.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <vector>

struct ncclComm;

namespace actorlm::kernels::cuda {

class NcclComm {
 public:
  explicit NcclComm(ncclComm* comm) : comm_(comm) {}
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  // data[n] summed over the group, in place, enqueued on `stream`.
  void all_reduce_sum(void* data, std::int64_t n, ActDtype dtype, cudaStream_t stream);

 private:
  ncclComm* comm_;
};

// Communicators for the ranks `ranks` (of `world`) hosted here, rank ranks[i] on device
// devices[i], all created at once. `store`: null when every rank is in this process; else where
// the unique id is published (by the process hosting rank 0) and read (by the others), waiting
// up to `timeout`. Throws std::runtime_error with NCCL's message.
std::vector<std::unique_ptr<NcclComm>> join_nccl(int world, const std::vector<std::uint32_t>& ranks,
                                                 const std::vector<int>& devices,
                                                 const std::shared_ptr<RendezvousStore>& store,
                                                 std::chrono::milliseconds timeout);

}  // namespace actorlm::kernels::cuda
