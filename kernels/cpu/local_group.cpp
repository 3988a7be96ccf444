#include "kernels/cpu/local_group.hpp"

#include "kernels/cpu/rank_order_sum.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace actorlm::kernels::cpu {
namespace {

// How often a rank at a barrier yields its core before it sleeps. A yield hands the core to a
// rank that shares it (3 ranks on 2 cores) and costs a system call when none does; waking a
// sleeper costs a futex call and a reschedule; one decode step of the default model makes about
// 60 all-reduces, two barriers each. Measured with `actorlm generate --tp 3 -n 128` on 2 cores
// (tokens/s after the first; three runs each): 64 yields 154-205; 16 yields 135-143; sleeping at
// once 106-127; 20 pause instructions before the yields 147-156, 200 139-154, 2,000 83-89,
// 20,000 15 (the pauses keep the core from the rank that shares it).
constexpr int kYields = 64;

}  // namespace

LocalGroup::LocalGroup(int size)
    : size_(size),
      posted_(std::size_t(std::max(size, 0))),
      parts_(std::size_t(std::max(size, 0)), std::vector<const float*>(std::size_t(std::max(size, 0)))),
      outs_(std::size_t(std::max(size, 0)), std::vector<float*>(std::size_t(std::max(size, 0)))) {
  if (size < 1) throw std::invalid_argument("local group: size must be >= 1, got " + std::to_string(size));
}

void LocalGroup::break_locked(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  changed_.notify_all();
}

void LocalGroup::throw_broken_locked() const {
  throw std::runtime_error("the group is unusable: " + broken_);
}

bool LocalGroup::arrive_locked(std::uint64_t& gen) {
  gen = generation_.load(std::memory_order_relaxed);
  if (++arrived_ < size_) return false;
  arrived_ = 0;
  generation_.store(gen + 1, std::memory_order_release);
  changed_.notify_all();
  return true;
}

bool LocalGroup::yield_until_open(std::uint64_t gen) const {
  for (int i = 0; i < kYields; ++i) {
    if (generation_.load(std::memory_order_acquire) != gen) return true;
    std::this_thread::yield();
  }
  return false;
}

void LocalGroup::arrive_and_wait(int rank, Deadline deadline, const Post* post) {
  std::uint64_t gen;
  {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) throw_broken_locked();
    if (post) posted_[std::size_t(rank)] = *post;
    if (arrive_locked(gen)) return;
  }
  if (yield_until_open(gen)) return;
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] {
    return generation_.load(std::memory_order_relaxed) != gen || !broken_.empty();
  });
  // A barrier that opened counts even if the group broke right after (a rank leaving once the
  // operation is done).
  if (generation_.load(std::memory_order_acquire) != gen) return;
  if (broken_.empty()) {
    --arrived_;
    break_locked("rank " + std::to_string(rank) + " timed out waiting for the others");
    throw std::runtime_error("timed out waiting for the other ranks");
  }
  throw_broken_locked();
}

void LocalGroup::finish() {
  std::uint64_t gen;
  {
    std::lock_guard lock(mutex_);
    if (arrive_locked(gen)) return;
  }
  if (yield_until_open(gen)) return;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != gen; });
}

std::string LocalGroup::disagreement() const {
  for (int r = 1; r < size_; ++r) {
    const Post& p = posted_[std::size_t(r)];
    if (p.op != posted_[0].op)
      return "ranks disagree on the operation (rank " + std::to_string(r) + " is in another collective than rank 0)";
    if (p.n != posted_[0].n)
      return "ranks disagree on the length (rank " + std::to_string(r) + ": " + std::to_string(p.n) + ", rank 0: " +
             std::to_string(posted_[0].n) + ")";
  }
  return {};
}

template <class Work>
void LocalGroup::collective(int rank, const Post& post, std::chrono::milliseconds timeout, Work&& work) {
  arrive_and_wait(rank, std::chrono::steady_clock::now() + timeout, &post);
  // Every rank sees every post, so all agree whether to go on. Whatever happens, every rank
  // reaches the second barrier: the others may be working on this rank's buffer.
  std::string why;
  std::exception_ptr error;
  try {
    why = disagreement();
    if (why.empty()) work();
  } catch (...) {
    error = std::current_exception();
  }
  finish();
  if (error) {
    {
      std::lock_guard lock(mutex_);
      break_locked("rank " + std::to_string(rank) + " failed in a collective");
    }
    std::rethrow_exception(error);
  }
  if (!why.empty()) {
    std::lock_guard lock(mutex_);
    break_locked(why);
    throw std::runtime_error(why);
  }
}

