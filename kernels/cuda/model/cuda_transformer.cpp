#include "kernels/cuda/model/cuda_transformer.hpp"

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise_math.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/kv_write.hpp"
#include "kernels/cuda/paged_attention.hpp"
#include "kernels/cuda/prefill_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace actorlm::kernels::cuda {

using model::Family;

namespace {

constexpr std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

CudaTransformer::CudaTransformer(const CudaWeights& weights, cudaStream_t stream, DeviceAllReduce all_reduce)
    : w_(weights), stream_(stream), all_reduce_(std::move(all_reduce)), blas_(stream) {
  if (w_.world > 1 && !all_reduce_)
    throw std::invalid_argument("cuda transformer: tensor parallel degree " + std::to_string(w_.world) +
                                " needs an all-reduce");
  if (w_.stages > 1)
    throw std::invalid_argument("cuda backend: a layer split (engine.pipeline_parallel_degree > 1) does not run on "
                                "the GPU yet; use tensor parallelism");
  const std::int32_t hd = static_cast<std::int32_t>(w_.spec.head_dim);
  if (hd != 64 && hd != 128)
    throw std::invalid_argument("cuda backend: head_dim " + std::to_string(hd) +
                                ": the attention kernels serve head_dim 64 and 128");
  std::vector<float> inv(static_cast<std::size_t>(hd / 2));
  rope_inv_freq_table(w_.spec.rope_theta, hd, inv.data());
  inv_freq_.reserve(inv.size() * sizeof(float), "the rotary frequencies");
  ACTORLM_CUDA_CHECK(
      cudaMemcpyAsync(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
  ACTORLM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `inv` goes out of scope
}

CudaTransformer::~CudaTransformer() {
  for (auto& [rows, g] : graphs_)
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
}

void CudaTransformer::enable_graphs(std::int32_t max_seqs, std::uint32_t max_context) {
  if (max_seqs <= 0 || max_context == 0)
    throw std::invalid_argument("cuda transformer: graphs need a batch size and a context length above 0");
  graph_max_seqs_ = max_seqs;
  graph_max_context_ = max_context;
}

void CudaTransformer::reserve(std::int64_t tokens, std::int32_t seqs, std::uint32_t max_context, std::int64_t logit_rows,
                              std::uint32_t block_size, ActDtype cache_dtype, std::int64_t prompt_slice_rows) {
  const model::RankShard& p = w_.heads;
  const std::size_t es = act_bytes(w_.dtype), hd = w_.spec.head_dim, h = w_.spec.hidden;
  const auto T = static_cast<std::size_t>(tokens);
  // The residual stream and the norms' outputs; the parallel branches (Falcon) keep the
  // attention's projection outside the branch region (the MLP's output is added to it) and read
  // a second norm only with two per layer.
  const model::Architecture& a = w_.spec;
  for (DeviceBuffer* b : {&x_, &normed_}) b->reserve(T * h * es, "activations");
  if (a.parallel_attention) proj_.reserve(T * h * es, "activations");
  const bool mlp_norms =
      std::any_of(w_.layers.begin(), w_.layers.end(), [](const DeviceLayer& l) { return !l.mlp_norm.empty(); });
  if (a.parallel_attention && mlp_norms) normed2_.reserve(T * h * es, "activations");
  std::size_t workspace_bytes = 0;
  if (seqs > 0 && max_context > 0) {
    DecodeAttentionParams shape;
    shape.seqs = seqs;
    shape.q_heads = static_cast<std::int32_t>(p.q_heads);
    shape.kv_heads = static_cast<std::int32_t>(p.kv_heads);
    shape.head_dim = static_cast<std::int32_t>(hd);
    shape.block_size = block_size;
    shape.max_context = max_context;
    shape.max_blocks_per_seq = (max_context + block_size - 1) / block_size;
    shape.act_dtype = w_.dtype;
    shape.cache_dtype = cache_dtype;
    chunk_ = decode_attention_chunk(shape);
    workspace_bytes =
        decode_attention_workspace_floats(seqs, shape.q_heads, shape.head_dim, max_context, chunk_) * sizeof(float);
  }
  // Every intermediate of a layer in one region, the attention's and the MLP's taking turns.
  const BranchShape shape{h,  (p.q_heads + 2 * p.kv_heads) * hd, p.q_heads * hd, p.ffn_columns, es,
                          a.family == Family::llama, a.parallel_attention};
  layout_ = branch_layout(shape, T, workspace_bytes);
  branch_.reserve(layout_.bytes, "activations");
  if (logit_rows > 0) {
    const auto R = static_cast<std::size_t>(logit_rows);
    last_.reserve(R * h * es, "activations");
    logits_dev_.reserve(R * w_.spec.vocab * sizeof(float), "the logits");
    kept_.reserve(T * h * es, "the prompt's rows");  // every row of a step may be a scored prompt's
  }
  if (prompt_slice_rows > 0) {
    // Up front: under tensor parallelism every rank projects the slices, each ending in an
    // all-reduce, and an allocation failing on one rank only would leave the others waiting.
    const std::size_t bytes = std::size_t(prompt_slice_rows) * std::size_t(w_.spec.vocab) * sizeof(float);
    prompt_logits_dev_.reserve(bytes, "the prompt's logits");
    if (w_.samples()) logits_host_.reserve(bytes, "the prompt's logits");
  }
}

const DeviceMatrix& CudaTransformer::output_projection() const {
  const DeviceMatrix& out = w_.output_matrix();
  if (out.empty() || (w_.lm_head.empty() && !w_.spec.tied_embeddings))
    throw std::logic_error("cuda transformer: logits asked of rank " + std::to_string(w_.rank) +
                           ", which does not hold the output projection");
  return out;
}

void CudaTransformer::upload_batch(std::span<const cpu::ForwardSeq> seqs, const CudaKvCache& cache,
                                   std::uint32_t table_blocks) {
  const auto vocab = static_cast<std::int64_t>(w_.spec.vocab);
  const std::uint32_t bs = cache.block_size();
  // Counted apart and kept only once every sequence passed its checks: a step refused for its
  // ids or tables leaves the previous step's figures (logit_rows() among them) as they were.
  std::int64_t tokens = 0;
  std::uint32_t max_blocks = 0, max_query = 0, logit_rows = 0, kept_rows = 0, decode_max_context = 0;
  for (const auto& q : seqs) {
    const auto n = static_cast<std::uint32_t>(q.tokens.size());
    const std::uint32_t context = q.first_position + n;
    // The table must cover every position up to the newest and name blocks of this cache.
    const std::uint32_t needed = (context + bs - 1) / bs;
    if (q.block_table.size() < needed)
      throw std::out_of_range("block table of " + std::to_string(q.block_table.size()) + " blocks does not cover " +
                              std::to_string(context) + " positions of " + std::to_string(bs) + " tokens a block");
    for (std::uint32_t b = 0; b < needed; ++b)
      if (q.block_table[b] >= cache.device_blocks())
        throw std::out_of_range("block " + std::to_string(q.block_table[b]) + " outside the KV cache of " +
                                std::to_string(cache.device_blocks()) + " blocks");
    for (const std::int32_t t : q.tokens)
      if (t < 0 || t >= vocab)
        throw std::out_of_range("token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(vocab));
    tokens += n;
    max_blocks = std::max({max_blocks, needed, table_blocks});
    if (n == 1) decode_max_context = std::max(decode_max_context, context);
    else max_query = std::max(max_query, n);
    logit_rows += q.want_logits && n > 0 ? 1 : 0;
    kept_rows += q.all_logits ? n : 0;
  }
  // Slots: the sequences with one new row first (decode attention serves them, split-K over
  // long contexts), then the others (prefill attention), each group in step order. Rows follow
  // the slots; the logit rows stay in step order.
  order_.clear();
  for (std::size_t s = 0; s < seqs.size(); ++s)
    if (seqs[s].tokens.size() == 1) order_.push_back(s);
  decode_seqs_ = static_cast<std::int32_t>(order_.size());
  for (std::size_t s = 0; s < seqs.size(); ++s)
    if (seqs[s].tokens.size() != 1) order_.push_back(s);
  tokens_ = tokens;
  max_blocks_ = max_blocks;
  decode_max_context_ = decode_max_context;
  max_query_ = max_query;
  logit_rows_ = logit_rows;
  kept_rows_ = kept_rows;
  seqs_ = static_cast<std::int32_t>(seqs.size());
  const auto T = static_cast<std::size_t>(tokens_);
  const auto S = static_cast<std::size_t>(seqs_);
  std::size_t at = 0;
  ids_at_ = at;
  at += align16(T * 4);
  positions_at_ = at;
  at += align16(T * 4);
  slots_at_ = at;
  at += align16(T * 8);
  tables_at_ = at;
  at += align16(S * max_blocks_ * 4);
  context_at_ = at;
  at += align16(S * 4);
  starts_at_ = at;
  at += align16((S + 1) * 4);
  logit_rows_at_ = at;
  at += align16(std::size_t(logit_rows_) * 4);
  kept_rows_at_ = at;
  at += align16(std::size_t(kept_rows_) * 4);
  host_meta_.reserve(at, "the step's metadata");
  meta_.reserve(at, "the step's metadata");
  std::byte* h = host_meta_.as<std::byte>();
  std::memset(h, 0, at);
  auto* ids = reinterpret_cast<std::int32_t*>(h + ids_at_);
  auto* positions = reinterpret_cast<std::int32_t*>(h + positions_at_);
  auto* slots = reinterpret_cast<std::int64_t*>(h + slots_at_);
  auto* tables = reinterpret_cast<std::uint32_t*>(h + tables_at_);
  auto* context = reinterpret_cast<std::uint32_t*>(h + context_at_);
  auto* starts = reinterpret_cast<std::uint32_t*>(h + starts_at_);
  auto* rows = reinterpret_cast<std::int32_t*>(h + logit_rows_at_);
  auto* kept = reinterpret_cast<std::int32_t*>(h + kept_rows_at_);
  std::size_t row = 0, logit = 0, kept_row = 0;
  row_of_.assign(S, 0);
  for (std::size_t k = 0; k < S; ++k) {
    const std::size_t s = order_[k];
    const auto& q = seqs[s];
    const auto n = static_cast<std::uint32_t>(q.tokens.size());
    starts[k] = static_cast<std::uint32_t>(row);
    context[k] = q.first_position + n;
    const std::uint32_t needed = (context[k] + bs - 1) / bs;
    std::copy_n(q.block_table.begin(), needed, tables + k * max_blocks_);
    for (std::uint32_t i = 0; i < n; ++i) {
      ids[row + i] = q.tokens[i];
      positions[row + i] = static_cast<std::int32_t>(q.first_position + i);
      slots[row + i] = static_cast<std::int64_t>(cuda_math::paged_slot(q.block_table.data(), bs, q.first_position + i));
    }
    row_of_[s] = row;
    row += n;
  }
  for (std::size_t s = 0; s < S; ++s) {
    const auto& q = seqs[s];
    const auto n = static_cast<std::uint32_t>(q.tokens.size());
    if (q.all_logits)
      for (std::uint32_t i = 0; i < n; ++i) kept[kept_row++] = static_cast<std::int32_t>(row_of_[s] + i);
    if (q.want_logits && n > 0) rows[logit++] = static_cast<std::int32_t>(row_of_[s] + n - 1);
  }
  starts[S] = static_cast<std::uint32_t>(row);
  meta_bytes_ = at;
}

void CudaTransformer::norm(const DeviceBuffer& w, const DeviceBuffer& b, const void* x, void* out, std::int64_t rows,
                           void* residual) {
  const model::Architecture& s = w_.spec;
  if (s.family == Family::llama) {
    rms_norm({x, w.as<float>(), out, rows, s.hidden, s.norm_eps, w_.dtype, residual}, stream_);
  } else {
    layer_norm({x, w.as<float>(), b.as<float>(), out, rows, s.hidden, s.norm_eps, w_.dtype, residual}, stream_);
  }
}

void CudaTransformer::gemm(const void* act, const DeviceMatrix& w, void* out, std::int64_t rows, ActDtype out_dtype) {
  blas_.gemm({act, w.data.get(), out, rows, w.rows, w.cols, w_.dtype, out_dtype});
}

void CudaTransformer::reduce(void* data) {
  if (w_.world > 1) all_reduce_(data, tokens_ * w_.spec.hidden, w_.dtype, stream_);
}

void CudaTransformer::attention(std::uint32_t layer, CudaKvCache& cache) {
  const model::RankShard& p = w_.heads;
  const std::int32_t hd = static_cast<std::int32_t>(w_.spec.head_dim);
  const auto q_heads = static_cast<std::int32_t>(p.q_heads), kv_heads = static_cast<std::int32_t>(p.kv_heads);
  const std::int64_t qkv_width = std::int64_t(q_heads + 2 * kv_heads) * hd;
  const std::size_t es = act_bytes(w_.dtype);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto* qkv = branch<std::byte>(layout_.qkv);

  // Rotary embedding, the query heads made contiguous (as both attention kernels read them) and
  // K and V written into their paged slots: one launch.
  RopeCacheParams rc;
  KvWriteParams& kw = rc.kv;
  kw.k = qkv + std::size_t(q_heads) * hd * es;
  kw.v = qkv + std::size_t(q_heads + kv_heads) * hd * es;
  kw.slots = meta<std::int64_t>(slots_at_);
  kw.k_plane = cache.k(layer);
  kw.v_plane = cache.v(layer);
  kw.tokens = tokens_;
  kw.row_stride = qkv_width;
  kw.kv_heads = kv_heads;
  kw.head_dim = hd;
  kw.block_size = cache.block_size();
  kw.num_blocks = cache.device_blocks();
  kw.act_dtype = w_.dtype;
  kw.cache_dtype = cache.dtype();
  rc.q_in = qkv;
  rc.q_out = branch<void>(layout_.q);
  rc.positions = meta<std::int32_t>(positions_at_);
  rc.inv_freq = inv_freq_.as<float>();
  rc.q_heads = q_heads;
  rc.linear_factor = w_.spec.rope_linear_factor;
  rc.halves = w_.layout.rope_style == model::RopeStyle::halves;
  cache.wait_layer(layer, stream_);  // the step's swaps of this layer (the first launch to touch it)
  rope_and_cache(rc, stream_);

  // The fields both attention kernels share.
  const auto common = [&](auto& a) {
    a.q = branch<void>(layout_.q);
    a.k_plane = cache.k(layer);
    a.v_plane = cache.v(layer);
    a.block_tables = meta<std::uint32_t>(tables_at_);
    a.context_lens = meta<std::uint32_t>(context_at_);
    a.out = branch<void>(layout_.attn);
    a.seqs = seqs_;
    a.q_heads = q_heads;
    a.kv_heads = kv_heads;
    a.head_dim = hd;
    a.block_size = cache.block_size();
    a.max_blocks_per_seq = max_blocks_;
    a.scale = scale;
    a.act_dtype = w_.dtype;
    a.cache_dtype = cache.dtype();
  };
  // The first decode_seqs_ slots (one new row each: rows 0 .. decode_seqs_ - 1) by decode
  // attention, the rest by prefill attention; both write their rows of the attention output.
  if (decode_seqs_ > 0) {
    DecodeAttentionParams a;
    common(a);
    a.seqs = decode_seqs_;
    a.max_context = decode_max_context_;
    a.chunk_positions = chunk_;  // chosen and its workspace sized before the step's first collective
    a.workspace = branch<float>(layout_.workspace);
    decode_attention(a, stream_);
  }
  if (seqs_ > decode_seqs_) {
    PrefillAttentionParams a;
    common(a);
    const auto first = static_cast<std::size_t>(decode_seqs_);
    a.seqs = seqs_ - decode_seqs_;
    a.block_tables += first * max_blocks_;
    a.context_lens += first;
    a.query_starts = meta<std::uint32_t>(starts_at_) + first;  // absolute rows: q and out stay whole
    a.max_query_len = max_query_;
    prefill_attention(a, stream_);
  }
}

void CudaTransformer::mlp(const DeviceLayer& l, const void* in, void* out) {
  const std::int64_t f = w_.heads.ffn_columns;
  void* act = branch<void>(layout_.act);
  if (w_.spec.family == Family::llama) {
    void* up = branch<void>(layout_.up);
    gemm(in, l.w_up, up, tokens_, w_.dtype);  // [tokens, 2 f]: gate, then up
    silu_mul({up, act, tokens_, f, w_.dtype}, stream_);
  } else {
    gemm(in, l.w_up, act, tokens_, w_.dtype);
    gelu(act, tokens_ * f, w_.dtype, stream_);
  }
  gemm(act, l.w_down, out, tokens_, w_.dtype);
}

void CudaTransformer::enqueue_layers(CudaKvCache& cache) {
  const model::Architecture& s = w_.spec;
  const std::int64_t h = s.hidden;
  embedding({w_.embed.data.get(), meta<std::int32_t>(ids_at_), x_.get(), tokens_, w_.embed.rows, h, w_.dtype, w_.dtype,
             nullptr, w_.vocab_first},
            stream_);
  if (w_.vocab_parallel) reduce(x_.get());  // each rank gathered its rows of the vocabulary, zeros elsewhere
  // A branch's output not yet added to the residual stream: the next norm adds it (one launch
  // for both), the last one is added after the loop.
  const void* pending = nullptr;
  for (std::uint32_t i = 0; i < w_.layers.size(); ++i) {
    const DeviceLayer& l = w_.layers[i];
    if (pending) norm(l.attn_norm, l.attn_norm_bias, pending, normed_.get(), tokens_, x_.get());
    else norm(l.attn_norm, l.attn_norm_bias, x_.get(), normed_.get(), tokens_);
    gemm(normed_.get(), l.wqkv, branch<void>(layout_.qkv), tokens_, w_.dtype);
    attention(i, cache);
    void* proj = s.parallel_attention ? proj_.get() : branch<void>(layout_.proj);
    void* mlp_out = branch<void>(layout_.mlp_out);
    gemm(branch<void>(layout_.attn), l.wo, proj, tokens_, w_.dtype);
    if (s.parallel_attention) {
      const void* mlp_in = normed_.get();
      if (!l.mlp_norm.empty()) {
        norm(l.mlp_norm, l.mlp_norm_bias, x_.get(), normed2_.get(), tokens_);
        mlp_in = normed2_.get();
      }
      mlp(l, mlp_in, mlp_out);
      add_in_place(proj, mlp_out, tokens_ * h, w_.dtype, stream_);
      reduce(proj);  // one all-reduce for both branches
      pending = proj;
    } else {
      reduce(proj);
      norm(l.mlp_norm, l.mlp_norm_bias, proj, normed_.get(), tokens_, x_.get());
      mlp(l, normed_.get(), mlp_out);
      reduce(mlp_out);
      pending = mlp_out;
    }
  }
  if (pending) add_in_place(x_.get(), pending, tokens_ * h, w_.dtype, stream_);
}

void CudaTransformer::enqueue_logits(std::int64_t rows) {
  // Final norm and output projection only for the rows whose logits are wanted (gathered as an
  // embedding lookup whose table is the activations).
  const std::int64_t h = w_.spec.hidden;
  embedding({x_.get(), meta<std::int32_t>(logit_rows_at_), last_.get(), rows, tokens_, h, w_.dtype, w_.dtype}, stream_);
  norm(w_.out_norm, w_.out_norm_bias, last_.get(), last_.get(), rows);
  project(last_.get(), rows, logits_dev_.as<float>());
}

void CudaTransformer::project(const void* act, std::int64_t rows, float* out) {
  const DeviceMatrix& m = output_projection();
  if (!w_.vocab_parallel) return gemm(act, m, out, rows, ActDtype::f32);
  const std::int64_t vocab = w_.spec.vocab;
  ACTORLM_CUDA_CHECK(cudaMemsetAsync(out, 0, std::size_t(rows) * std::size_t(vocab) * sizeof(float), stream_));
  GemmParams g{act, m.data.get(), out + w_.vocab_first, rows, m.rows, m.cols, w_.dtype, ActDtype::f32};
  g.out_stride = vocab;
  blas_.gemm(g);
  all_reduce_(out, rows * vocab, ActDtype::f32, stream_);
}

bool CudaTransformer::graphable(std::span<const cpu::ForwardSeq> seqs) const {
  if (graph_max_seqs_ == 0 || seqs.empty() || seqs.size() > std::size_t(graph_max_seqs_)) return false;
  return std::all_of(seqs.begin(), seqs.end(), [&](const cpu::ForwardSeq& q) {
    return q.tokens.size() == 1 && q.want_logits && !q.all_logits && q.first_position < graph_max_context_;
  });
}

void CudaTransformer::forward_graph(std::span<const cpu::ForwardSeq> seqs, CudaKvCache& cache, bool compute_logits) {
  if (compute_logits) output_projection();  // throws before anything is enqueued
  // A capture cannot wait for an event recorded outside it: the step's swaps, all of them, first.
  cache.wait_swaps(stream_);
  // The batch padded to its graph's size: rows at position 0 of block 0 that write nothing
  // (their slots are set to -1 below) and whose outputs nobody reads.
  static const std::int32_t pad_token = 0;
  static const std::uint32_t pad_block = 0;
  const std::size_t n = seqs.size();
  std::size_t rows = 1;
  while (rows < n) rows *= 2;
  rows = std::max(n, std::min(rows, std::size_t(graph_max_seqs_)));
  std::uint32_t longest = 1;
  for (const auto& q : seqs) longest = std::max(longest, q.first_position + 1);
  std::uint32_t context = 256;
  while (context < longest) context *= 2;
  context = std::min(context, graph_max_context_);
  padded_.assign(seqs.begin(), seqs.end());
  padded_.resize(rows, cpu::ForwardSeq{{&pad_token, 1}, 0, {&pad_block, 1}, true, false});
  const std::uint32_t bs = cache.block_size();
  upload_batch(padded_, cache, (context + bs - 1) / bs);  // throws before anything is enqueued
  auto* slots = reinterpret_cast<std::int64_t*>(host_meta_.as<std::byte>() + slots_at_);
  std::fill(slots + n, slots + rows, std::int64_t{-1});
  decode_max_context_ = context;  // the grid of decode attention: shorter contexts skip chunks
  const auto R = static_cast<std::int64_t>(rows);
  reserve(R, static_cast<std::int32_t>(rows), context, compute_logits ? R : 0, bs, cache.dtype());
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(meta_.get(), host_meta_.get(), meta_bytes_, cudaMemcpyHostToDevice, stream_));

  const std::array<std::uint64_t, 11> over{meta_.bytes(),
                                        branch_.bytes(),
                                        x_.bytes(),
                                        normed_.bytes(),
                                        normed2_.bytes(),
                                        proj_.bytes(),
                                        last_.bytes(),
                                        logits_dev_.bytes(),
                                        reinterpret_cast<std::uintptr_t>(cache.k(0)),
                                        chunk_,
                                        compute_logits};
  const auto enqueue_step = [&] {
    enqueue_layers(cache);
    if (compute_logits) enqueue_logits(R);
  };
  Graph& g = graphs_[{rows, context}];
  if (!g.warmed) {
    enqueue_step();
    g.warmed = true;
  } else {
    if (g.exec == nullptr || g.over != over) {
      if (g.exec != nullptr) ACTORLM_CUDA_CHECK(cudaGraphExecDestroy(std::exchange(g.exec, nullptr)));
      ACTORLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        enqueue_step();
      } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream_, &broken);
        if (broken != nullptr) cudaGraphDestroy(broken);
        throw;
      }
      cudaGraph_t graph = nullptr;
      ACTORLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
      cudaGraphDestroy(graph);
      if (made != cudaSuccess) g.exec = nullptr;
      ACTORLM_CUDA_CHECK(made);
      g.over = over;
      ++graph_captures_;
    }
    ACTORLM_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++graph_steps_;
  }
  // What the caller reads: the real sequences' logit rows (the first n), nothing kept.
  tokens_ = static_cast<std::int64_t>(n);
  logit_rows_ = compute_logits ? static_cast<std::uint32_t>(n) : 0;
  kept_rows_ = 0;
  if (!compute_logits) timed_sync(stream_, waited_ns_);
}

