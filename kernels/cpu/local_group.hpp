#pragma once
// The data plane of ranks that are threads of one process: they meet in this object's memory,
// with no sockets. Collective uses it for a rendezvous made in-process (the cpu backend's ranks
// when no worker hosts any of them); Gloo over TCP remains for ranks in other processes.
//
// Each operation is called by every rank from its own thread, in the same order, as Collective's
// contract says. A collective is two barriers: every rank posts its buffer's address and waits
// for the others (barrier 1); each rank then works on its own slice of every buffer (the sum of
// its slice, or a copy from the root) and waits again (barrier 2), after which no rank touches
// another's buffer. A waiting rank yields its core a few dozen times (a step's ranks usually
// arrive within microseconds of each other, and a yield lets a rank that shares the core run:
// 3 ranks on 2 cores) and then sleeps on a condition variable.
//
// Errors: a rank that waits past its timeout, a rank that leaves (its Collective destroyed), and
// ranks that disagree on a length break the group: every waiting and later operation throws
// std::runtime_error saying why (as a Gloo group is unusable after a timeout).

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
  void all_reduce_sum(int rank, std::span<float> data, std::chrono::milliseconds timeout);
  // data: [bytes], the same on every rank; every rank ends with root's bytes.
  void broadcast(int rank, std::span<std::byte> data, int root, std::chrono::milliseconds timeout);
  // Point to point, matched by (from, to, tag): send returns once the receiver has copied the
  // data; recv once `data` holds it. The lengths must agree.
  void send(int rank, std::span<const float> data, int dst, std::uint32_t tag, std::chrono::milliseconds timeout);
  void recv(int rank, std::span<float> data, int src, std::uint32_t tag, std::chrono::milliseconds timeout);
  // The rank is gone: the others' current and later operations fail.
  void leave(int rank);

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  // Barrier over all ranks; throws when the group is or becomes broken, or at the deadline
  // (which breaks it).
  void arrive_and_wait(int rank, Deadline deadline);
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
  std::vector<void*> posted_;                  // [size] each rank's buffer in the current operation
  std::vector<std::size_t> posted_n_;          // [size] its length (elements or bytes)
  std::map<std::tuple<int, int, std::uint32_t>, Message> mailbox_;  // (from, to, tag)
};

}  // namespace actorlm::kernels::cpu
