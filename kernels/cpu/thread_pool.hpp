#pragma once
// A persistent pool of threads for the cpu kernels of one shard: `size()` threads in all, the
// caller being one of them. parallel_for splits [0, n) into chunks * size() contiguous ranges
// (whole multiples of `grain`, the last taking the rest). Thread t owns ranges [t * chunks,
// (t + 1) * chunks) and runs them in order, so each thread streams one contiguous part of a
// weight matrix (the hardware prefetcher follows it from one range into the next); a thread
// done with its own takes the others' remaining ranges from their counters, so a thread the OS
// preempts (the engine's actor threads share the cores) delays its own range, not the whole
// call. It returns when all have run.
//
// Contracts:
// - The ranges depend only on n, grain, chunks and size() (which thread runs one does not matter): a
//   kernel whose per-element arithmetic does not depend on its range gives the same bits
//   whatever the pool's size or the scheduling.
// - Waiting workers spin for a few hundred microseconds (a pause loop, no sched_yield), then
//   sleep on a condition variable; an idle pool costs no cpu. After rest() they sleep at once.
// - One caller at a time (a shard's forward); `fn` must not throw (it runs on worker threads).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace actorlm::kernels::cpu {

class ThreadPool {
 public:
  // Pause-loop iterations a waiting worker (and a caller waiting for its workers) spins before
  // it sleeps (kernels/cpu/thread_pool.cpp says why this many).
  static constexpr std::int64_t default_spin_iterations = 20000;

  explicit ThreadPool(std::int32_t threads = 1, std::int64_t spin_iterations = default_spin_iterations);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::int32_t size() const { return static_cast<std::int32_t>(workers_.size()) + 1; }

  // fn(begin, end) for each range of [0, n). `chunks` ranges per thread: fewer for calls whose
  // cost per range is high (an sgemm packs its operands for each call).
  template <class Fn>
  void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn, std::int32_t chunks = chunks_per_thread) {
    using F = std::remove_reference_t<Fn>;
    Task t{[](const void* f, std::int64_t b, std::int64_t e) { (*static_cast<const F*>(f))(b, e); }, &fn, n,
           grain < 1 ? 1 : grain, chunks < 1 ? 1 : chunks};
    run(t);
  }

  static constexpr std::int32_t chunks_per_thread = 4;

  // The caller will not run work for a while (a layer split's stage about to hand its output
  // on): waiting workers sleep now instead of spinning, so they leave the cores to the stage
  // that runs next. The next parallel_for wakes them. Between tasks only (the caller's thread).
  // Where the next stage runs elsewhere the step's gap outlasts the spin anyway, so this costs
  // no extra wake-up there.
  void rest() { resting_.store(true, std::memory_order_release); }

  // Workers asleep now (for tests).
  std::int32_t sleeping() const {
    std::lock_guard lock(mutex_);
    return sleeping_;
  }

  // Range t of [0, n) split into `ranges` (exposed for tests).
  static void split(std::int64_t n, std::int64_t grain, std::int32_t ranges, std::int32_t t,
                    std::int64_t& begin, std::int64_t& end);

 private:
  struct Task {
    void (*call)(const void*, std::int64_t, std::int64_t) = nullptr;
    const void* fn = nullptr;
    std::int64_t n = 0, grain = 1;
    std::int32_t chunks = chunks_per_thread;
  };
  void run(const Task& t);
  void worker(std::int32_t self);
  void run_ranges(const Task& t, std::int32_t self);

  // The next range of the current task that thread t owns, and the end of its ranges; on a line
  // of its own (the owner and thieves hit it).
  struct alignas(64) Owned {
    std::atomic<std::int32_t> next{0};
    std::int32_t end = 0;
  };

  std::vector<std::thread> workers_;
  Task task_;
  std::atomic<std::uint64_t> generation_{0};  // bumped for each task; workers wait for a change
  std::atomic<std::int32_t> pending_{0};      // workers still running the current task
  std::unique_ptr<Owned[]> owned_;            // [size()]
  std::atomic<bool> stop_{false};
  std::atomic<bool> resting_{false};          // rest() called since the last task
  const std::int64_t spin_iterations_;
  std::int32_t sleeping_ = 0;                 // workers in wake_.wait (under mutex_)
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
};

}  // namespace actorlm::kernels::cpu
