#include "kernels/cuda/draw_sample.hpp"

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/draw_math.hpp"

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int threads = 512;  // a power of two (block_merge), a multiple of the warp

// grid: rows. A row's edits touch distinct tokens: its threads apply them in any order.
__global__ void edit_kernel(LogitEditParams p) {
  const std::int64_t r = blockIdx.x;
  float* row = p.logits + r * p.vocab;
  for (std::int64_t e = p.offsets[r] + threadIdx.x; e < p.offsets[r + 1]; e += blockDim.x) {
    const m::LogitEdit edit = p.edits[e];
    if (edit.token >= 0 && edit.token < p.vocab) row[edit.token] = m::apply_logit_edit(row[edit.token], edit);
  }
}

__device__ m::SoftmaxPartial merge_softmax(const m::SoftmaxPartial& a, const m::SoftmaxPartial& b) {
  return m::softmax_merge(a, b);
}

// Adds each lane's (digit, weight) to the histogram, one atomic per distinct digit of the warp
// (the first levels put most of a row in a few bins). digit < 0: nothing to add. Every lane of
// the warp calls it.
__device__ void add_by_digit(m::DrawHistogram& h, int digit, float w) {
  const int lane = threadIdx.x & 31;
  unsigned todo = __ballot_sync(0xffffffffu, digit >= 0);
  while (todo) {
    const int leader = __ffs(todo) - 1;
    const int d = __shfl_sync(0xffffffffu, digit, leader);
    const bool mine = digit == d;
    const unsigned group = __ballot_sync(0xffffffffu, mine);
    double v = mine ? double(w) : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == leader) {
      atomicAdd(&h.count[d], unsigned(__popc(group)));
      atomicAdd(&h.mass[d], v);
    }
    todo &= ~group;
  }
}

// draw_row's passes over one row by the whole block. Every thread calls each method and gets
// the same answer (the histogram and the scalars live in shared memory).
struct BlockPass {
  const float* row;
  std::int64_t vocab;
  float max, temperature;
  std::uint64_t* found;           // shared
  unsigned long long* count_sum;  // shared
  double* mass_sum;               // shared

  __device__ void histogram(std::uint64_t floor, std::uint64_t prefix, int bits, int shift, m::DrawHistogram& h) {
    __syncthreads();  // every thread has read the previous histogram
    for (int i = threadIdx.x; i < m::kBins; i += blockDim.x) h.count[i] = 0, h.mass[i] = 0;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    // The loop bound is the warp's, so its lanes stay together for add_by_digit.
    for (std::int64_t base = threadIdx.x - lane; base < vocab; base += blockDim.x) {
      const std::int64_t i = base + lane;
      int digit = -1;
      float w = 0;
      if (i < vocab) {
        const float x = m::clean_logit(row[i]);
        const std::uint64_t key = m::rank_key(x, static_cast<std::int32_t>(i));
        if (m::under_prefix(key, prefix, bits, floor)) {
          w = m::tempered_weight(x, max, temperature);
          if (w > 0) digit = int((key >> shift) & (m::kBins - 1));
        }
      }
      add_by_digit(h, digit, w);
    }
    __syncthreads();
  }

  __device__ std::uint64_t find(std::uint64_t floor, std::uint64_t prefix, int bits) {
    __syncthreads();
    if (threadIdx.x == 0) *found = 0;
    __syncthreads();
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = m::clean_logit(row[i]);
      const std::uint64_t key = m::rank_key(x, static_cast<std::int32_t>(i));
      if (m::under_prefix(key, prefix, bits, floor) && m::tempered_weight(x, max, temperature) > 0) *found = key;
    }
    __syncthreads();
    return *found;
  }

  __device__ m::CountMass at_least(std::uint64_t floor, float min_weight) {
    unsigned long long count = 0;
    double mass = 0;
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = m::clean_logit(row[i]);
      if (m::rank_key(x, static_cast<std::int32_t>(i)) < floor) continue;
      const float w = m::tempered_weight(x, max, temperature);
      if (w > 0 && w >= min_weight) ++count, mass += w;
    }
    for (int o = 16; o > 0; o >>= 1) {
      count += __shfl_xor_sync(0xffffffffu, count, o);
      mass += __shfl_xor_sync(0xffffffffu, mass, o);
    }
    __syncthreads();
    if (threadIdx.x == 0) *count_sum = 0, *mass_sum = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) atomicAdd(count_sum, count), atomicAdd(mass_sum, mass);
    __syncthreads();
    return {*count_sum, *mass_sum};
  }
};

// grid: draws. The row's log-softmax statistics, then draw_row's passes.
__global__ void draw_kernel(DrawSampleParams p) {
  __shared__ m::DrawHistogram hist;
  __shared__ m::SoftmaxPartial stats_shared[threads];
  __shared__ std::uint64_t found;
  __shared__ unsigned long long count_sum;
  __shared__ double mass_sum;
  const std::int64_t j = blockIdx.x;
  const DrawJob job = p.jobs[j];
  const float* row = p.logits + std::int64_t(job.row) * p.vocab;
  m::SoftmaxPartial s = m::softmax_empty();
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += threads)
    m::softmax_add(s, m::clean_logit(row[i]), static_cast<std::int32_t>(i));
  const m::SoftmaxPartial stats = block_merge<threads>(s, stats_shared, merge_softmax);
  std::int32_t token = -1;
  if (stats.argmax >= 0) {  // the same in every thread
    BlockPass pass{row, p.vocab, stats.max, job.temperature, &found, &count_sum, &mass_sum};
    token = m::draw_row(m::DrawParams{job.top_k, job.top_p, job.min_p, job.u}, pass, hist);
  }
  if (threadIdx.x == 0) {
    p.token[j] = token;
    p.logprob[j] = token < 0 ? -INFINITY : float(m::log_prob(stats, m::clean_logit(row[token])));
  }
}

__global__ void weight_kernel(const float* x, float max, float temperature, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = m::tempered_weight(x[i], max, temperature);
}

}  // namespace

void tempered_weights(const float* x, float max, float temperature, float* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  require(x && out, "tempered_weights: null pointer");
  weight_kernel<<<256, 256, 0, stream>>>(x, max, temperature, out, n);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void apply_logit_edits(const LogitEditParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  require(p.logits && p.edits && p.offsets, "apply_logit_edits: null pointer");
  require(p.vocab >= 1 && p.vocab < (std::int64_t(1) << 31), "apply_logit_edits: vocab outside [1, 2^31)");
  edit_kernel<<<static_cast<unsigned>(p.rows), 128, 0, stream>>>(p);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

void draw_sample(const DrawSampleParams& p, cudaStream_t stream) {
  if (p.draws == 0) return;
  require(p.logits && p.jobs && p.token && p.logprob, "draw_sample: null pointer");
  require(p.vocab >= 1 && p.vocab < (std::int64_t(1) << 31), "draw_sample: vocab outside [1, 2^31)");
  draw_kernel<<<static_cast<unsigned>(p.draws), threads, 0, stream>>>(p);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
