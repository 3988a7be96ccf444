#pragma once
// sample_bench's host half (C++20: the cpu sampler's interface takes std::span, which nvcc's
// C++17 lacks): the median time of the cpu sampler drawing `rows` rows of `vocab` logits at
// temperature 0.8 with top-k 50 and top-p 0.9, on one thread, as the cuda sampler draws its
// host rows.
#include <cstdint>

namespace actorlm::tools::gpu {

double cpu_sample_ms(const float* logits, std::int64_t rows, std::int64_t vocab, int reps);

}  // namespace actorlm::tools::gpu
