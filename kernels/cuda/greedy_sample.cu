#include "kernels/cuda/greedy_sample.hpp"

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/sampling_math.hpp"

namespace actorlm::kernels::cuda {

namespace {

namespace m = cuda_math;

constexpr int threads = 256;  // a power of two (the tree reductions)

__device__ m::SoftmaxPartial merge_softmax(const m::SoftmaxPartial& a, const m::SoftmaxPartial& b) {
  return m::softmax_merge(a, b);
}
__device__ m::Best merge_best(const m::Best& a, const m::Best& b) { return m::best_merge(a, b); }

// grid: rows. The row's statistics in one pass, then one pass per top entry.
__global__ void greedy_kernel(GreedySampleParams p) {
  __shared__ m::SoftmaxPartial stats_shared[threads];
  __shared__ m::Best best_shared[threads];
  const std::int64_t r = blockIdx.x;
  const float* row = p.logits + r * p.vocab;
  m::SoftmaxPartial s = m::softmax_empty();
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += threads)
    m::softmax_add(s, m::clean_logit(row[i]), static_cast<std::int32_t>(i));
  const m::SoftmaxPartial stats = block_merge<threads>(s, stats_shared, merge_softmax);
  if (threadIdx.x == 0) {
    p.token[r] = stats.argmax;
    p.logprob[r] = stats.argmax < 0 ? -INFINITY : float(m::log_prob(stats, stats.max));
  }
  const int n = stats.argmax < 0 ? 0 : (p.top_n[r] < p.max_top ? p.top_n[r] : p.max_top);
  float after_value = INFINITY;
  std::int32_t after_id = -1;
  for (int k = 0; k < n; ++k) {
    m::Best b = m::best_none();
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += threads)
      m::best_add(b, m::clean_logit(row[i]), static_cast<std::int32_t>(i), after_value, after_id);
    const m::Best best = block_merge<threads>(b, best_shared, merge_best);  // the same in every thread
    if (best.id < 0) {  // past the vocabulary's end: every remaining entry says so (token -1)
      if (threadIdx.x == 0)
        for (int j = k; j < n; ++j) p.top[r * p.max_top + j] = TokenLogprobPair{-1, -INFINITY};
      break;
    }
    if (threadIdx.x == 0) p.top[r * p.max_top + k] = {best.id, float(m::log_prob(stats, best.value))};
    after_value = best.value;
    after_id = best.id;
  }
}

}  // namespace

void greedy_sample(const GreedySampleParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  require(p.logits && p.top_n && p.token && p.logprob && (p.top || p.max_top == 0), "greedy_sample: null pointer");
  require(p.vocab >= 1 && p.vocab < (std::int64_t(1) << 31), "greedy_sample: vocab outside [1, 2^31)");
  require(p.max_top >= 0 && p.max_top <= 64, "greedy_sample: max_top above 64");
  greedy_kernel<<<static_cast<unsigned>(p.rows), threads, 0, stream>>>(p);
  ACTORLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace actorlm::kernels::cuda