void CudaTransformer::forward(std::span<const cpu::ForwardSeq> seqs, CudaKvCache& cache, bool compute_logits,
                              std::vector<float>* logits) {
  const model::Architecture& s = w_.spec;
  if (logits) logits->clear();
  // A step that failed may have left copies from the pinned buffers pending: let them finish
  // before the buffers are refilled or reallocated.
  timed_sync(stream_, waited_ns_);
  if (logits == nullptr && graphable(seqs)) return forward_graph(seqs, cache, compute_logits);
  upload_batch(seqs, cache);  // throws before anything is enqueued
  if (tokens_ == 0) return;
  const std::int64_t h = s.hidden;
  // Every buffer the step needs, before its first collective: a cudaFree while another rank's
  // all-reduce waits for this one could deadlock the group.
  reserve(tokens_, decode_seqs_, decode_max_context_, compute_logits ? logit_rows_ : 0, cache.block_size(),
          cache.dtype());
  if (!compute_logits) kept_rows_ = 0;
  const std::size_t kept_bytes = std::size_t(kept_rows_) * h * act_bytes(w_.dtype);
  // With the vocabulary split every rank keeps the rows and projects them, each projection ending
  // in an all-reduce: a step whose rows do not fit the buffer reserved at start (alike on every
  // rank) is refused by every rank alike, before anything is enqueued.
  if (w_.vocab_parallel && kept_bytes > kept_.bytes())
    throw std::invalid_argument("cuda transformer: " + std::to_string(kept_rows_) +
                                " prompt rows to score, more than the shard reserved for");
  // Otherwise only the sampling rank keeps rows: should its buffer not fit (a step larger than the
  // one the shard reserved for), it still runs the forward, whose all-reduces the other ranks
  // wait for, and fails the step after it.
  std::exception_ptr no_room;
  if (kept_rows_ > 0) try {
      kept_.reserve(kept_bytes, "the prompt's rows");
    } catch (...) {
      no_room = std::current_exception();
    }
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(meta_.get(), host_meta_.get(), meta_bytes_, cudaMemcpyHostToDevice, stream_));
  enqueue_layers(cache);
  if (no_room) {
    kept_rows_ = logit_rows_ = 0;
    timed_sync(stream_, waited_ns_);
    std::rethrow_exception(no_room);
  }
  if (!compute_logits || (logit_rows_ == 0 && kept_rows_ == 0)) {
    logit_rows_ = 0;
    timed_sync(stream_, waited_ns_);
    return;
  }
  output_projection();  // throws where the rank holds none
  // A prompt's rows: final-normed now, projected a slice at a time by prompt_logits.
  if (kept_rows_ > 0) {
    embedding({x_.get(), meta<std::int32_t>(kept_rows_at_), kept_.get(), kept_rows_, tokens_, h, w_.dtype, w_.dtype},
              stream_);
    norm(w_.out_norm, w_.out_norm_bias, kept_.get(), kept_.get(), kept_rows_);
  }
  if (logit_rows_ == 0) {  // a chunk of a scored prompt that samples nothing
    timed_sync(stream_, waited_ns_);
    return;
  }
  const std::int64_t R = logit_rows_;
  enqueue_logits(R);
  if (logits == nullptr) return;  // on the device for the caller, in stream order
  to_host(logits_dev_.get(), std::size_t(R) * std::size_t(s.vocab), *logits);
}

