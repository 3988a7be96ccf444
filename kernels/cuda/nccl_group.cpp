#include "kernels/cuda/nccl_group.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

#define ACTORLM_NCCL_CHECK(call)                                                                    \
  do {                                                                                              \
    const ncclResult_t actorlm_nc_ = (call);                                                        \
    if (actorlm_nc_ != ncclSuccess)                                                                 \
      throw std::runtime_error(std::string("NCCL: ") + #call + ": " + ncclGetErrorString(actorlm_nc_)); \
  } while (0)

ncclDataType_t nccl_type(ActDtype d) {
  switch (d) {
    case ActDtype::f32: return ncclFloat32;
    case ActDtype::f16: return ncclFloat16;
    case ActDtype::bf16: return ncclBfloat16;
  }
  throw std::invalid_argument("nccl: unknown dtype");
}

constexpr const char* unique_id_key = "nccl_unique_id";

}  // namespace

NcclComm::~NcclComm() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclComm::all_reduce_sum(void* data, std::int64_t n, ActDtype dtype, cudaStream_t stream) {
  ACTORLM_NCCL_CHECK(ncclAllReduce(data, data, static_cast<std::size_t>(n), nccl_type(dtype), ncclSum, comm_, stream));
}

std::vector<std::unique_ptr<NcclComm>> join_nccl(int world, const std::vector<std::uint32_t>& ranks,
                                                 const std::vector<int>& devices,
                                                 const std::shared_ptr<RendezvousStore>& store,
                                                 std::chrono::milliseconds timeout) {
  if (ranks.size() != devices.size()) throw std::invalid_argument("join_nccl: one device per hosted rank");
  ncclUniqueId id;
  const bool has_root = std::find(ranks.begin(), ranks.end(), 0u) != ranks.end();
  if (!store || has_root) {
    ACTORLM_NCCL_CHECK(ncclGetUniqueId(&id));
    if (store) store->set(unique_id_key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
  } else {
    const std::vector<char> v = store->get(unique_id_key, timeout);
    if (v.size() != sizeof id.internal)
      throw std::runtime_error("NCCL: the rendezvous store's unique id has " + std::to_string(v.size()) +
                               " bytes, not " + std::to_string(sizeof id.internal));
    std::memcpy(id.internal, v.data(), v.size());
  }
  std::vector<ncclComm_t> comms(ranks.size(), nullptr);
  ACTORLM_NCCL_CHECK(ncclGroupStart());
  try {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      ACTORLM_CUDA_CHECK(cudaSetDevice(devices[i]));
      ACTORLM_NCCL_CHECK(ncclCommInitRank(&comms[i], world, id, static_cast<int>(ranks[i])));
    }
  } catch (...) {
    ncclGroupEnd();  // the group closed on the error path too
    for (ncclComm_t c : comms)
      if (c) ncclCommAbort(c);
    throw;
  }
  ACTORLM_NCCL_CHECK(ncclGroupEnd());
  std::vector<std::unique_ptr<NcclComm>> out;
  for (ncclComm_t c : comms) out.push_back(std::make_unique<NcclComm>(c));
  return out;
}

}  // namespace actorlm::kernels::cuda
