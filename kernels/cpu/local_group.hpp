#pragma once
// The data plane of ranks that are threads of one process: they meet in this object, reading
// and writing each other's buffers in the process's memory, with no sockets. Collective uses it
// for a rendezvous made in-process (the cpu backend's ranks when no worker hosts any of them);
// Gloo over TCP remains for ranks in other processes.
//
// Each operation is called by every rank from its own thread, in the same order, as Collective's
// contract says. A collective is two barriers: every rank posts its buffer's address and waits
// for the others (barrier 1); each rank then does its share (an all-reduce: sums its slice of
// every buffer and writes the sum into all of them; a broadcast: copies the root's whole buffer
// into its own) and waits again (barrier 2), after which no rank touches another's buffer.
// - The posts are written under the lock at barrier 1 and read after it opens: the last rank
//   to arrive takes the lock after every post, and releases the barrier's generation, which the
//   waiters acquire.
// - Once barrier 1 has opened, barrier 2 waits without deadline and whatever happens: a rank
//   giving up there could let its buffer go while another still works on it.
// - A waiting rank yields its core a few dozen times (a step's ranks usually arrive within
//   microseconds of each other, and a yield lets a rank that shares the core run: 3 ranks on 2
//   cores), then sleeps on a condition variable.
//
// Errors: a rank that waits past its timeout (at barrier 1, or in a send or receive), a rank
// that leaves (its Collective destroyed), and ranks that disagree on the operation or its length
// break the whole group: every waiting and later operation of every rank throws
// std::runtime_error saying why. (On Gloo a leaving rank closes only its own connections; a
// timeout there, too, leaves the group unusable.)

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace actorlm::kernels::cpu {

class LocalGroup {
 public:
  explicit LocalGroup(int size);

  int size() const { return size_; }

  // Returns once every rank has joined, or throws (timeout: "timed out ..."; the caller names
  // the missing ranks).
  void join(int rank, std::chrono::milliseconds timeout);
  // data: [n], the same n on every rank; every rank ends with the sum in rank order
  // (rank_order_sum.hpp).
  // `tag`: the operation's number, the same on every rank (Collective's count); checked with the
  // kind of operation, the root and the length, so that ranks out of step fail instead of
  // writing past a buffer.
  void all_reduce_sum(int rank, std::span<float> data, std::uint32_t tag, std::chrono::milliseconds timeout);
  // data: [bytes], the same on every rank; every rank ends with root's bytes.
  void broadcast(int rank, std::span<std::byte> data, int root, std::uint32_t tag, std::chrono::milliseconds timeout);
  // Point to point, matched by (from, to, tag): send returns once the receiver has copied the
  // data; recv once `data` holds it. The lengths must agree.
  void send(int rank, std::span<const float> data, int dst, std::uint32_t tag, std::chrono::milliseconds timeout);
  void recv(int rank, std::span<float> data, int src, std::uint32_t tag, std::chrono::milliseconds timeout);
  // The rank is gone: the others' current and later operations fail.
  void leave(int rank);

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  static constexpr std::uint64_t kAllReduce = 1, kBroadcast = 2;
  struct Post {  // a rank's part in the current collective
    void* data = nullptr;
    std::size_t n = 0;     // elements or bytes
    std::uint64_t op = 0;  // tag << 32 | kind << 16 | root
  };
  // A collective's first barrier (and the join's): posts `post` (if any) under the lock and
  // waits for every rank; throws when the group is or becomes broken, or at the deadline (which
  // breaks it). Once it returns, every rank is committed to the collective.
  void arrive_and_wait(int rank, Deadline deadline, const Post* post);
  // A collective's second barrier: waits for every rank without deadline, whatever the group's
  // state (each has only its own share of the copy or sum left).
  void finish();
  // Counts this rank in at the current barrier (lock held); true when it was the last, which
  // opens the barrier. `gen`: the barrier's generation.
  bool arrive_locked(std::uint64_t& gen);
  // Polls whether barrier `gen` opened, yielding the core in between (kYields times at most).
  bool yield_until_open(std::uint64_t gen) const;
  // Barrier 1, `work` (this rank's share) unless the posts disagree, barrier 2; then throws
  // (breaking the group) if the posts disagreed or `work` threw.
  template <class Work>
  void collective(int rank, const Post& post, std::chrono::milliseconds timeout, Work&& work);
  // Empty when every rank posted the same operation and length; else says which did not.
  std::string disagreement() const;
  // Marks the group broken (the first reason stays) and wakes every waiter. Lock held.
  void break_locked(const std::string& why);
  [[noreturn]] void throw_broken_locked() const;

  struct Message {
    const float* data = nullptr;
    std::size_t n = 0;
    bool taken = false;
  };

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a barrier opened, a message came or was taken, a break
  std::atomic<std::uint64_t> generation_{0};  // barriers opened so far
  int arrived_ = 0;                            // ranks waiting at the current barrier
  std::string broken_;                         // why the group is unusable; empty while usable
  std::vector<Post> posted_;                   // [size] each rank's part in the current collective
  std::vector<std::vector<const float*>> parts_;  // [size][size] each rank's scratch for its sum
  std::vector<std::vector<float*>> outs_;         // [size][size]
  std::map<std::tuple<int, int, std::uint32_t>, Message> mailbox_;  // (from, to, tag)
};

}  // namespace actorlm::kernels::cpu
