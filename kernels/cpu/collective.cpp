#include "kernels/cpu/collective.hpp"

#include "kernels/cpu/local_group.hpp"
#include "kernels/cpu/rank_order_sum.hpp"

#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

namespace actorlm::kernels::cpu {
namespace {

// Gloo's HashStore::get returns an empty value for a key not set yet, and connectFullMesh reads
// the other ranks' hostnames with get() before it ever waits: a fast rank would read nothing.
// This view waits for a key before reading it, with the joining rank's timeout, and reports a
// timeout as JoinTimeout.
struct JoinTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class WaitingStore : public gloo::rendezvous::Store {
 public:
  WaitingStore(std::shared_ptr<gloo::rendezvous::Store> inner, std::chrono::milliseconds timeout)
      : inner_(std::move(inner)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, data);
  }

  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    return inner_->get(key);
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    try {
      inner_->wait(keys, timeout);
    } catch (const gloo::IoException& e) {
      throw JoinTimeout(e.what());
    }
  }

 private:
  std::shared_ptr<gloo::rendezvous::Store> inner_;
  std::chrono::milliseconds timeout_;
};

// A RendezvousStore seen as Gloo's store. Its get() waits already; a key still missing after
// the timeout is reported as JoinTimeout, as WaitingStore does.
class ExternalStore : public gloo::rendezvous::Store {
 public:
  explicit ExternalStore(std::shared_ptr<RendezvousStore> inner) : inner_(std::move(inner)) {}

  void set(const std::string& key, const std::vector<char>& data) override { inner_->set(key, data); }

  std::vector<char> get(const std::string& key) override { return get(key, kDefaultTimeout); }

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const auto& key : keys) get(key, timeout);
  }

 private:
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) {
    try {
      return inner_->get(key, timeout);
    } catch (const std::runtime_error& e) {
      throw JoinTimeout(e.what());
    }
  }

  std::shared_ptr<RendezvousStore> inner_;
};

std::string prefix(int rank, int size) {
  return "collective rank " + std::to_string(rank) + " of " + std::to_string(size) + ": ";
}

}  // namespace

// --- rendezvous ------------------------------------------------------------------------------

CollectiveRendezvous::CollectiveRendezvous(int size) : CollectiveRendezvous(size, nullptr, "", 0) {
  local_ = std::make_shared<LocalGroup>(size);
}

CollectiveRendezvous::CollectiveRendezvous(int size, std::shared_ptr<RendezvousStore> store,
                                           std::string hostname)
    : CollectiveRendezvous(size, std::make_shared<ExternalStore>(std::move(store)), std::move(hostname), 0) {
  if (hostname_.empty()) throw std::invalid_argument("collective rendezvous: no host address for the data plane");
}

CollectiveRendezvous::CollectiveRendezvous(int size, std::shared_ptr<gloo::rendezvous::Store> store,
                                           std::string hostname, int)
    : size_(size), store_(std::move(store)), hostname_(std::move(hostname)) {
  if (size < 1)
    throw std::invalid_argument("collective rendezvous: size must be >= 1, got " +
                                std::to_string(size));
  joined_.assign(std::size_t(size), false);
}

CollectiveRendezvous::~CollectiveRendezvous() = default;

void CollectiveRendezvous::claim(int rank) {
  if (rank < 0 || rank >= size_)
    throw std::invalid_argument(prefix(rank, size_) + "rank out of range");
  std::lock_guard lock(mutex_);
  if (joined_[std::size_t(rank)])
    throw std::invalid_argument(prefix(rank, size_) + "this rank has already joined");
  joined_[std::size_t(rank)] = true;
}

