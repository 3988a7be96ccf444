#include "tools/cuda_emu/grid.hpp"

#include "kernels/splitmix64.hpp"
#include "tools/cuda_emu/host.hpp"

#include <boost/context/fiber.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace cuda_emu {

namespace {

namespace ctx = boost::context;

constexpr std::size_t stack_bytes = 256 * 1024;
constexpr std::size_t static_shared_limit = 48 * 1024;   // a kernel's __shared__ declarations
constexpr std::size_t block_shared_limit = 227 * 1024;   // static + dynamic (sm_90's opt-in maximum)

// Fiber stacks, reused from block to block (a block of 1,024 threads takes 1,024 of them), each
// with an inaccessible page below it: a kernel that overruns its stack faults at once.
class StackPool {
 public:
  ctx::stack_context allocate() {
    void* base = nullptr;
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) base = free_.back(), free_.pop_back();
    }
    if (base == nullptr) {
      const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      void* p = mmap(nullptr, stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      mprotect(p, page, PROT_NONE);
      base = static_cast<char*>(p) + page;
    }
    ctx::stack_context sc;
    sc.size = stack_bytes;
    sc.sp = static_cast<char*>(base) + stack_bytes;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) {
    std::lock_guard lock(mu_);
    free_.push_back(static_cast<char*>(sc.sp) - sc.size);
  }

 private:
  std::mutex mu_;
  std::vector<void*> free_;
};

StackPool& stacks() {
  static StackPool* pool = new StackPool;  // outlives every fiber, never torn down
  return *pool;
}

struct PooledStack {
  ctx::stack_context allocate() { return stacks().allocate(); }
  void deallocate(ctx::stack_context& sc) { stacks().deallocate(sc); }
};

enum class State { runnable, at_block_barrier, at_warp_collective, done };

struct Thread {
  Index3 index;
  int warp = 0, lane = 0;
  State state = State::runnable;
  ctx::fiber fiber;  // the thread, while it is suspended
  ctx::fiber back;   // the scheduler, while the thread runs
  std::exception_ptr error;
};

struct Warp {
  int live = 0, arrived = 0;
  Collective kind = Collective::shuffle;  // of the collective the arrived lanes wait in
  unsigned present = 0, exited = 0, generation = 0;
  alignas(16) unsigned char slots[2][32 * 16] = {};
};

struct Block {
  Index3 index;
  std::vector<Warp> warps;
  int live = 0, at_barrier = 0;
  std::map<std::pair<const char*, int>, std::pair<std::unique_ptr<unsigned char[]>, std::size_t>> statics;
  std::size_t static_bytes = 0;
  std::unique_ptr<unsigned char[]> dynamic;
  unsigned char* dynamic_aligned = nullptr;
  // Last: destroyed first, so a suspended thread unwinds while its shared memory still exists.
  std::vector<Thread> threads;
};

struct Running {
  const LaunchShape* shape = nullptr;
  Block* block = nullptr;
  Thread* thread = nullptr;
};

thread_local Running running;

Running& here() {
  if (running.thread == nullptr) throw std::logic_error("cuda_emu: a device function called outside a kernel");
  return running;
}

// Suspends the running thread until the scheduler resumes it.
void yield() {
  Thread& t = *here().thread;
  t.back = std::move(t.back).resume();
}

// A small fast generator for the orders (std::shuffle takes any uniform random bit generator).
struct SplitMix {
  using result_type = std::uint64_t;
  std::uint64_t state;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type(0); }
  result_type operator()() { return actorlm::kernels::splitmix64_mix(state += actorlm::kernels::splitmix64_gamma); }
};

std::uint64_t launch_seed() {
  static std::atomic<std::uint64_t> launches{0};
  static const std::uint64_t base = [] {
    const char* s = std::getenv("CUDA_EMU_SEED");
    return s != nullptr ? std::strtoull(s, nullptr, 10) : 0x5eedULL;
  }();
  return base * actorlm::kernels::splitmix64_gamma + launches.fetch_add(1);
}

std::string where(const char* kernel, const Block& b) {
  return std::string("cuda_emu: kernel ") + kernel + ", block (" + std::to_string(b.index.x) + ", " +
         std::to_string(b.index.y) + ", " + std::to_string(b.index.z) + ")";
}

