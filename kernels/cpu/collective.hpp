#pragma once
// All-reduce and broadcast among the cpu backend's tensor-parallel shards: through the process's
// memory when every rank is a thread of this process (kernels/cpu/local_group.hpp), through
// Gloo's TCP transport when the ranks span processes.
//
// A group of `size` ranks meets at a CollectiveRendezvous; each rank calls Collective::join from
// its own thread, which returns once every rank has joined and all pairs are connected. After
// that the ranks issue the same collectives in the same order, each from its own thread, with
// equal element counts; a Collective is used by one thread at a time. Every call blocks until
// this rank's part of the operation is done.
//
// Errors: an operation that cannot complete within the group's timeout (a rank missing, a
// connection lost) throws std::runtime_error naming the rank, the operation and the cause. A
// failed join spoils the rendezvous for everyone: make a new one. Destroying a rank's Collective
// closes its connections (leaves the group, in one process), so the other ranks' next operations
// fail. Ranks of one process: a timeout, a rank leaving or ranks out of step make every rank's
// current and later operations fail (local_group.hpp); across processes, those that involve the
// rank. Bad arguments (a rank or root out of range, a rank joining twice) throw
// std::invalid_argument.
//
// A group of size 1 makes no Gloo calls: every operation is a no-op.
//
// Reproducibility: all_reduce_sum sums every element in rank order on both data planes
// (kernels/cpu/rank_order_sum.hpp), so a group's results have the same bits whether its ranks
// share a process or not, and on every rank.

#include "kernels/rendezvous_store.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace actorlm::kernels::cpu {

class LocalGroup;

// Where the ranks of one group find each other: a key-value store for exchanging addresses and
// the host address this process's ranks listen on. The one-argument constructor makes the
// in-process kind (ranks are threads sharing the object by pointer and meeting in its memory; no
// sockets). The other spans processes: `store` is reachable from every rank (the head serves one over
// its actors) and `hostname` is this process's address that the other processes can connect to.
// Ranks of one process share one rendezvous object either way.
class CollectiveRendezvous {
 public:
  explicit CollectiveRendezvous(int size);  // size >= 1, else std::invalid_argument
  CollectiveRendezvous(int size, std::shared_ptr<RendezvousStore> store, std::string hostname);
  ~CollectiveRendezvous();

  int size() const { return size_; }

 private:
  friend class Collective;

  CollectiveRendezvous(int size, std::shared_ptr<gloo::rendezvous::Store> store,
                       std::string hostname, int /*tag*/);

  // Marks `rank` as joining; std::invalid_argument when out of range or already claimed.
  void claim(int rank);
  // The ranks that have not called join yet (in this process), e.g. "2, 3".
  std::string missing_ranks();

  int size_;
  std::shared_ptr<LocalGroup> local_;  // the in-process kind's meeting place; null across processes
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::string hostname_;
  std::mutex mutex_;
  std::vector<bool> joined_;  // [size]
};

class Collective {
 public:
  // Blocks until all ranks have joined; `timeout` bounds the join and, later, each operation.
  static std::unique_ptr<Collective> join(std::shared_ptr<CollectiveRendezvous> rendezvous,
                                          int rank, std::chrono::milliseconds timeout);
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // data: [n], the same n on every rank. In place: every rank ends with the elementwise sum.
  void all_reduce_sum(std::span<float> data);
  // data: [n], the same n on every rank. In place: every rank ends with root's data.
  void broadcast(std::span<float> data, int root);
  void broadcast(std::span<int32_t> data, int root);
  // Point to point (a layer split's hidden states, stage to stage): `dst` receives with
  // recv(…, this rank, tag) a buffer of the same length. A receive takes the message of its own
  // tag only (use each tag once per pair and direction, e.g. the step's id), so a rank that
  // missed a step cannot take a later step's data for it. send returns once `data` may be reused
  // (the peer received it); recv once `data` holds the message. Other operations may run in
  // between. As for every operation, a timeout closes the connection to that peer (Gloo's): the
  // group is unusable after it.
  void send(std::span<const float> data, int dst, uint32_t tag);
  void recv(std::span<float> data, int src, uint32_t tag);

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  Collective(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context> context,
             std::shared_ptr<LocalGroup> local);

  void check_peer(int peer, const char* what) const;  // std::invalid_argument unless another rank
  template <typename T>
  void broadcast_impl(std::span<T> data, int root, const char* what);
  // Gloo's side of all_reduce_sum: each rank gathers its slice from every peer, sums it in rank
  // order and sends it back to all (two rounds of messages).
  void all_reduce_over_gloo(std::span<float> data, uint32_t tag);
  // Runs an operation, turning its exceptions into std::runtime_error naming this rank.
  template <typename Op>
  void run(const char* what, std::size_t elements, Op&& op);

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;  // ranks in several processes; else null
  std::shared_ptr<LocalGroup> local_;       // ranks in this process; else null (both null: size 1)
  std::vector<float> gathered_;       // [size, max(slice, 1)] all_reduce_over_gloo's peers' slices (own row unused)
  std::vector<const float*> parts_;  // [size] the rows it sums, in rank order
  uint32_t next_tag_ = 0;  // each operation gets its own tag, in the same order on every rank
};

}  // namespace actorlm::kernels::cpu
