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
#include "tests/support/gpu_test_main.hpp"
#include "tests/support/normal_floats.hpp"

#include <cstring>
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