void LocalGroup::join(int rank, std::chrono::milliseconds timeout) {
  arrive_and_wait(rank, std::chrono::steady_clock::now() + timeout, nullptr);
}

void LocalGroup::all_reduce_sum(int rank, std::span<float> data, std::uint32_t tag,
                                std::chrono::milliseconds timeout) {
  const Post post{data.data(), data.size(), std::uint64_t(tag) << 32 | kAllReduce << 16};
  collective(rank, post, timeout, [&] {
    const std::size_t begin = slice_begin(data.size(), size_, rank);
    const std::size_t end = slice_begin(data.size(), size_, rank + 1);
    auto& parts = parts_[std::size_t(rank)];
    auto& outs = outs_[std::size_t(rank)];
    for (int r = 0; r < size_; ++r) {
      outs[std::size_t(r)] = static_cast<float*>(posted_[std::size_t(r)].data) + begin;
      parts[std::size_t(r)] = outs[std::size_t(r)];
    }
    sum_in_rank_order(parts, end - begin, outs);
  });
}

void LocalGroup::broadcast(int rank, std::span<std::byte> data, int root, std::uint32_t tag,
                           std::chrono::milliseconds timeout) {
  const Post post{data.data(), data.size(), std::uint64_t(tag) << 32 | kBroadcast << 16 | std::uint64_t(root)};
  collective(rank, post, timeout, [&] {
    if (rank != root) std::memcpy(data.data(), posted_[std::size_t(root)].data, data.size());
  });
}

void LocalGroup::send(int rank, std::span<const float> data, int dst, std::uint32_t tag,
                      std::chrono::milliseconds timeout) {
  const auto key = std::make_tuple(rank, dst, tag);
  std::unique_lock lock(mutex_);
  if (!broken_.empty()) throw_broken_locked();
  // One thread per rank sends one message at a time, so a key is never taken twice.
  [[maybe_unused]] const bool fresh = mailbox_.emplace(key, Message{data.data(), data.size(), false}).second;
  assert(fresh);
  changed_.notify_all();
  const bool taken = changed_.wait_until(lock, std::chrono::steady_clock::now() + timeout,
                                         [&] { return mailbox_.at(key).taken || !broken_.empty(); });
  const bool done = mailbox_.at(key).taken;
  mailbox_.erase(key);
  if (done) return;
  if (!taken) {
    break_locked("rank " + std::to_string(rank) + " timed out sending to rank " + std::to_string(dst));
    throw std::runtime_error("timed out: rank " + std::to_string(dst) + " did not receive");
  }
  throw_broken_locked();
}

void LocalGroup::recv(int rank, std::span<float> data, int src, std::uint32_t tag, std::chrono::milliseconds timeout) {
  const auto key = std::make_tuple(src, rank, tag);
  std::unique_lock lock(mutex_);
  const bool came = changed_.wait_until(lock, std::chrono::steady_clock::now() + timeout, [&] {
    auto it = mailbox_.find(key);
    return (it != mailbox_.end() && !it->second.taken) || !broken_.empty();
  });
  auto it = mailbox_.find(key);
  if (it != mailbox_.end() && !it->second.taken) {
    if (it->second.n != data.size()) {
      const std::string why = "rank " + std::to_string(src) + " sent " + std::to_string(it->second.n) +
                              " elements where " + std::to_string(data.size()) + " were expected";
      break_locked(why);
      throw std::runtime_error(why);
    }
    // Copied under the lock: a layer split's hand-over is a few KB, and the sender is blocked on
    // it anyway.
    std::copy_n(it->second.data, data.size(), data.data());
    it->second.taken = true;
    changed_.notify_all();
    return;
  }
  if (!came) {
    break_locked("rank " + std::to_string(rank) + " timed out receiving from rank " + std::to_string(src));
    throw std::runtime_error("timed out: nothing from rank " + std::to_string(src));
  }
  throw_broken_locked();
}

void LocalGroup::leave(int rank) {
  std::lock_guard lock(mutex_);
  break_locked("rank " + std::to_string(rank) + " has left the group");
}

}  // namespace actorlm::kernels::cpu