std::string CollectiveRendezvous::missing_ranks() {
  std::lock_guard lock(mutex_);
  std::string out;
  for (int r = 0; r < size_; ++r)
    if (!joined_[std::size_t(r)]) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

// --- collective ------------------------------------------------------------------------------

Collective::Collective(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context> context,
                       std::shared_ptr<LocalGroup> local)
    : rank_(rank), size_(size), timeout_(timeout), context_(std::move(context)), local_(std::move(local)) {}

Collective::~Collective() {
  if (local_) local_->leave(rank_);
}

std::unique_ptr<Collective> Collective::join(std::shared_ptr<CollectiveRendezvous> rendezvous,
                                             int rank, std::chrono::milliseconds timeout) {
  if (!rendezvous) throw std::invalid_argument("collective join: no rendezvous");
  const int size = rendezvous->size();
  rendezvous->claim(rank);
  if (size == 1) return std::unique_ptr<Collective>(new Collective(rank, 1, timeout, nullptr, nullptr));

  if (rendezvous->local_) {
    const auto start = std::chrono::steady_clock::now();
    try {
      rendezvous->local_->join(rank, timeout);
    } catch (const std::exception& e) {
      const bool late = std::chrono::steady_clock::now() - start >= timeout;
      throw std::runtime_error(prefix(rank, size) + "join " +
                               (late ? "timed out after " + std::to_string(timeout.count()) + " ms" : "failed") +
                               " waiting for the other ranks (not joined: " + rendezvous->missing_ranks() +
                               "): " + e.what());
    }
    return std::unique_ptr<Collective>(new Collective(rank, size, timeout, nullptr, rendezvous->local_));
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = rendezvous->hostname_;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    WaitingStore store(rendezvous->store_, timeout);
    context->connectFullMesh(store, device);
    // connectFullMesh returns once this rank's pairs are connected, which can be before a peer's
    // side of the handshake is done; a rank that returned and left at once would then break the
    // peer's join. After a barrier, every rank is connected.
    gloo::BarrierOptions barrier(context);
    barrier.setTimeout(timeout);
    gloo::barrier(barrier);
    return std::unique_ptr<Collective>(new Collective(rank, size, timeout, std::move(context), nullptr));
  } catch (const JoinTimeout& e) {
    throw std::runtime_error(
        prefix(rank, size) + "join timed out after " + std::to_string(timeout.count()) +
        " ms waiting for the other ranks (not joined: " + rendezvous->missing_ranks() +
        "): " + e.what());
  } catch (const std::exception& e) {  // gloo::EnforceNotMet is no std::runtime_error
    throw std::runtime_error(prefix(rank, size) +
                             "join failed connecting to the other ranks: " + e.what());
  }
}

template <typename Op>
void Collective::run(const char* what, std::size_t elements, Op&& op) {
  try {
    op();
  } catch (const std::exception& e) {
    throw std::runtime_error(prefix(rank_, size_) + what + " of " + std::to_string(elements) +
                             " elements failed (timeout " + std::to_string(timeout_.count()) +
                             " ms): " + e.what());
  }
}

void Collective::all_reduce_sum(std::span<float> data) {
  const uint32_t tag = next_tag_++;
  if (size_ == 1 || data.empty()) return;
  run("all_reduce_sum", data.size(), [&] {
    if (local_) local_->all_reduce_sum(rank_, data, tag, timeout_);
    else all_reduce_over_gloo(data, tag);
  });
}

template <typename T>
void Collective::broadcast_impl(std::span<T> data, int root, const char* what) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument(prefix(rank_, size_) + what + ": root " + std::to_string(root) +
                                " out of range");
  const uint32_t tag = next_tag_++;
  if (size_ == 1 || data.empty()) return;
  run(what, data.size(), [&] {
    if (local_) return local_->broadcast(rank_, std::as_writable_bytes(data), root, tag, timeout_);
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data.data(), data.size());  // the root's output is its input
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

void Collective::broadcast(std::span<float> data, int root) {
  broadcast_impl(data, root, "broadcast");
}

void Collective::broadcast(std::span<int32_t> data, int root) {
  broadcast_impl(data, root, "broadcast(int32)");
}

namespace {

// Slots of our own messages, apart from Gloo's collectives' (gloo/types.h uses prefixes
// 0x01-0x08). Point to point: one prefix per direction, so that a rank's messages to a peer and
// the peer's to it never share a slot; the caller's tag tells one message from the next.
constexpr uint8_t kUpwardSlotPrefix = 0x70;    // to a higher rank
constexpr uint8_t kDownwardSlotPrefix = 0x71;  // to a lower rank
// all_reduce_over_gloo's two rounds, tagged with the operation's tag.
constexpr uint8_t kReduceRoundSlotPrefix = 0x72;  // a slice of everyone's data, to its owner
constexpr uint8_t kShareRoundSlotPrefix = 0x73;   // a slice's sum, from its owner to everyone

uint64_t p2p_slot(int from, int to, uint32_t tag) {
  return gloo::Slot::build(from < to ? kUpwardSlotPrefix : kDownwardSlotPrefix, tag);
}

}  // namespace

void Collective::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw std::invalid_argument(prefix(rank_, size_) + what + ": peer " + std::to_string(peer) +
                                " is not another rank of the group");
}

void Collective::all_reduce_over_gloo(std::span<float> data, uint32_t tag) {
  // Round 1: rank k receives slice k of every peer's data into gathered_ (row p: peer p's) and
  // sends each peer its slice of ours. Round 2, once our slice is summed: our sum goes to every
  // peer, and every peer's sum arrives in place. Round 2's receives overwrite what round 1 sent
  // from, so round 1's sends are waited for first.
  const auto n = data.size();
  const std::size_t mine = slice_begin(n, size_, rank_), len = slice_begin(n, size_, rank_ + 1) - mine;
  gathered_.resize(std::size_t(size_) * std::max<std::size_t>(len, 1));
  auto whole = context_->createUnboundBuffer(data.data(), data.size_bytes());
  auto rows = context_->createUnboundBuffer(gathered_.data(), gathered_.size() * sizeof(float));
  const auto deadline = std::chrono::steady_clock::now() + timeout_;  // one for the whole operation
  const auto wait = [&](gloo::transport::UnboundBuffer& buf, bool sending, int count) {
    for (; count > 0; --count) {
      // At least 1 ms: past the deadline the time left is 0 or negative, and Gloo reads -1 ms as
      // "unset" (the context's whole timeout).
      const auto left = std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now()));
      if (!(sending ? buf.waitSend(nullptr, left) : buf.waitRecv(nullptr, left)))
        throw std::runtime_error(sending ? "send aborted" : "receive aborted");
    }
  };
  const uint64_t reduce_round = gloo::Slot::build(kReduceRoundSlotPrefix, tag);
  const uint64_t share_round = gloo::Slot::build(kShareRoundSlotPrefix, tag);
  constexpr std::size_t f = sizeof(float);
  // Posts one round's messages: fn(peer, bytes where the peer's slice begins, its bytes) for
  // every other rank.
  const auto each_peer = [&](auto&& fn) {
    for (int p = 0; p < size_; ++p)
      if (p != rank_) {
        const std::size_t begin = slice_begin(n, size_, p);
        fn(p, begin * f, (slice_begin(n, size_, p + 1) - begin) * f);
      }
  };
  int sends = 0, recvs = 0;
  each_peer([&](int p, std::size_t at, std::size_t bytes) {
    if (bytes > 0) whole->send(p, reduce_round, at, bytes), ++sends;
    if (len > 0) rows->recv(p, reduce_round, std::size_t(p) * len * f, len * f), ++recvs;
  });
  wait(*rows, false, recvs);
  wait(*whole, true, sends);
  if (len > 0) {
    parts_.resize(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p)
      parts_[std::size_t(p)] = p == rank_ ? data.data() + mine : gathered_.data() + std::size_t(p) * len;
    float* out = data.data() + mine;
    sum_in_rank_order(parts_, len, std::span<float* const>(&out, 1));
  }
  sends = recvs = 0;
  each_peer([&](int p, std::size_t at, std::size_t bytes) {
    if (len > 0) whole->send(p, share_round, mine * f, len * f), ++sends;
    if (bytes > 0) whole->recv(p, share_round, at, bytes), ++recvs;
  });
  wait(*whole, false, recvs);
  wait(*whole, true, sends);
}

void Collective::send(std::span<const float> data, int dst, uint32_t tag) {
  check_peer(dst, "send");
  if (data.empty()) return;
  run("send", data.size(), [&] {
    if (local_) return local_->send(rank_, data, dst, tag, timeout_);
    // Gloo's buffers take a non-const pointer for both directions; a send only reads it.
    auto buf = context_->createUnboundBuffer(const_cast<float*>(data.data()), data.size_bytes());
    buf->send(dst, p2p_slot(rank_, dst, tag));
    if (!buf->waitSend(timeout_)) throw std::runtime_error("send aborted");
  });
}

void Collective::recv(std::span<float> data, int src, uint32_t tag) {
  check_peer(src, "recv");
  if (data.empty()) return;
  run("recv", data.size(), [&] {
    if (local_) return local_->recv(rank_, data, src, tag, timeout_);
    auto buf = context_->createUnboundBuffer(data.data(), data.size_bytes());
    buf->recv(src, p2p_slot(src, rank_, tag));
    if (!buf->waitRecv(timeout_)) throw std::runtime_error("receive aborted");
  });
}

}  // namespace actorlm::kernels::cpu
