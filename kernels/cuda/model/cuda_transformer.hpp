#pragma once
// The model forward of one tensor-parallel rank on its GPU: the cpu backend's Transformer
// (kernels/cpu/model/transformer.hpp, the reference) with CUDA kernels and cuBLAS on one
// stream. A batch of sequences, each a run of tokens at consecutive positions (a prefill chunk
// or a decode token), flattened into one [tokens, hidden] activation in the weights' dtype.
// Per layer: norm (the previous branch's residual add fused in), QKV GEMM, rope_and_cache
// (rotary, the query heads made contiguous, this step's K and V into their paged slots), attention (paged decode attention for the sequences with one new row, placed first,
// and prefill attention over the paged cache for the others, which also serves chunked prefill
// and prefix-cache hits), output GEMM, MLP; with world > 1 the partial outputs are summed by
// `all_reduce` (NCCL). Only the rows whose logits are wanted go through the final norm and the
// output projection, in the step's order: f32 logits left on the device for the cuda sampler, or
// copied back to the host. With the vocabulary split over the ranks (CudaWeights::vocab_parallel)
// the embedding's rows and the logits' columns are each rank's, summed by an all-reduce too.

#include "kernels/cpu/model/transformer.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/model/branch_layout.hpp"
#include "kernels/cuda/model/cuda_kv_cache.hpp"
#include "kernels/cuda/model/cuda_weights.hpp"

#include <array>
#include <functional>
#include <map>
#include <vector>

namespace actorlm::kernels::cuda {

// Sums n elements of dtype over the tensor-parallel group, in place, enqueued on `stream`.
using DeviceAllReduce = std::function<void(void* data, std::int64_t n, ActDtype dtype, cudaStream_t stream)>;

class CudaTransformer {
 public:
  // `weights` must outlive the transformer; its device must be current on the calling thread
  // for the constructor and every forward. `all_reduce` is required when weights.world > 1.
  // Layer splits (weights.stages > 1) are not run on the GPU yet, nor head_dim other than 64
  // and 128: std::invalid_argument.
  CudaTransformer(const CudaWeights& weights, cudaStream_t stream, DeviceAllReduce all_reduce = {});
  ~CudaTransformer();
  CudaTransformer(const CudaTransformer&) = delete;
  CudaTransformer& operator=(const CudaTransformer&) = delete;

  // From now on, decode steps run as CUDA graphs: steps whose sequences each add one row, all
  // want logits and none is scored, at most `max_seqs` of them at contexts within `max_context`
  // (max_model_len), left to forward() with logits on the device. The batch is padded to a power
  // of two (or max_seqs) with rows that write nothing, its block tables and decode attention
  // sized for a power of two of positions (at least 256, at most max_context) that covers its
  // contexts, so that one graph per padded size and context bucket, run launch by launch at its
  // first step, captured at its second (and again when a buffer it names has grown), serves
  // every such step: the host then issues the metadata copy and one graph launch instead of a
  // launch per kernel.
  void enable_graphs(std::int32_t max_seqs, std::uint32_t max_context);
  std::uint64_t graph_steps() const { return graph_steps_; }        // forwards run as a graph
  std::uint64_t graph_captures() const { return graph_captures_; }  // of them, captured first

  // As cpu::Transformer::forward: writes the batch's K/V into `cache`, each layer after the
  // cache's swaps of that layer (CudaKvCache::wait_layer; a graph's step after all of them); when `compute_logits`,
  // the logits are [logit_rows(), vocab] f32, one row per sequence with want_logits (its last
  // token), in batch order: copied into `*logits` on the host (the stream synchronised), or,
  // with `logits` null, left in device_logits() for work enqueued after them on the stream.
  // Every row of a sequence with all_logits is kept, final-normed, for prompt_logits. Throws std::out_of_range for a token id outside the vocabulary or
  // a block table that does not cover its positions or names a block outside the cache (checked
  // on the host before anything is enqueued).
  void forward(std::span<const cpu::ForwardSeq> seqs, CudaKvCache& cache, bool compute_logits,
               std::vector<float>* logits);
  const float* device_logits() const { return logits_dev_.as<float>(); }
  float* device_logits() { return logits_dev_.as<float>(); }  // a sampler may change them in place
  std::int64_t logit_rows() const { return logit_rows_; }
  // The rows the last forward kept (its all_logits sequences', in batch order), and the logits
  // of `count` of them from `first`: out becomes [count, vocab] f32 on the host (projected on
  // the device, the stream synchronised). std::out_of_range past the kept rows. With the
  // vocabulary split every rank that computes logits calls it alike (the projection ends in an
  // all-reduce); only the sampling rank's `out` is filled.
  std::int64_t prompt_rows() const { return kept_rows_; }
  void prompt_logits(std::int64_t first, std::int64_t count, std::vector<float>& out);
  // Nanoseconds spent waiting on the stream in forward() and prompt_logits() since construction.
  std::int64_t waited_ns() const { return waited_ns_; }

  // Sizes the device buffers for a step of up to `tokens` rows (and, for its sequences with one
  // new row, `seqs` of up to `max_context` positions; `logit_rows` rows of logits and, where
  // there are any, `tokens` rows kept for prompt log-probabilities, and the logits of
  // `prompt_slice_rows` of those, on the device and, on the sampling rank, pinned on the host):
  // a shard calls it at start for its largest step, before the KV cache takes the rest of the
  // memory, and each forward calls it for its own step before the step's first collective.
  // Throws std::runtime_error naming the buffer when the device runs out of memory.
  void reserve(std::int64_t tokens, std::int32_t seqs, std::uint32_t max_context, std::int64_t logit_rows,
               std::uint32_t block_size, ActDtype cache_dtype, std::int64_t prompt_slice_rows = 0);

