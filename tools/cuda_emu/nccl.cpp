// The NCCL calls actorlm makes (kernels/cuda/nccl_group.cpp), for tools/cuda_emu, with the
// declarations of the toolkit's nccl.h: the ranks of a communicator are threads of this process
// (the emulated devices of CUDA_EMU_DEVICES), joined by their unique id; ncclAllReduce (sum, f32,
// f16, bf16) waits for every rank, sums in f32 in rank order and rounds once (NCCL's ring rounds
// at every hop in f16 and bf16: a little less exact than here). A rank that never
// comes makes the others fail after CUDA_EMU_NCCL_TIMEOUT_S (default 120) seconds instead of
// hanging as NCCL would.
#include "tools/cuda_emu/host.hpp"

#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Clique {
  explicit Clique(int n) : nranks(n), sends(n, nullptr), joined(n, false) {}
  const int nranks;
  std::mutex mu;
  std::condition_variable cv;
  bool scattering = false, aborted = false;
  int arrived = 0, departed = 0;
  std::vector<const void*> sends;
  std::vector<bool> joined;
  std::vector<float> sum;
  std::size_t count = 0;
  actorlm::kernels::cuda::ActDtype type = actorlm::kernels::cuda::ActDtype::f32;
};

std::mutex registry_mu;
std::map<std::string, std::weak_ptr<Clique>> registry;

std::chrono::seconds timeout() {
  const char* s = std::getenv("CUDA_EMU_NCCL_TIMEOUT_S");
  return std::chrono::seconds(s != nullptr ? std::atoi(s) : 120);
}

// The element type of an NCCL data type this emulation takes (f32, f16, bf16).
std::optional<actorlm::kernels::cuda::ActDtype> element_type(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return actorlm::kernels::cuda::ActDtype::f32;
    case ncclFloat16: return actorlm::kernels::cuda::ActDtype::f16;
    case ncclBfloat16: return actorlm::kernels::cuda::ActDtype::bf16;
    default: return std::nullopt;
  }
}

}  // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
};

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (cuda_emu)";
    case ncclInvalidUsage: return "invalid usage (cuda_emu)";
    case ncclSystemError: return "a rank did not come (cuda_emu: CUDA_EMU_NCCL_TIMEOUT_S) or the communicator was aborted";
    default: return "unhandled error (cuda_emu)";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  for (std::size_t i = 0; i < sizeof id->internal; i += 8) {
    const std::uint64_t r = rng();
    std::memcpy(id->internal + i, &r, 8);
  }
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::lock_guard lock(registry_mu);
  const std::string key(id.internal, sizeof id.internal);
  std::shared_ptr<Clique> c = registry[key].lock();
  if (!c) registry[key] = c = std::make_shared<Clique>(nranks);
  if (c->nranks != nranks || c->joined[rank]) return ncclInvalidUsage;
  c->joined[rank] = true;
  *comm = new ncclComm{c, rank};
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    std::lock_guard lock(comm->clique->mu);
    comm->clique->aborted = true;
  }
  comm->clique->cv.notify_all();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

namespace {

// The sum of every rank's `send` into each rank's `recv`, once all ranks have called it.
ncclResult_t all_reduce(const void* send, void* recv, size_t count, actorlm::kernels::cuda::ActDtype type,
                        ncclComm_t comm) {
  cuda_emu::count(cuda_emu::Counted::all_reduce);
  Clique& c = *comm->clique;
  std::unique_lock lock(c.mu);
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  // A rank that gives up leaves the others a communicator they cannot finish on: aborted.
  const auto give_up = [&] {
    c.aborted = true;
    c.cv.notify_all();
    return ncclSystemError;
  };
  // The previous all-reduce's ranks have all taken their result.
  if (!c.cv.wait_until(lock, deadline, [&] { return !c.scattering || c.aborted; }) || c.aborted) return give_up();
  if (c.arrived == 0) c.count = count, c.type = type;
  if (c.count != count || c.type != type) return ncclInvalidUsage;
  c.sends[comm->rank] = send;
  if (++c.arrived == c.nranks) {
    c.sum.assign(count, 0.0f);
    for (int r = 0; r < c.nranks; ++r)
      for (std::size_t i = 0; i < count; ++i) c.sum[i] += cuda_emu::load(c.sends[r], type, i);
    c.scattering = true;
    c.cv.notify_all();
  } else if (!c.cv.wait_until(lock, deadline, [&] { return c.scattering || c.aborted; }) || c.aborted) {
    return give_up();
  }
  for (std::size_t i = 0; i < count; ++i) cuda_emu::store(recv, type, i, c.sum[i]);
  if (++c.departed == c.nranks) {
    c.arrived = c.departed = 0;
    c.scattering = false;
    c.cv.notify_all();
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const auto t = element_type(type);
  if (comm == nullptr || op != ncclSum || !t) return ncclInvalidArgument;
  const std::size_t bytes = actorlm::kernels::cuda::act_bytes(*t);
  if (count > 0 && (!cuda_emu::device_range(send, count * bytes) || !cuda_emu::device_range(recv, count * bytes)))
    return ncclInvalidArgument;
  if (cuda_emu::capturing()) {  // each rank records its part; the graphs' launches meet
    cuda_emu::record([=] {
      if (all_reduce(send, recv, count, *t, comm) != ncclSuccess)
        throw std::runtime_error("cuda_emu: an all-reduce in a graph failed (a rank gave up or the shapes differ)");
    });
    return ncclSuccess;
  }
  cuda_emu::before_op(stream);
  return all_reduce(send, recv, count, *t, comm);
}
