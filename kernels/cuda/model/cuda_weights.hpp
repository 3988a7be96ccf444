#pragma once
// One rank's weights on its GPU: the cpu loader's share (kernels/cpu/model/weights.hpp: the same
// tensor-parallel and layer-split rules, the same checks of the checkpoint) uploaded matrix by
// matrix, each dequantized on the host to f32 (GGUF quantized types through the cpu backend's
// dequantizers, the reference) and kept on the device in `dtype`: bf16 or f16 for serving, f32
// for checks against the cpu backend. Norm weights and biases stay f32, as the kernels read them.

#include "kernels/cpu/model/weights.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/model/device_buffer.hpp"

#include <cuda_runtime_api.h>

#include <vector>

namespace actorlm::kernels::cuda {

struct DeviceMatrix {
  DeviceBuffer data;  // [rows, cols] of CudaWeights::dtype, row-major (PyTorch's [out, in])
  std::int64_t rows = 0, cols = 0;
  bool empty() const { return rows == 0; }
};

struct DeviceLayer {
  DeviceBuffer attn_norm, attn_norm_bias, mlp_norm, mlp_norm_bias;  // [hidden] f32; as LayerWeights
  DeviceMatrix wqkv, wo, w_up, w_down;                              // as LayerWeights
};

struct CudaWeights {
  // The host weights' description (no matrices): architecture, layout, ranks, stage.
  model::Architecture spec;
  model::WeightLayout layout;
  model::RankShard heads;
  std::int32_t rank = 0, world = 1;
  std::uint32_t stage = 0, stages = 1;
  ActDtype dtype = ActDtype::bf16;
  DeviceMatrix embed;    // [vocab, hidden] (vocab_parallel: the rank's rows); empty on a stage
                         // after the first (untied)
  DeviceMatrix lm_head;  // [vocab, hidden]; empty when tied or not a rank that computes logits
  // Split by vocabulary rows (cpu::ModelWeights::vocab_parallel): embed and lm_head hold the rows
  // [vocab_first, vocab_first + rows) on every tensor rank.
  bool vocab_parallel = false;
  std::int64_t vocab_first = 0;
  DeviceBuffer out_norm, out_norm_bias;
  std::vector<DeviceLayer> layers;
  std::size_t bytes = 0;  // device memory the weights take

  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage + 1 == stages; }
  bool samples() const { return rank == 0 && last_stage(); }
  bool computes_logits() const { return last_stage() && (rank == 0 || vocab_parallel); }
  const DeviceMatrix& output_matrix() const { return lm_head.empty() ? embed : lm_head; }
};

// Uploads `w` to the current device on `stream` (synchronised before returning). Throws
// std::runtime_error when the device runs out of memory (naming the tensor).
CudaWeights upload_weights(const cpu::ModelWeights& w, ActDtype dtype, cudaStream_t stream);

}  // namespace actorlm::kernels::cuda
