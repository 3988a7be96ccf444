// reshape_and_cache on a GPU against the cpu backend's write_kv: the same K/V rows at the same
// positions through the same block table leave the same bytes in f32 and f16 planes (both
// round to nearest even); padding rows write nothing; a slot past the cache writes nothing and
// is counted. Needs a GPU: without one the binary exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_kv_write
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/model/paged_attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/kv_write.hpp"
#include "tests/support/device_acts.hpp"
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace actorlm;
namespace cpu = actorlm::kernels::cpu;
namespace gpu = actorlm::kernels::cuda;

namespace {

struct Device {
  void* ptr = nullptr;
  Device(const void* host, std::size_t bytes) {
    ACTORLM_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    ACTORLM_CUDA_CHECK(cudaMemcpy(ptr, host, bytes, cudaMemcpyHostToDevice));
  }
  ~Device() { cudaFree(ptr); }
  void read(void* host, std::size_t bytes) const {
    ACTORLM_CUDA_CHECK(cudaMemcpy(host, ptr, bytes, cudaMemcpyDeviceToHost));
  }
};

// `x` as a buffer of dtype `d` holds it: rounded to nearest even, widened again.
std::vector<float> qkv_rounded(const std::vector<float>& x, gpu::ActDtype d) {
  return testing::DeviceActs(x, d).read();
}

}  // namespace

BOOST_AUTO_TEST_CASE(reshape_and_cache_leaves_the_bytes_write_kv_leaves) {
  for (const auto dtype : {cpu::KvDtype::f32, cpu::KvDtype::f16}) {
    const std::int32_t kv_heads = 3, hd = 64;
    const std::uint32_t bs = 16, blocks = 12, first = 5, n = 40;
    const std::vector<std::uint32_t> table{9, 2, 11, 4};
    const std::int64_t stride = kv_heads * hd + 32;
    const auto k = testing::normal_floats(n * stride, 1), v = testing::normal_floats(n * stride, 2);
    const std::size_t plane_bytes = std::size_t(blocks) * kv_heads * bs * hd * cpu::kv_element_bytes(dtype);
    std::vector<std::byte> kw(plane_bytes, std::byte{0x5a}), vw(kw);  // filled: unwritten slots show
    const cpu::KvPlaneView kp{kw.data(), blocks, kv_heads, bs, hd, dtype}, vp{vw.data(), blocks, kv_heads, bs, hd, dtype};
    std::vector<std::byte> kg(kw), vg(vw);
    cpu::write_kv(kp, vp, table, first, n, k.data(), v.data(), stride);

    // The device gets one padding row and one slot past the cache beside the real rows.
    std::vector<float> kd(k), vd(v);
    kd.resize(kd.size() + 2 * stride, 7.0f);
    vd.resize(vd.size() + 2 * stride, 7.0f);
    std::vector<std::int64_t> slots;
    for (std::uint32_t t = 0; t < n; ++t) slots.push_back(std::int64_t(kernels::cuda_math::paged_slot(table.data(), bs, first + t)));
    slots.push_back(-1);
    slots.push_back(std::int64_t(blocks) * bs);
    const std::uint32_t zero = 0;
    Device dk(kd.data(), kd.size() * 4), dv(vd.data(), vd.size() * 4), ds(slots.data(), slots.size() * 8),
        dkp(kg.data(), kg.size()), dvp(vg.data(), vg.size()), rejected(&zero, 4);
    gpu::KvWriteParams p;
    p.k = dk.ptr;
    p.v = dv.ptr;
    p.slots = static_cast<const std::int64_t*>(ds.ptr);
    p.k_plane = dkp.ptr;
    p.v_plane = dvp.ptr;
    p.tokens = static_cast<std::int64_t>(slots.size());
    p.row_stride = stride;
    p.kv_heads = kv_heads;
    p.head_dim = hd;
    p.block_size = bs;
    p.num_blocks = blocks;
    p.act_dtype = gpu::ActDtype::f32;
    p.cache_dtype = dtype == cpu::KvDtype::f16 ? gpu::ActDtype::f16 : gpu::ActDtype::f32;
    p.rejected = static_cast<std::uint32_t*>(rejected.ptr);
    gpu::reshape_and_cache(p, nullptr);
    ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
    dkp.read(kg.data(), kg.size());
    dvp.read(vg.data(), vg.size());
    std::uint32_t count = 0;
    rejected.read(&count, 4);
    BOOST_TEST((kg == kw), "K plane, " << cpu::to_string(dtype));
    BOOST_TEST((vg == vw), "V plane, " << cpu::to_string(dtype));
    BOOST_TEST(count == 1u);
  }
}

