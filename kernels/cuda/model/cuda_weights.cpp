#include "kernels/cuda/model/cuda_weights.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <algorithm>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

// Dequantizes on the host, copies f32 to the device and converts there: one staging buffer of
// each kind, as large as the largest matrix.
class Uploader {
 public:
  Uploader(ActDtype dtype, cudaStream_t stream) : dtype_(dtype), stream_(stream) {}

  DeviceMatrix matrix(const cpu::WeightMatrix& m, const std::string& what) {
    DeviceMatrix out;
    if (m.empty()) return out;
    out.rows = m.rows;
    out.cols = m.cols;
    const auto n = static_cast<std::size_t>(m.size());
    ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous matrix has left host_
    host_.reserve(n * sizeof(float), "weight staging");
    auto* h = host_.as<float>();
    for (std::int64_t r = 0; r < m.rows; ++r)
      m.dequantize_row(r, std::span<float>(h + static_cast<std::size_t>(r * m.cols), static_cast<std::size_t>(m.cols)));
    out.data = DeviceBuffer(n * act_bytes(dtype_), what);
    bytes_ += out.data.bytes();
    if (dtype_ == ActDtype::f32) {
      ACTORLM_CUDA_CHECK(cudaMemcpyAsync(out.data.get(), h, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    } else {
      staging_.reserve(n * sizeof(float), "weight staging");
      ACTORLM_CUDA_CHECK(cudaMemcpyAsync(staging_.get(), h, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
      convert(staging_.get(), ActDtype::f32, out.data.get(), dtype_, static_cast<std::int64_t>(n), stream_);
    }
    return out;
  }

  DeviceBuffer vector(const std::vector<float>& v, const std::string& what) {
    if (v.empty()) return {};
    DeviceBuffer out(v.size() * sizeof(float), what);
    bytes_ += out.bytes();
    // On the upload's stream (the forward's): a plain cudaMemcpy on the legacy stream would not be
    // ordered with it. `v` outlives the upload (finish() synchronises).
    ACTORLM_CUDA_CHECK(cudaMemcpyAsync(out.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    return out;
  }

  std::size_t bytes() const { return bytes_; }
  void finish() { ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  ActDtype dtype_;
  cudaStream_t stream_;
  PinnedBuffer host_;
  DeviceBuffer staging_;
  std::size_t bytes_ = 0;
};

}  // namespace

CudaWeights upload_weights(const cpu::ModelWeights& w, ActDtype dtype, cudaStream_t stream) {
  CudaWeights out;
  out.spec = w.spec;
  out.layout = w.layout;
  out.heads = w.heads;
  out.rank = w.rank;
  out.world = w.world;
  out.stage = w.stage;
  out.stages = w.stages;
  out.dtype = dtype;
  Uploader up(dtype, stream);
  out.embed = up.matrix(w.embed, "the embedding");
  out.lm_head = up.matrix(w.lm_head, "the output projection");
  out.out_norm = up.vector(w.out_norm, "the output norm");
  out.out_norm_bias = up.vector(w.out_norm_bias, "the output norm");
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const cpu::LayerWeights& l = w.layers[i];
    const std::string name = "layer " + std::to_string(w.first_layer + i) + " ";
    DeviceLayer& d = out.layers.emplace_back();
    d.attn_norm = up.vector(l.attn_norm, name + "attention norm");
    d.attn_norm_bias = up.vector(l.attn_norm_bias, name + "attention norm");
    d.mlp_norm = up.vector(l.mlp_norm, name + "MLP norm");
    d.mlp_norm_bias = up.vector(l.mlp_norm_bias, name + "MLP norm");
    d.wqkv = up.matrix(l.wqkv, name + "QKV projection");
    d.wo = up.matrix(l.wo, name + "attention output");
    d.w_up = up.matrix(l.w_up, name + "MLP up projection");
    d.w_down = up.matrix(l.w_down, name + "MLP down projection");
  }
  up.finish();
  out.bytes = up.bytes();
  return out;
}

}  // namespace actorlm::kernels::cuda
