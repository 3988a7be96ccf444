#pragma once
// A paged KV cache for the GPU attention tests: sequences of given lengths over shuffled block
// tables, K and V of random values written by the cpu backend's write_kv, and the same planes on
// the device in the cache dtype (f32 and f16: the cpu bytes; bf16: a bf16 copy of an f32 cache
// whose values were rounded to bf16 first, so the cpu reference reads exactly what the GPU does).
#include "kernels/cpu/model/paged_attention.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/nan_max.hpp"
#include "tests/support/normal_floats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace actorlm::testing {

struct PagedKvFixture {
  std::uint32_t block_size;  // positions per block (16 unless a test asks for another)
  std::int32_t kv_heads, head_dim;
  std::vector<std::uint32_t> contexts;  // [seqs]
  std::uint32_t per_seq = 0;            // block table width
  std::vector<std::uint32_t> tables;    // [seqs, per_seq]
  std::vector<std::byte> kmem, vmem;    // the cpu planes
  kernels::cpu::KvPlaneView kp, vp;
  std::optional<DeviceArray<std::byte>> dk, dv;  // f32 / f16 caches
  std::optional<DeviceActs> dk16, dv16;          // bf16 caches

  PagedKvFixture(std::int32_t kv_heads_, std::int32_t head_dim_, std::vector<std::uint32_t> contexts_,
                 kernels::cuda::ActDtype cache, std::uint32_t block_size_ = 16)
      : block_size(block_size_), kv_heads(kv_heads_), head_dim(head_dim_), contexts(std::move(contexts_)) {
    namespace cpu = kernels::cpu;
    const auto kv = cache == kernels::cuda::ActDtype::f16 ? cpu::KvDtype::f16 : cpu::KvDtype::f32;
    const std::uint32_t max_ctx = *std::max_element(contexts.begin(), contexts.end());
    per_seq = (max_ctx + block_size - 1) / block_size;
    const std::uint32_t blocks = per_seq * std::uint32_t(contexts.size()) + 3;
    std::vector<std::uint32_t> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0u);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    tables.assign(ids.begin(), ids.begin() + std::size_t(contexts.size()) * per_seq);
    const std::int32_t kvw = kv_heads * head_dim;
    const std::size_t plane = std::size_t(blocks) * kvw * block_size * cpu::kv_element_bytes(kv);
    kmem.resize(plane), vmem.resize(plane);
    kp = {kmem.data(), blocks, kv_heads, block_size, head_dim, kv};
    vp = {vmem.data(), blocks, kv_heads, block_size, head_dim, kv};
    for (std::size_t s = 0; s < contexts.size(); ++s) {
      auto k = normal_floats(std::size_t(contexts[s]) * kvw, 10 + unsigned(s));
      auto v = normal_floats(k.size(), 20 + unsigned(s));
      if (cache == kernels::cuda::ActDtype::bf16) k = rounded(k, cache), v = rounded(v, cache);
      cpu::write_kv(kp, vp, table(s), 0, contexts[s], k.data(), v.data(), kvw);
    }
    if (cache == kernels::cuda::ActDtype::bf16) {
      dk16.emplace(as_floats(kmem), cache), dv16.emplace(as_floats(vmem), cache);
    } else {
      dk.emplace(kmem), dv.emplace(vmem);
    }
  }
  std::span<const std::uint32_t> table(std::size_t s) const { return {tables.data() + s * per_seq, per_seq}; }
  const void* k_device() const { return dk16 ? dk16->ptr : static_cast<const void*>(dk->ptr); }
  const void* v_device() const { return dv16 ? dv16->ptr : static_cast<const void*>(dv->ptr); }

 private:
  static std::vector<float> as_floats(const std::vector<std::byte>& b) {
    std::vector<float> f(b.size() / sizeof(float));
    std::memcpy(f.data(), b.data(), b.size());
    return f;
  }
};

// The attention tests' error: the largest |got - want| / (1 + |want|) (NaN wins), and its bound
// for an output dtype: f32, both sides sum in f32 in other orders; f16 / bf16, the output's
// rounding (2^-11, 2^-8) on top.
inline double attention_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = nan_max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(double(want[i]))));
  return worst;
}
inline double attention_tolerance(kernels::cuda::ActDtype out) {
  return out == kernels::cuda::ActDtype::f32 ? 2e-5 : out == kernels::cuda::ActDtype::f16 ? 1e-3 : 8e-3;
}

}  // namespace actorlm::testing
