#include "kernels/cpu/model/transformer.hpp"

#include "kernels/cpu/model/ops.hpp"

#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

namespace actorlm::kernels::cpu {

using model::Family;

namespace {

// Rows from which the row-wise operators (norms, rotary, activations, residual adds) go to the
// pool: below, a dispatch costs more than the work (one decode row is 576 values).
constexpr std::int64_t pool_rows_min = 16;
// Sequences of at most this many query rows attend one per thread when there are many of them.
constexpr std::size_t few_rows_max = 4;

// fn(begin, end) over [0, rows): on the pool for enough rows, each range whole rows (a row's
// arithmetic is its own, so the bits do not depend on the split).
template <class Fn>
void over_rows(ThreadPool& pool, std::int64_t rows, Fn&& fn) {
  if (rows < pool_rows_min) fn(std::int64_t{0}, rows);
  else pool.parallel_for(rows, 4, fn, 1);
}

}  // namespace

Transformer::Transformer(const ModelWeights& weights, AllReduce all_reduce, std::int32_t threads, StageLink link)
    : w_(weights), all_reduce_(std::move(all_reduce)), link_(std::move(link)), pool_(threads) {
  if (w_.world > 1 && !all_reduce_)
    throw std::invalid_argument("transformer: tensor parallel degree " + std::to_string(w_.world) +
                                " needs an all-reduce");
  if ((!w_.first_stage() && !link_.receive) || (!w_.last_stage() && !link_.send))
    throw std::invalid_argument("transformer: stage " + std::to_string(w_.stage) + " of a " +
                                std::to_string(w_.stages) + "-stage layer split needs its links to the stages beside it");
}

void Transformer::reduce(float* data, std::int64_t n) {
  if (w_.world > 1) all_reduce_(std::span<float>(data, static_cast<std::size_t>(n)));
}

void Transformer::matmul(const float* x, const WeightMatrix& w, float* y) {
  cpu::matmul({x, tokens_, &w, y}, pool_, matmul_scratch_);
}

void Transformer::norm(const std::vector<float>& w, const std::vector<float>& b, const float* x, float* out) {
  const model::Architecture& s = w_.spec;
  const std::int64_t h = s.hidden;
  over_rows(pool_, tokens_, [&](std::int64_t r0, std::int64_t r1) {
    if (s.family == Family::llama) rms_norm(x + r0 * h, r1 - r0, h, w.data(), s.norm_eps, out + r0 * h);
    else layer_norm(x + r0 * h, r1 - r0, h, w.data(), b.data(), s.norm_eps, out + r0 * h);
  });
}

void Transformer::add_rows(float* y, const float* x) {
  const std::int64_t h = w_.spec.hidden;
  over_rows(pool_, tokens_, [&](std::int64_t r0, std::int64_t r1) { add_in_place(y + r0 * h, x + r0 * h, (r1 - r0) * h); });
}

void Transformer::forward(std::span<const ForwardSeq> seqs, KvCache& cache, bool compute_logits,
                          std::vector<float>& logits, std::uint64_t step) {
  const model::Architecture& s = w_.spec;
  const std::int64_t h = s.hidden;
  const auto vocab = static_cast<std::int32_t>(s.vocab);
  tokens_ = 0;
  for (const auto& q : seqs) tokens_ += static_cast<std::int64_t>(q.tokens.size());
  logits.clear();
  kept_.clear();
  if (tokens_ == 0) return;

  positions_.resize(static_cast<std::size_t>(tokens_));
  x_.resize(static_cast<std::size_t>(tokens_ * h));
  std::int64_t row = 0;
  for (const auto& q : seqs)
    for (std::size_t i = 0; i < q.tokens.size(); ++i, ++row) {
      const std::int32_t t = q.tokens[i];
      if (t < 0 || t >= vocab)
        throw std::out_of_range("token id " + std::to_string(t) + " outside the vocabulary of " +
                                std::to_string(s.vocab));
      positions_[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(q.first_position + i);
      if (w_.first_stage())
        w_.embed.dequantize_row(t, std::span<float>(x_.data() + row * h, static_cast<std::size_t>(h)));
    }
  // Everything that can refuse the batch is checked before the hand-over, on every stage alike:
  // a stage that threw later would leave the next waiting for hidden states that never come.
  if (w_.stages > 1)
    for (const auto& q : seqs)
      check_covered(cache.k(0), q.block_table, q.first_position + static_cast<std::uint32_t>(q.tokens.size()));
  if (!w_.first_stage()) link_.receive(x_, step);  // the previous stage's output rows

  normed_.resize(x_.size());
  normed2_.resize(x_.size());
  proj_.resize(x_.size());
  mlp_out_.resize(x_.size());
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(w_.layers.size()); ++i) {
    const LayerWeights& l = w_.layers[static_cast<std::size_t>(i)];
    norm(l.attn_norm, l.attn_norm_bias, x_.data(), normed_.data());
    attention_block(i, seqs, cache, normed_.data(), proj_.data());
    if (s.parallel_attention) {
      const float* mlp_in = normed_.data();
      if (!l.mlp_norm.empty()) {
        norm(l.mlp_norm, l.mlp_norm_bias, x_.data(), normed2_.data());
        mlp_in = normed2_.data();
      }
      mlp_block(l, mlp_in, mlp_out_.data());
      add_rows(proj_.data(), mlp_out_.data());
      reduce(proj_.data(), tokens_ * h);  // one all-reduce for both branches
      add_rows(x_.data(), proj_.data());
    } else {
      reduce(proj_.data(), tokens_ * h);
      add_rows(x_.data(), proj_.data());
      norm(l.mlp_norm, l.mlp_norm_bias, x_.data(), normed_.data());
      mlp_block(l, normed_.data(), mlp_out_.data());
      reduce(mlp_out_.data(), tokens_ * h);
      add_rows(x_.data(), mlp_out_.data());
    }
  }
  if (!w_.last_stage()) {
    pool_.rest();  // this stage's next work is the next step's
    link_.send(x_, step);
    return;
  }
  if (!compute_logits) return;
  if (w_.lm_head.empty() && !s.tied_embeddings)
    throw std::logic_error("transformer: logits asked of rank " + std::to_string(w_.rank) +
                           ", which does not hold the output projection");

  // Final norm for the rows whose logits are wanted, and the output projection now for the
  // sampling rows only; a prompt's rows are projected a slice at a time by prompt_logits.
  std::vector<float>& last = last_;  // [rows, hidden]
  last.clear();
  kept_.clear();
  row = 0;
  for (const auto& q : seqs) {
    const auto n = static_cast<std::int64_t>(q.tokens.size());
    if (q.all_logits) kept_.insert(kept_.end(), x_.begin() + row * h, x_.begin() + (row + n) * h);
    if (q.want_logits && n > 0) last.insert(last.end(), x_.begin() + (row + n - 1) * h, x_.begin() + (row + n) * h);
    row += n;
  }
  if (kept_.empty()) std::vector<float>().swap(kept_);  // a long prompt's rows go at the next step that scores none
  for (auto* rows_of : {&last, &kept_}) {
    const std::int64_t rows = static_cast<std::int64_t>(rows_of->size()) / h;
    float* d = rows_of->data();
    if (s.family == Family::llama) rms_norm(d, rows, h, w_.out_norm.data(), s.norm_eps, d);
    else layer_norm(d, rows, h, w_.out_norm.data(), w_.out_norm_bias.data(), s.norm_eps, d);
  }
  const std::int64_t rows = static_cast<std::int64_t>(last.size()) / h;
  logits.resize(static_cast<std::size_t>(rows * s.vocab));
  cpu::matmul({last.data(), rows, &w_.output_matrix(), logits.data()}, pool_, matmul_scratch_);
}

std::int64_t Transformer::prompt_rows() const {
  return static_cast<std::int64_t>(kept_.size()) / w_.spec.hidden;
}

void Transformer::prompt_logits(std::int64_t first, std::int64_t count, std::vector<float>& out) {
  if (first < 0 || count < 0 || first + count > prompt_rows())
    throw std::out_of_range("transformer: prompt rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                            ") asked, " + std::to_string(prompt_rows()) + " kept");
  out.resize(static_cast<std::size_t>(count * w_.spec.vocab));
  if (count == 0) return;
  cpu::matmul({kept_.data() + first * w_.spec.hidden, count, &w_.output_matrix(), out.data()}, pool_, matmul_scratch_);
}

void Transformer::attention_block(std::int32_t layer, std::span<const ForwardSeq> seqs,
                                  KvCache& cache, const float* normed, float* out) {
  const model::Architecture& s = w_.spec;
  const model::RankShard& p = w_.heads;
  const LayerWeights& l = w_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t hd = s.head_dim;
  const std::int64_t q_heads = p.q_heads, kv_heads = p.kv_heads;
  const std::int64_t qkv_width = (q_heads + 2 * kv_heads) * hd;
  qkv_.resize(static_cast<std::size_t>(tokens_ * qkv_width));
  matmul(normed, l.wqkv, qkv_.data());

  const RopeParams rope{static_cast<std::int32_t>(hd), s.rope_theta, s.rope_linear_factor, w_.layout.rope_style};
  over_rows(pool_, tokens_, [&](std::int64_t r0, std::int64_t r1) {
    apply_rope(qkv_.data() + r0 * qkv_width, r1 - r0, qkv_width, static_cast<std::int32_t>(q_heads + kv_heads),
               std::span<const std::int32_t>(positions_).subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(r1 - r0)), rope);
  });

