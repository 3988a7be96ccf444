#pragma once
// The model forward of one tensor-parallel rank: a batch of sequences, each a run of tokens at
// consecutive positions (a prefill chunk or one decode token), flattened into one [tokens,
// hidden] activation so every GEMM sees the whole batch. Attention reads and writes the paged
// KV cache per sequence. With world > 1 the partial outputs are summed by `all_reduce` (twice
// per Llama layer, once per Falcon layer: its attention and MLP run in parallel). In a layer
// split, a stage after the first takes its input hidden states from the one before (`link`),
// and a stage before the last hands its output to the next instead of computing logits.

#include "kernels/cpu/model/kv_cache.hpp"
#include "kernels/cpu/model/matmul.hpp"
#include "kernels/cpu/model/weights.hpp"

#include <functional>
#include <span>
#include <vector>

namespace actorlm::kernels::cpu {

struct ForwardSeq {
  std::span<const std::int32_t> tokens;        // [n]
  std::uint32_t first_position = 0;            // of tokens[0]
  std::span<const std::uint32_t> block_table;  // covers [0, first_position + n)
  bool want_logits = false;                    // logits of the last token
  bool all_logits = false;                     // keep every token's final hidden state (prompt
                                               // log-probabilities): see prompt_logits
};

using AllReduce = std::function<void(std::span<float>)>;

// A layer split's hand-over, [tokens, hidden] floats: from the previous stage (every stage but
// the first) and to the next (every stage but the last), each marked with the step's tag (its
// id): a stage takes only its own step's hidden states.
struct StageLink {
  std::function<void(std::span<float>, std::uint64_t step)> receive;
  std::function<void(std::span<const float>, std::uint64_t step)> send;
};

class Transformer {
 public:
  // `weights` must outlive the Transformer. `all_reduce` is required when weights.world > 1,
  // `link`'s sides when weights.stages > 1 (std::invalid_argument otherwise).
  // `threads`: the GEMMs' thread pool, the caller included (cores given to this rank).
  explicit Transformer(const ModelWeights& weights, AllReduce all_reduce = {}, std::int32_t threads = 1,
                       StageLink link = {});

  // Runs the batch, writing its K/V into `cache` (this stage's layers). When `compute_logits`
  // (weights.samples()), `logits` becomes [rows, vocab]: one row per sequence with want_logits
  // (its last token), in batch order; and the final (normed) hidden state of every token of the
  // sequences with all_logits is kept, in batch order, for prompt_logits.
  // Throws std::out_of_range for a token id outside the vocabulary or a table that does not
  // cover a sequence.
  // `step` tags the layer split's hand-over (the step's id; unused with one stage).
  void forward(std::span<const ForwardSeq> seqs, KvCache& cache, bool compute_logits,
               std::vector<float>& logits, std::uint64_t step = 0);

  // The rows kept by the last forward (all_logits), and the logits of `count` of them from
  // `first`: out becomes [count, vocab]. Projecting a slice at a time keeps a long prompt's
  // scores from needing rows x vocabulary floats at once. Throws std::out_of_range past the end.
  std::int64_t prompt_rows() const;
  void prompt_logits(std::int64_t first, std::int64_t count, std::vector<float>& out);

  const ModelWeights& weights() const { return w_; }
  // The forward's threads, for work on its results (sampling the logits' rows).
  ThreadPool& pool() { return pool_; }

 private:
  void attention_block(std::int32_t layer, std::span<const ForwardSeq> seqs, KvCache& cache,
                       const float* normed, float* out);
  void mlp_block(const LayerWeights& l, const float* normed, float* out);
  void norm(const std::vector<float>& w, const std::vector<float>& b, const float* x, float* out);
  void add_rows(float* y, const float* x);  // y[tokens_, hidden] += x
  void reduce(float* data, std::int64_t n);
  void matmul(const float* x, const WeightMatrix& w, float* y);  // [tokens_, k] . w^T -> [tokens_, w.rows]

  const ModelWeights& w_;
  AllReduce all_reduce_;
  StageLink link_;
  ThreadPool pool_;
  MatmulScratch matmul_scratch_;
  std::int64_t tokens_ = 0;  // rows of the current batch
  std::vector<std::int32_t> positions_;
  std::vector<std::int64_t> seq_rows_;  // [seqs]: first token row of each sequence
  std::vector<std::size_t> few_;        // sequences of few query rows (attention_block)
  // Activations, [tokens_, ...]
  std::vector<float> x_, normed_, normed2_, qkv_, attn_, proj_, up_, act_, mlp_out_;
  std::vector<float> last_;  // [logit rows, hidden]: the rows whose logits are computed
  std::vector<float> kept_;  // [prompt rows, hidden]: all_logits sequences' rows, normed
};

}  // namespace actorlm::kernels::cpu
