#include "kernels/cpu/thread_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ACTORLM_PAUSE() _mm_pause()
#else
#define ACTORLM_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace actorlm::kernels::cpu {

namespace {

// Pause-loop iterations before sleeping: a few hundred microseconds (a pause is 10-140 cycles
// depending on the core), longer than the gap between two engine steps (the actor hops), so a
// worker rarely sleeps between steps: on a shared VM an idle vCPU halts, and waking it can take
// far longer than the spin. bench cpu --concurrency 1 --requests 16, stored weights, seven pairs
// of alternating binaries: 2,000 iterations 74-193 tokens/s (median 143), 20,000 138-200
// (median 175), the low figures gone. Within a decode step (no gaps) the two were level.
// Hence ThreadPool::default_spin_iterations = 20,000.

template <class Ready>
bool spin_until(std::int64_t spin_iterations, Ready ready) {
  for (std::int64_t i = 0; i < spin_iterations; ++i) {
    if (ready()) return true;
    ACTORLM_PAUSE();
  }
  return ready();
}

}  // namespace

ThreadPool::ThreadPool(std::int32_t threads, std::int64_t spin_iterations) : spin_iterations_(spin_iterations) {
  owned_ = std::make_unique<Owned[]>(static_cast<std::size_t>(std::max(1, threads)));
  for (std::int32_t i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::split(std::int64_t n, std::int64_t grain, std::int32_t ranges, std::int32_t t,
                       std::int64_t& begin, std::int64_t& end) {
  const std::int64_t units = (n + grain - 1) / grain;
  begin = std::min(n, units * t / ranges * grain);
  end = t + 1 == ranges ? n : std::min(n, units * (t + 1) / ranges * grain);
}

void ThreadPool::run_ranges(const Task& t, std::int32_t self) {
  const std::int32_t threads = size(), ranges = threads * t.chunks;
  for (std::int32_t k = 0; k < threads; ++k) {  // its own ranges first, then the others'
    Owned& o = owned_[static_cast<std::size_t>((self + k) % threads)];
    for (std::int32_t i = o.next.fetch_add(1, std::memory_order_relaxed); i < o.end;
         i = o.next.fetch_add(1, std::memory_order_relaxed)) {
      std::int64_t b = 0, e = 0;
      split(t.n, t.grain, ranges, i, b, e);
      if (b < e) t.call(t.fn, b, e);
    }
  }
}

void ThreadPool::run(const Task& t) {
  if (workers_.empty() || t.n <= t.grain) {
    if (t.n > 0) t.call(t.fn, 0, t.n);
    return;
  }
  task_ = t;
  for (std::int32_t i = 0; i < size(); ++i) {
    owned_[static_cast<std::size_t>(i)].next.store(i * t.chunks, std::memory_order_relaxed);
    owned_[static_cast<std::size_t>(i)].end = (i + 1) * t.chunks;
  }
  pending_.store(static_cast<std::int32_t>(workers_.size()), std::memory_order_relaxed);
  if (resting_.load(std::memory_order_relaxed)) resting_.store(false, std::memory_order_relaxed);
  {
    // Under the mutex, so that a worker between its check and its sleep cannot miss the bump.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_ranges(t, 0);
  if (!spin_until(spin_iterations_, [&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::worker(std::int32_t self) {
  std::uint64_t seen = 0;
  for (;;) {
    const auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(spin_iterations_, [&] { return changed() || resting_.load(std::memory_order_acquire); }) ||
        !changed()) {
      std::unique_lock lock(mutex_);
      ++sleeping_;
      wake_.wait(lock, changed);
      --sleeping_;
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    run_ranges(task_, self);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // the caller may be between its check and its sleep
      done_.notify_one();
    }
  }
}

}  // namespace actorlm::kernels::cpu