  attn_.resize(static_cast<std::size_t>(tokens_ * q_heads * hd));
  const KvPlaneView kp = cache.k(layer), vp = cache.v(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Every sequence's K and V first (write_kv checks each table covers its positions, as the
  // attention's own check does), then the attention.
  seq_rows_.resize(seqs.size());
  std::int64_t row = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const auto& q = seqs[i];
    const auto n = static_cast<std::uint32_t>(q.tokens.size());
    const float* base = qkv_.data() + row * qkv_width;
    write_kv(kp, vp, q.block_table, q.first_position, n, base + q_heads * hd,
             base + (q_heads + kv_heads) * hd, qkv_width);
    seq_rows_[i] = row;
    row += n;
  }
  const auto attend = [&](std::size_t i, ThreadPool* pool) {
    const auto& q = seqs[i];
    paged_attention(kp, vp, q.block_table, q.first_position, static_cast<std::uint32_t>(q.tokens.size()),
                    qkv_.data() + seq_rows_[i] * qkv_width, qkv_width, static_cast<std::int32_t>(q_heads), scale,
                    attn_.data() + seq_rows_[i] * q_heads * hd, pool);
  };
  // Decode rows (few query rows each) of many sequences: one sequence per range of the pool,
  // each attending on one thread, instead of two pool dispatches per sequence for a handful of
  // split-K items (64 sequences made 3,840 dispatches per decode step). Longer ones spread their
  // items over the pool. A row's bits are the same either way (paged_attention.hpp).
  few_.clear();
  for (std::size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].tokens.size() <= few_rows_max) few_.push_back(i);
  const bool batch_few = static_cast<std::int64_t>(few_.size()) >= 2 * pool_.size();
  if (batch_few) {
    std::exception_ptr failure;
    std::mutex failure_mutex;
    pool_.parallel_for(static_cast<std::int64_t>(few_.size()), 1, [&](std::int64_t b, std::int64_t e) {
      try {
        for (std::int64_t k = b; k < e; ++k) attend(few_[static_cast<std::size_t>(k)], nullptr);
      } catch (...) {  // workers must not throw: the first failure is rethrown below
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }, 16);
    if (failure) std::rethrow_exception(failure);
  }
  for (std::size_t i = 0; i < seqs.size(); ++i)
    if (!batch_few || seqs[i].tokens.size() > few_rows_max) attend(i, &pool_);
  matmul(attn_.data(), l.wo, out);
}

void Transformer::mlp_block(const LayerWeights& l, const float* normed, float* out) {
  const model::Architecture& s = w_.spec;
  const std::int64_t f = w_.heads.ffn_columns;
  if (s.family == Family::llama) {
    up_.resize(static_cast<std::size_t>(tokens_ * 2 * f));
    matmul(normed, l.w_up, up_.data());
    act_.resize(static_cast<std::size_t>(tokens_ * f));
    over_rows(pool_, tokens_, [&](std::int64_t r0, std::int64_t r1) {
      silu_mul(up_.data() + r0 * 2 * f, r1 - r0, f, act_.data() + r0 * f);
    });
  } else {
    act_.resize(static_cast<std::size_t>(tokens_ * f));
    matmul(normed, l.w_up, act_.data());
    over_rows(pool_, tokens_, [&](std::int64_t r0, std::int64_t r1) { gelu(act_.data() + r0 * f, (r1 - r0) * f); });
  }
  matmul(act_.data(), l.w_down, out);
}

}  // namespace actorlm::kernels::cpu
