#pragma once
// The execution model of a CUDA grid on the host, for tools/cuda_emu: every thread of a block is
// a fiber (Boost.Context) and the block's fibers take turns on one OS thread; __syncthreads and
// the warp collectives (shuffles, ballots) are barriers at which a fiber waits for the others.
// The blocks of a grid run one after another. Between barriers the fibers run in a random order
// (seeded per launch, CUDA_EMU_SEED changes the seed), so a kernel that reads what another
// thread wrote without a barrier between them gets a wrong answer here as it may on a GPU.
//
// What it catches: divergent barriers (some threads at __syncthreads, the others at a warp
// collective: a deadlock, reported with how many threads wait where), lanes of a warp at
// collectives of different kinds, a full-mask collective in a warp whose lanes have partly
// exited, a shuffle from a lane the warp lacks, shared memory over the device's limits, launch
// shapes a GPU refuses. What it cannot show: timing, memory-model races between blocks, the device's
// rounding of fast-math intrinsics.
//
// No CUDA header here: tools/cuda_emu/device.hpp adds the CUDA names over it.

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cuda_emu {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

struct LaunchShape {
  Index3 grid, block;
  std::size_t dynamic_shared = 0;
  std::size_t dynamic_shared_limit = 48 * 1024;  // raised by cudaFuncSetAttribute
};

// What a GPU refuses before running anything: an empty or too large grid or block, too much
// dynamic shared memory. Empty when the shape is valid.
const char* launch_shape_error(const LaunchShape& shape);

// Runs `body` once per thread of every block of the grid; throws std::runtime_error naming
// `kernel` when a thread throws, the block deadlocks or shared memory runs over.
void run_grid(const char* kernel, const LaunchShape& shape, const std::function<void()>& body);

namespace detail {
// The running thread's place, set by the scheduler at every switch (null outside a kernel).
struct Place {
  const Index3* thread = nullptr;
  const Index3* block = nullptr;
  const Index3* block_dim = nullptr;
  const Index3* grid_dim = nullptr;
  int lane = 0;
};
extern thread_local Place place;
}  // namespace detail

// The running thread's place (only inside run_grid's body).
inline const Index3& thread_index() { return *detail::place.thread; }
inline const Index3& block_index() { return *detail::place.block; }
inline const Index3& block_dim() { return *detail::place.block_dim; }
inline const Index3& grid_dim() { return *detail::place.grid_dim; }
// The running thread's lane in its warp (threads numbered x first, then y, then z).
inline int lane_id() { return detail::place.lane; }

// __syncthreads(): waits until every thread of the block still running has arrived.
void sync_threads();

// One warp collective: each lane of the calling thread's warp puts `bytes` (≤ 16) of its own;
// once all have, each gets the warp's deposits (slot l: lane l's, 16 bytes apart) and the mask
// of lanes that exist. `mask` must name every lane of the warp (partial masks are not emulated);
// lanes at collectives of different kinds at once are an error (a shuffle against a ballot).
// `sync` (__syncwarp) deposits nothing (`bytes` 0).
enum class Collective { shuffle, ballot, sync };
struct WarpDeposits {
  const unsigned char* slots;
  unsigned present;
};
WarpDeposits warp_gather(unsigned mask, const void* mine, std::size_t bytes, Collective kind);
// Throws: a shuffle read a lane its warp does not have (a block size not a multiple of 32).
[[noreturn]] void shuffle_from_missing_lane(int lane);

// The block's shared memory: `function` (its __PRETTY_FUNCTION__) and `key` name a __shared__
// declaration (the same names, the same memory for every thread of the block); filled with 0xff
// bytes (a NaN for floats) when the block starts, as a GPU's shared memory holds whatever was there.
void* shared_static(const char* function, int key, std::size_t bytes, std::size_t align);
void* shared_dynamic();

}  // namespace cuda_emu