std::string deadlock_report(const char* kernel, const Block& b) {
  int at_sync = 0, at_warp = 0, done = 0;
  std::string warps;
  for (const Thread& t : b.threads) {
    if (t.state == State::at_block_barrier) ++at_sync;
    if (t.state == State::done) ++done;
    if (t.state == State::at_warp_collective) ++at_warp;
  }
  for (std::size_t w = 0; w < b.warps.size(); ++w)
    if (b.warps[w].arrived > 0)
      warps += " warp " + std::to_string(w) + ": " + std::to_string(b.warps[w].arrived) + " of " +
               std::to_string(b.warps[w].live) + " lanes;";
  return where(kernel, b) + ": deadlock (divergent barriers): " + std::to_string(at_sync) +
         " threads at __syncthreads, " + std::to_string(at_warp) + " at a warp collective," + warps + " " +
         std::to_string(done) + " exited";
}

void thread_exited(Block& b, Thread& t) {
  t.state = State::done;
  --b.live;
  Warp& w = b.warps[t.warp];
  --w.live;
  w.exited |= 1u << t.lane;
  if (w.arrived > 0)
    throw std::runtime_error("lane " + std::to_string(t.lane) + " of warp " + std::to_string(t.warp) + " exited while " +
                             std::to_string(w.arrived) + " lanes wait in a full-mask warp collective");
  if (b.at_barrier > 0 && b.at_barrier == b.live) {
    b.at_barrier = 0;
    for (Thread& o : b.threads)
      if (o.state == State::at_block_barrier) o.state = State::runnable;
  }
}

void run_block(const char* kernel, const LaunchShape& shape, Block& b, const std::function<void()>& body,
               SplitMix& rng) {
  const Index3 bd = shape.block;
  const int n = static_cast<int>(bd.x * bd.y * bd.z);
  b.threads = std::vector<Thread>(n);
  b.warps.assign((n + 31) / 32, Warp{});
  b.live = n;
  if (shape.dynamic_shared > 0) {
    b.dynamic.reset(new unsigned char[shape.dynamic_shared + 16]);
    b.dynamic_aligned = b.dynamic.get() + (16 - reinterpret_cast<std::uintptr_t>(b.dynamic.get()) % 16) % 16;
    std::memset(b.dynamic_aligned, 0xff, shape.dynamic_shared);
  }
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.index = {unsigned(i) % bd.x, unsigned(i) / bd.x % bd.y, unsigned(i) / (bd.x * bd.y)};
    t.warp = i / 32, t.lane = i % 32;
    b.warps[t.warp].present |= 1u << t.lane;
    ++b.warps[t.warp].live;
    t.fiber = ctx::fiber(std::allocator_arg, PooledStack{}, [&b, &t, &body](ctx::fiber&& back) {
      t.back = std::move(back);
      try {
        body();
        thread_exited(b, t);
      } catch (const ctx::detail::forced_unwind&) {
        throw;
      } catch (...) {
        t.error = std::current_exception();
        t.state = State::done;
      }
      return std::move(t.back);
    });
  }
  std::vector<int> order(n);
  for (;;) {
    order.clear();
    for (int i = 0; i < n; ++i)
      if (b.threads[i].state == State::runnable) order.push_back(i);
    if (order.empty()) break;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      Thread& t = b.threads[i];
      if (t.state != State::runnable) continue;
      running.thread = &t;
      detail::place = {&t.index, &b.index, &shape.block, &shape.grid, t.lane};
      t.fiber = std::move(t.fiber).resume();
      running.thread = nullptr;
      detail::place = {};
      if (t.error) {
        std::string what = "a thread threw";
        try {
          std::rethrow_exception(t.error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        throw std::runtime_error(where(kernel, b) + ", thread " + std::to_string(i) + ": " + what);
      }
    }
  }
  if (b.live > 0) throw std::runtime_error(deadlock_report(kernel, b));
}

}  // namespace

const char* launch_shape_error(const LaunchShape& s) {
  const std::uint64_t threads = std::uint64_t(s.block.x) * s.block.y * s.block.z;
  if (s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0) return "an empty grid";
  if (s.grid.x > 0x7fffffffu || s.grid.y > 65535 || s.grid.z > 65535) return "a grid past (2^31 - 1, 65535, 65535)";
  if (threads == 0) return "an empty block";
  if (s.block.x > 1024 || s.block.y > 1024 || s.block.z > 64 || threads > 1024) return "a block of more than 1,024 threads";
  if (s.dynamic_shared > s.dynamic_shared_limit) return "more dynamic shared memory than the kernel's limit (48 KiB unless raised)";
  return nullptr;
}

