#include "kernels/cuda/model/cuda_weights.hpp"

#include "kernels/cuda/cuda_check.hpp"

#include <algorithm>
#include <string>

namespace actorlm::kernels::cuda {

namespace {

// Dequantizes on the host, copies f32 to the device and converts there, in chunks of rows
// (about 32 MiB of f32 each) through two pinned host buffers taking turns: dequantizing one chunk
// overlaps the copy of the one before, and neither the host nor the device holds an f32 copy of
// a whole matrix (a Llama-3-8B embedding's would be 2.1 GB, pinned, beside the weights).
class Uploader {
 public:
  static constexpr std::size_t chunk_floats = std::size_t{8} << 20;

  Uploader(ActDtype dtype, cudaStream_t stream) : dtype_(dtype), stream_(stream) {
    for (auto& e : copied_) {
      const cudaError_t made = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      if (made != cudaSuccess) {
        release();
        ACTORLM_CUDA_CHECK(made);
      }
    }
  }
  // After an error too: the copies in flight finish before their pinned buffers go.
  ~Uploader() { release(); }
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  DeviceMatrix matrix(const cpu::WeightMatrix& m, const std::string& what) {
    DeviceMatrix out;
    if (m.empty() || m.cols == 0) return out;
    out.rows = m.rows;
    out.cols = m.cols;
    const auto n = static_cast<std::size_t>(m.size());
    out.data = DeviceBuffer(n * act_bytes(dtype_), what);
    bytes_ += out.data.bytes();
    const auto cols = static_cast<std::size_t>(m.cols);
    const std::int64_t rows_per_chunk = static_cast<std::int64_t>(std::max<std::size_t>(1, chunk_floats / cols));
    for (std::int64_t r0 = 0; r0 < m.rows; r0 += rows_per_chunk) {
      const std::int64_t rows = std::min(rows_per_chunk, m.rows - r0);
      const std::size_t count = static_cast<std::size_t>(rows) * cols;
      const std::size_t b = turn_++ & 1;
      if (used_[b]) ACTORLM_CUDA_CHECK(cudaEventSynchronize(copied_[b]));  // its last copy has left it
      host_[b].reserve(count * sizeof(float), "weight staging");
      auto* h = host_[b].as<float>();
      for (std::int64_t r = 0; r < rows; ++r)
        m.dequantize_row(r0 + r, std::span<float>(h + static_cast<std::size_t>(r) * cols, cols));
      void* dst = static_cast<char*>(out.data.get()) + static_cast<std::size_t>(r0) * cols * act_bytes(dtype_);
      if (dtype_ == ActDtype::f32) {
        ACTORLM_CUDA_CHECK(cudaMemcpyAsync(dst, h, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
      } else {  // the device buffer's reuse two chunks on is ordered by the stream
        staging_[b].reserve(count * sizeof(float), "weight staging");
        ACTORLM_CUDA_CHECK(
            cudaMemcpyAsync(staging_[b].get(), h, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
        convert(staging_[b].get(), ActDtype::f32, dst, dtype_, static_cast<std::int64_t>(count), stream_);
      }
      ACTORLM_CUDA_CHECK(cudaEventRecord(copied_[b], stream_));
      used_[b] = true;
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
  void release() noexcept {  // nothing to report on the way out
    cudaStreamSynchronize(stream_);
    for (auto& e : copied_)
      if (e != nullptr) cudaEventDestroy(e);
  }

  ActDtype dtype_;
  cudaStream_t stream_;
  PinnedBuffer host_[2];
  DeviceBuffer staging_[2];
  cudaEvent_t copied_[2] = {};
  bool used_[2] = {false, false};
  std::size_t turn_ = 0;
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
  out.vocab_parallel = w.vocab_parallel;
  out.vocab_first = w.vocab_first;
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