void CudaTransformer::to_host(const void* device, std::size_t floats, std::vector<float>& out) {
  const std::size_t bytes = floats * sizeof(float);
  if (bytes > logits_host_.bytes()) {
    // The collectives are only enqueued: let them finish before an allocation that could wait on
    // this device while a peer rank waits on the driver.
    timed_sync(stream_, waited_ns_);
    logits_host_.reserve(bytes, "the logits");
  }
  ACTORLM_CUDA_CHECK(cudaMemcpyAsync(logits_host_.get(), device, bytes, cudaMemcpyDeviceToHost, stream_));
  timed_sync(stream_, waited_ns_);
  out.assign(logits_host_.as<float>(), logits_host_.as<float>() + floats);
}

void CudaTransformer::prompt_logits(std::int64_t first, std::int64_t count, std::vector<float>& out) {
  if (first < 0 || count < 0 || first + count > std::int64_t(kept_rows_))
    throw std::out_of_range("cuda transformer: prompt rows [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") asked, " + std::to_string(kept_rows_) + " kept");
  const std::size_t floats = static_cast<std::size_t>(count) * static_cast<std::size_t>(w_.spec.vocab);
  out.clear();
  if (count == 0) return;
  if (floats * sizeof(float) > prompt_logits_dev_.bytes()) {
    // A slice larger than the shard reserved for (one rank: the others wait for no collective of
    // it; several: each grows alike). The forward's collectives are only enqueued: let them
    // finish before a cudaFree that could wait on this device while a peer waits on the driver.
    timed_sync(stream_, waited_ns_);
    prompt_logits_dev_.reserve(floats * sizeof(float), "the prompt's logits");
  }
  const std::size_t row_bytes = static_cast<std::size_t>(w_.spec.hidden) * act_bytes(w_.dtype);
  project(kept_.as<std::byte>() + static_cast<std::size_t>(first) * row_bytes, count, prompt_logits_dev_.as<float>());
  if (w_.samples()) to_host(prompt_logits_dev_.get(), floats, out);
  else timed_sync(stream_, waited_ns_);  // a vocabulary-parallel rank: its part is in the sum
}

}  // namespace actorlm::kernels::cuda
