#include "kernels/cpu/rank_order_sum.hpp"

#include <algorithm>
#include <cstring>

namespace actorlm::kernels::cpu {

void sum_in_rank_order(std::span<const float* const> parts, std::size_t len, std::span<float* const> outs) {
  // In chunks through a local buffer: an output may be one of the parts, and the loops over a
  // chunk vectorize (each element's sum stays left to right).
  constexpr std::size_t kChunk = 1024;
  float acc[kChunk];
  for (std::size_t c = 0; c < len; c += kChunk) {
    const std::size_t m = std::min(kChunk, len - c);
    std::memcpy(acc, parts[0] + c, m * sizeof(float));
    for (std::size_t p = 1; p < parts.size(); ++p) {
      const float* src = parts[p] + c;
      for (std::size_t i = 0; i < m; ++i) acc[i] += src[i];
    }
    for (float* out : outs) std::memcpy(out + c, acc, m * sizeof(float));
  }
}

}  // namespace actorlm::kernels::cpu