void run_grid(const char* kernel, const LaunchShape& shape, const std::function<void()>& body) {
  if (const char* e = launch_shape_error(shape)) throw std::invalid_argument(std::string("cuda_emu: ") + kernel + ": " + e);
  if (running.thread != nullptr) throw std::logic_error("cuda_emu: a launch from inside a kernel");
  count(Counted::launch);
  SplitMix rng{launch_seed()};
  // The blocks in a shuffled order too: a GPU runs them in any order, at once or not.
  std::vector<Index3> blocks;
  blocks.reserve(std::size_t(shape.grid.x) * shape.grid.y * shape.grid.z);
  for (unsigned z = 0; z < shape.grid.z; ++z)
    for (unsigned y = 0; y < shape.grid.y; ++y)
      for (unsigned x = 0; x < shape.grid.x; ++x) blocks.push_back({x, y, z});
  std::shuffle(blocks.begin(), blocks.end(), rng);
  running = {&shape, nullptr, nullptr};
  try {
    for (const Index3& idx : blocks) {
      Block b;
      b.index = idx;
      running.block = &b;
      run_block(kernel, shape, b, body, rng);
      running.block = nullptr;
    }
  } catch (...) {
    running = {};
    throw;
  }
  running = {};
}

namespace detail {
thread_local Place place;
}

void sync_threads() {
  Block& b = *here().block;
  Thread& t = *running.thread;
  if (++b.at_barrier == b.live) {
    b.at_barrier = 0;
    for (Thread& o : b.threads)
      if (o.state == State::at_block_barrier) o.state = State::runnable;
    return;
  }
  t.state = State::at_block_barrier;
  yield();
}

WarpDeposits warp_gather(unsigned mask, const void* mine, std::size_t bytes, Collective kind) {
  Block& b = *here().block;
  Thread& t = *running.thread;
  Warp& w = b.warps[t.warp];
  if (bytes > 16) throw std::logic_error("cuda_emu: a warp collective of more than 16 bytes");
  if ((mask & w.present) != w.present)
    throw std::runtime_error("cuda_emu: a warp collective with a partial mask (not emulated)");
  if (w.exited != 0)
    throw std::runtime_error("a full-mask warp collective in warp " + std::to_string(t.warp) + " after some of its lanes exited");
  if (w.arrived == 0) w.kind = kind;
  else if (w.kind != kind)
    throw std::runtime_error("lanes of warp " + std::to_string(t.warp) + " at different collectives at once (a shuffle, a ballot or __syncwarp)");
  unsigned char* slots = w.slots[w.generation & 1];
  if (bytes > 0) std::memcpy(slots + 16 * t.lane, mine, bytes);
  if (++w.arrived == w.live) {
    w.arrived = 0;
    ++w.generation;
    for (int l = 0; l < 32; ++l) {
      const std::size_t i = std::size_t(t.warp) * 32 + l;
      if (i < b.threads.size() && b.threads[i].state == State::at_warp_collective) b.threads[i].state = State::runnable;
    }
  } else {
    t.state = State::at_warp_collective;
    yield();
  }
  return {slots, w.present};
}

void shuffle_from_missing_lane(int lane) {
  throw std::runtime_error("a shuffle read lane " + std::to_string(lane) + ", which its warp does not have (a block size not a multiple of 32)");
}

void* shared_static(const char* function, int line_key, std::size_t bytes, std::size_t align) {
  Block& b = *here().block;
  const auto key = std::make_pair(function, line_key);
  auto it = b.statics.find(key);
  if (it != b.statics.end()) {
    if (it->second.second != bytes) throw std::logic_error("cuda_emu: one __shared__ declaration of two sizes");
  } else {
    b.static_bytes += bytes;
    if (b.static_bytes > static_shared_limit)
      throw std::runtime_error("cuda_emu: more than 48 KiB of static shared memory in one block");
    if (b.static_bytes + running.shape->dynamic_shared > block_shared_limit)
      throw std::runtime_error("cuda_emu: more than 227 KiB of shared memory in one block");
    std::unique_ptr<unsigned char[]> mem(new unsigned char[bytes + align]);
    std::memset(mem.get(), 0xff, bytes + align);
    it = b.statics.emplace(key, std::make_pair(std::move(mem), bytes)).first;
  }
  unsigned char* p = it->second.first.get();
  return p + (align - reinterpret_cast<std::uintptr_t>(p) % align) % align;
}

void* shared_dynamic() {
  Block& b = *here().block;
  if (b.dynamic_aligned == nullptr) throw std::runtime_error("cuda_emu: extern __shared__ memory read in a launch that gave none");
  return b.dynamic_aligned;
}

}  // namespace cuda_emu
