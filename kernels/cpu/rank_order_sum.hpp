#pragma once
// The summation order of the cpu backend's all-reduce, shared by its two data planes (ranks in
// one process, in its memory; ranks in several processes, over Gloo): the n elements are cut
// into one slice per rank, rank k sums slice k, and every element is summed in rank order,
// x_0 + x_1 + ... + x_{size-1}. A group's result then has the same bits wherever its ranks live
// (a cluster's answers equal one process's exactly), and every rank ends with the same bits.

#include <cstddef>
#include <span>

namespace actorlm::kernels::cpu {

// Where rank k's slice of n elements begins (slice k is [slice_begin(n, size, k),
// slice_begin(n, size, k + 1))); the slices cover [0, n) in order, their lengths within one.
inline std::size_t slice_begin(std::size_t n, int size, int k) {
  return n * std::size_t(k) / std::size_t(size);
}

// For i < len: outs[j][i] = parts[0][i] + parts[1][i] + ... for every j, summed left to right.
// parts: [ranks] pointers to len floats each; an output may be one of the parts.
void sum_in_rank_order(std::span<const float* const> parts, std::size_t len, std::span<float* const> outs);

}  // namespace actorlm::kernels::cpu