// rope_and_cache (the forward's one launch) against the three operations it replaces: apply_rope
// over the query and K heads of a QKV row, a copy of the query heads, reshape_and_cache. Every
// act and cache dtype the backend pairs, both rotary pairings, grouped-query heads, position
// scaling, a padding row and a slot past the cache: the same query rows and the same plane bytes.
BOOST_AUTO_TEST_CASE(rope_and_cache_gives_the_bytes_of_rope_then_a_query_copy_then_reshape_and_cache) {
  using gpu::ActDtype;
  const std::int32_t q_heads = 6, kv_heads = 2, hd = 64;
  const std::uint32_t bs = 16, blocks = 8, n = 21;
  const std::int64_t stride = (q_heads + 2 * kv_heads) * hd;
  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> positions;
  for (std::uint32_t t = 0; t < n; ++t) {
    slots.push_back(std::int64_t(bs + 3 * t));  // scattered over blocks 1 .. 4
    positions.push_back(std::int32_t(100 + 37 * t));
  }
  slots.push_back(-1);
  positions.push_back(0);
  slots.push_back(std::int64_t(blocks) * bs);
  positions.push_back(5);
  const auto tokens = static_cast<std::int64_t>(slots.size());
  std::vector<float> inv(hd / 2);
  gpu::rope_inv_freq_table(10000.0f, hd, inv.data());
  const auto qkv = testing::normal_floats(std::size_t(tokens) * stride, 11);
  const std::uint32_t zero = 0;
  Device ds(slots.data(), slots.size() * 8), dpos(positions.data(), positions.size() * 4), dinv(inv.data(), inv.size() * 4);
  for (const auto& [act, cache] : {std::pair{ActDtype::f32, ActDtype::f32}, std::pair{ActDtype::bf16, ActDtype::f16},
                                  std::pair{ActDtype::f16, ActDtype::f16}, std::pair{ActDtype::bf16, ActDtype::f32}}) {
    for (const bool halves : {true, false}) {
      const std::size_t es = gpu::act_bytes(act), plane = std::size_t(blocks) * kv_heads * bs * hd * gpu::act_bytes(cache);
      const std::vector<std::byte> filled(plane, std::byte{0x5a});
      testing::DeviceActs fused_in(qkv, act), apart_in(qkv, act);
      testing::DeviceActs fused_q(std::vector<float>(std::size_t(tokens) * q_heads * hd), act);
      testing::DeviceActs apart_q(std::vector<float>(std::size_t(tokens) * q_heads * hd), act);
      Device fk(filled.data(), plane), fv(filled.data(), plane), ak(filled.data(), plane), av(filled.data(), plane);
      Device fused_rejected(&zero, 4), apart_rejected(&zero, 4);
      const auto kv = [&](void* in, Device& k, Device& v, Device& rejected) {
        gpu::KvWriteParams p;
        p.k = static_cast<std::byte*>(in) + std::size_t(q_heads) * hd * es;
        p.v = static_cast<std::byte*>(in) + std::size_t(q_heads + kv_heads) * hd * es;
        p.slots = static_cast<const std::int64_t*>(ds.ptr);
        p.k_plane = k.ptr;
        p.v_plane = v.ptr;
        p.tokens = tokens;
        p.row_stride = stride;
        p.kv_heads = kv_heads;
        p.head_dim = hd;
        p.block_size = bs;
        p.num_blocks = blocks;
        p.act_dtype = act;
        p.cache_dtype = cache;
        p.rejected = static_cast<std::uint32_t*>(rejected.ptr);
        return p;
      };
      const auto* pos = static_cast<const std::int32_t*>(dpos.ptr);
      const auto* freq = static_cast<const float*>(dinv.ptr);
      gpu::RopeCacheParams rc;
      rc.kv = kv(fused_in.ptr, fk, fv, fused_rejected);
      rc.q_in = fused_in.ptr;
      rc.q_out = fused_q.ptr;
      rc.positions = pos;
      rc.inv_freq = freq;
      rc.q_heads = q_heads;
      rc.linear_factor = 2.0f;
      rc.halves = halves;
      gpu::rope_and_cache(rc, nullptr);
      gpu::apply_rope({apart_in.ptr, pos, freq, tokens, stride, q_heads + kv_heads, hd, 2.0f, halves, act}, nullptr);
      ACTORLM_CUDA_CHECK(cudaMemcpy2D(apart_q.ptr, q_heads * hd * es, apart_in.ptr, stride * es, q_heads * hd * es,
                                      std::size_t(tokens), cudaMemcpyDeviceToDevice));
      gpu::reshape_and_cache(kv(apart_in.ptr, ak, av, apart_rejected), nullptr);
      ACTORLM_CUDA_CHECK(cudaDeviceSynchronize());
      const auto bytes = [&](const Device& d) {
        std::vector<std::byte> out(plane);
        d.read(out.data(), plane);
        return out;
      };
      const auto what = std::to_string(int(act)) + "/" + std::to_string(int(cache)) + (halves ? " halves" : " pairs");
      BOOST_TEST((fused_q.read() == apart_q.read()), what);
      BOOST_TEST((bytes(fk) == bytes(ak)), what);
      BOOST_TEST((bytes(fv) == bytes(av)), what);
      BOOST_TEST((bytes(fk) != filled), what);  // something was written
      BOOST_TEST((fused_in.read() == qkv_rounded(qkv, act)), what);  // the QKV rows are left as they were
      std::uint32_t fused_count = 0, apart_count = 0;
      fused_rejected.read(&fused_count, 4);
      apart_rejected.read(&apart_count, 4);
      BOOST_TEST(fused_count == 1u);
      BOOST_TEST(apart_count == 1u);
    }
  }
}