  const CudaWeights& weights() const { return w_; }

 private:
  // `table_blocks` > 0: every block table that wide (a graph's step), else the batch's widest.
  void upload_batch(std::span<const cpu::ForwardSeq> seqs, const CudaKvCache& cache, std::uint32_t table_blocks = 0);
  // The output projection, for a rank asked for logits: std::logic_error where it holds none.
  const DeviceMatrix& output_projection() const;
  bool graphable(std::span<const cpu::ForwardSeq> seqs) const;
  void forward_graph(std::span<const cpu::ForwardSeq> seqs, CudaKvCache& cache, bool compute_logits);
  // The step's launches, with no synchronisation (what a graph captures): the embedding, every
  // layer and the last residual add; then the final norm and output projection of `rows` rows.
  void enqueue_layers(CudaKvCache& cache);
  void enqueue_logits(std::int64_t rows);
  // out = norm(x); with `residual`: residual += x, then out = norm(residual) (one launch).
  void norm(const DeviceBuffer& w, const DeviceBuffer& b, const void* x, void* out, std::int64_t rows,
            void* residual = nullptr);
  void gemm(const void* act, const DeviceMatrix& w, void* out, std::int64_t rows, ActDtype out_dtype);
  // out [rows, vocab] f32 = the output projection of `rows` rows of `act`. With the vocabulary
  // split over the ranks, each rank writes its columns of a zeroed out and an all-reduce sums
  // them: every rank computing logits must call it alike.
  void project(const void* act, std::int64_t rows, float* out);
  void attention(std::uint32_t layer, CudaKvCache& cache);
  void mlp(const DeviceLayer& l, const void* in, void* out);
  void reduce(void* data);
  // `floats` f32 values at `device`, written by work on the stream, into `out` through the pinned
  // buffer (the stream synchronised).
  void to_host(const void* device, std::size_t floats, std::vector<float>& out);

  const CudaWeights& w_;
  cudaStream_t stream_;
  DeviceAllReduce all_reduce_;
  Blas blas_;
  DeviceBuffer inv_freq_;  // [head_dim / 2] f32

  // The batch's metadata, gathered on the host into one pinned buffer and copied in one go.
  std::int64_t tokens_ = 0;
  std::int32_t seqs_ = 0;
  std::uint32_t max_blocks_ = 0, max_query_ = 0, logit_rows_ = 0, kept_rows_ = 0;
  std::int32_t decode_seqs_ = 0;         // the first slots: one new row each (decode attention)
  std::uint32_t decode_max_context_ = 0; // their longest context; max_query_: the other slots' most rows
  std::vector<std::size_t> order_;       // slot -> index into the step's sequences
  std::vector<std::size_t> row_of_;      // step's sequence -> its first row
  std::int64_t waited_ns_ = 0;
  std::uint32_t chunk_ = 512;      // decode attention's chunk for the step (reserve())
  std::size_t meta_bytes_ = 0;
  PinnedBuffer host_meta_;
  DeviceBuffer meta_;
  // Offsets into meta_ (bytes).
  std::size_t ids_at_ = 0, positions_at_ = 0, slots_at_ = 0, tables_at_ = 0, context_at_ = 0, starts_at_ = 0,
              logit_rows_at_ = 0, kept_rows_at_ = 0;
  template <class T> T* meta(std::size_t at) const { return reinterpret_cast<T*>(meta_.as<std::byte>() + at); }

  // Activations in the weights' dtype, [tokens_, ...]: the residual stream, the norms' outputs,
  // the parallel branches' projection, the logit rows; a layer's other intermediates in branch_,
  // where layout_ (the step's, set by reserve()) puts them.
  DeviceBuffer x_, normed_, normed2_, proj_, last_;
  DeviceBuffer branch_;
  BranchLayout layout_;
  template <class T> T* branch(std::size_t offset) const {
    return reinterpret_cast<T*>(branch_.as<std::byte>() + offset);
  }
  DeviceBuffer kept_;         // [kept rows, hidden]: all_logits sequences' rows, final-normed
  DeviceBuffer logits_dev_;   // [rows, vocab] f32
  DeviceBuffer prompt_logits_dev_;  // [a slice of kept rows, vocab] f32 (prompt_logits)
  PinnedBuffer logits_host_;  // the same, pinned for the copy back

  // CUDA graphs of decode steps (enable_graphs), by padded batch size and context bucket, with
  // the buffer sizes and shapes they were captured over (sizes, not addresses: a buffer moves
  // only when it grows, and grows alike on every rank, so all ranks capture again together).
  struct Graph {
    bool warmed = false;  // its first step ran launch by launch (modules loaded, cuBLAS chose)
    cudaGraphExec_t exec = nullptr;
    std::array<std::uint64_t, 11> over{};
  };
  std::map<std::pair<std::size_t, std::uint32_t>, Graph> graphs_;
  std::int32_t graph_max_seqs_ = 0;
  std::uint32_t graph_max_context_ = 0;
  std::vector<cpu::ForwardSeq> padded_;
  std::uint64_t graph_steps_ = 0, graph_captures_ = 0;
};

}  // namespace actorlm::kernels::cuda
