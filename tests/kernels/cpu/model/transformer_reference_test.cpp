// The cpu forward against HF transformers: tiny random Llama and Falcon models (both Falcon
// designs) in safetensors (F32, BF16, sharded) and GGUF (F32, F16, Q8_0, Q4_0, Q4_1), whose
// reference logits and greedy continuations were computed by transformers on the same weights
// (for GGUF: the dequantized weights), with the weights kept as stored and dequantized at load
// (WeightStorage), over an f32 and an f16 KV cache. Also: chunked prefill equals one-shot prefill, and
// decoding token by token equals the prompt's logits row by row.
#define BOOST_TEST_MODULE transformer_reference
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/support/nan_max.hpp"

#include "tests/kernels/cpu/model/model_fixture.hpp"

#include <cmath>

using namespace actorlm;
using namespace actorlm::kernels::cpu;
using actorlm::testing::fixture;

namespace actorlm::kernels::cpu {
std::ostream& operator<<(std::ostream& o, WeightStorage s) { return o << (s == WeightStorage::f32 ? "f32" : "stored"); }
std::ostream& operator<<(std::ostream& o, KvDtype d) { return o << to_string(d); }
}  // namespace actorlm::kernels::cpu

namespace {

struct Case {
  const char* model;      // file or folder under fixtures/
  const char* reference;  // its transformers reference
  model::Family family;
  bool tied, two_norms;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.model; }

const Case cases[] = {
    {"llama", "llama.reference.json", model::Family::llama, false, false},
    {"llama-sharded", "llama.reference.json", model::Family::llama, false, false},
    {"llama-bf16", "llama-bf16.reference.json", model::Family::llama, false, false},
    {"llama.gguf", "llama-f16.reference.json", model::Family::llama, false, false},
    {"llama-q8_0.gguf", "llama-q8_0.reference.json", model::Family::llama, false, false},
    {"llama-q4_0.gguf", "llama-q4_0.reference.json", model::Family::llama, false, false},
    {"llama-q4_1.gguf", "llama-q4_1.reference.json", model::Family::llama, false, false},
    {"llama-tied", "llama-tied.reference.json", model::Family::llama, true, false},
    {"llama-tied.gguf", "llama-tied.reference.json", model::Family::llama, true, false},
    {"falcon-7b-style", "falcon-7b-style.reference.json", model::Family::falcon, true, false},
    {"falcon-7b-style.gguf", "falcon-7b-style.reference.json", model::Family::falcon, true, false},
    {"falcon-40b-style", "falcon-40b-style.reference.json", model::Family::falcon, false, true},
    {"falcon-40b-style.gguf", "falcon-40b-style.reference.json", model::Family::falcon, false, true},
    {"falcon-40b-style-f16.gguf", "falcon-40b-style-f16.reference.json", model::Family::falcon, false, true},
};

constexpr std::uint32_t block_size = 4;
constexpr std::uint32_t num_blocks = 64;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = actorlm::testing::nan_max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

// Runs the prompt in chunks of `chunk` tokens; returns the logits of every prompt position.
std::vector<std::vector<float>> run_prompt(Transformer& t, KvCache& cache,
                                           const std::vector<std::int32_t>& prompt,
                                           const std::vector<std::uint32_t>& table, std::uint32_t chunk) {
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  const auto vocab = static_cast<std::size_t>(t.weights().spec.vocab);
  for (std::uint32_t first = 0; first < prompt.size(); first += chunk) {
    const auto n = std::min<std::size_t>(chunk, prompt.size() - first);
    ForwardSeq s{{prompt.data() + first, n}, first, table, true, true};
    t.forward({&s, 1}, cache, true, logits);
    // The sampling row, then every row of the chunk (kept for prompt log-probabilities).
    BOOST_REQUIRE_EQUAL(logits.size(), vocab);
    const std::vector<float> last = logits;
    BOOST_REQUIRE_EQUAL(t.prompt_rows(), static_cast<std::int64_t>(n));
    t.prompt_logits(0, static_cast<std::int64_t>(n), logits);
    BOOST_REQUIRE_EQUAL(logits.size(), n * vocab);
    // The same hidden state through GEMMs of other shapes: equal up to their rounding.
    const std::vector<float> kept_last(logits.end() - static_cast<std::ptrdiff_t>(vocab), logits.end());
    BOOST_TEST(max_abs_diff(last, kept_last) < 1e-4);
    for (std::size_t r = 0; r < n; ++r) rows.emplace_back(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
  }
  return rows;
}

std::int32_t argmax(const std::vector<float>& v) {
  return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

double top2_margin(std::vector<float> v) {
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<>());
  return double(v[0]) - double(v[1]);
}

const WeightStorage storages[] = {WeightStorage::stored, WeightStorage::f32};
const KvDtype kv_dtypes[] = {KvDtype::f32, KvDtype::f16};

// Float weights (and float activations): rounding only, 5e-5. Integer weight types in their
// stored form multiply 16-bit activations (quant_dot.hpp), each off by up to max|x| / 65534 in
// its block of 32; through two layers of these 64-wide random models that moved logits (spanning
// about 12) by 1.0e-3 (Q8_0), 0.93e-3 (Q4_0) and 0.92e-3 (Q4_1) when measured; the bound is 5e-3.
// (8-bit activations, llama.cpp's choice, moved them by 0.21 to 0.30.)
// An f16 KV cache rounds every K and V to 11 significant bits (relative error <= 2^-11 =
// 4.9e-4 each; paged_attention_test.cpp bounds what that does to one attention). Through these
// models it moved the logits by 2.3e-3 (Falcon) to 8.1e-3 (Llama) over the f32 cache's, 1.0e-2
// at most with Q8_0's own error on top, measured on every fixture and both weight paths; the
// f16 term is 2e-2, twice the worst. With it top-1 agrees with transformers at every reference
// position (checked below), and every greedy continuation measured was transformers' whole.
double logit_tolerance(const ModelWeights& w, KvDtype kv) {
  const auto integer = [](const WeightMatrix& m) { return is_integer_type(m.dtype); };
  bool any = integer(w.embed) || integer(w.lm_head);
  for (const auto& l : w.layers) any = any || integer(l.wqkv) || integer(l.wo) || integer(l.w_up) || integer(l.w_down);
  return (any ? 5e-3 : 5e-5) + (kv == KvDtype::f16 ? 2e-2 : 0.0);
}

}  // namespace

BOOST_DATA_TEST_CASE(logits_and_greedy_tokens_match_transformers,
                     boost::unit_test::data::make(cases) * boost::unit_test::data::make(storages) *
                         boost::unit_test::data::make(kv_dtypes),
                     c, storage, kv) {
  auto m = actorlm::testing::load_model(c.model, 0, 1, storage);
  BOOST_TEST((m.spec.family == c.family));
  BOOST_TEST(m.spec.tied_embeddings == c.tied);
  BOOST_TEST(m.spec.two_norms() == c.two_norms);
  const auto ref = actorlm::testing::load_reference(c.reference);
  const double tolerance = logit_tolerance(m.weights, kv);

  Transformer t(m.weights);
  KvCache cache(m.spec, m.weights.heads, block_size, num_blocks, 0, kv);
  const std::uint32_t total = static_cast<std::uint32_t>(ref.prompt.size() + ref.greedy.size());
  const auto table = actorlm::testing::shuffled_table(num_blocks, block_size, total, 7);
  const auto rows = run_prompt(t, cache, ref.prompt, table, static_cast<std::uint32_t>(ref.prompt.size()));
  BOOST_REQUIRE_EQUAL(rows.size(), ref.logits.size());
  double worst = 0;
  std::size_t top1_differs = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    worst = actorlm::testing::nan_max(worst, max_abs_diff(rows[i], ref.logits[i]));
    if (argmax(rows[i]) != argmax(ref.logits[i])) {
      ++top1_differs;
      // Only where transformers' own top two are closer than the tolerance: a near tie.
      BOOST_TEST(top2_margin(ref.logits[i]) < tolerance, "top-1 differs at prompt position " << i);
    }
  }
  BOOST_TEST_MESSAGE(c.model << " (" << storage << ", " << kv << " KV): max |logit - transformers| = " << worst
                             << ", top-1 differs at " << top1_differs << " of " << rows.size() << " positions");
  BOOST_TEST(worst < tolerance);
  if (kv == KvDtype::f16) BOOST_TEST(top1_differs == 0u, "the f16 cache keeps top-1 at every reference position");

  // Greedy decoding, one token per step, through the paged cache: the same tokens as
  // transformers up to a step where its top two were within the tolerance (after a near tie
  // either choice is right, and the continuations part).
  std::vector<std::int32_t> out{argmax(rows.back())};
  std::vector<float> logits;
  while (out.size() < ref.greedy.size() && out.back() == ref.greedy[out.size() - 1]) {
    const std::int32_t tok = out.back();
    const auto pos = static_cast<std::uint32_t>(ref.prompt.size() + out.size() - 1);
    ForwardSeq s{{&tok, 1}, pos, table, true, false};
    t.forward({&s, 1}, cache, true, logits);
    out.push_back(argmax(logits));
  }
  const std::size_t last = out.size() - 1;
  if (out[last] != ref.greedy[last]) {
    BOOST_TEST_MESSAGE(c.model << " (" << storage << ", " << kv << " KV): greedy parts from transformers at step " << last
                               << ", where its top-2 margin is " << ref.margins.at(last));
    BOOST_TEST(ref.margins.at(last) < tolerance, "greedy token " << last << " differs");
  } else {
    BOOST_TEST(out.size() == ref.greedy.size());
  }
}

BOOST_DATA_TEST_CASE(chunked_prefill_equals_one_shot_prefill,
                     boost::unit_test::data::make({1u, 3u, 5u, 8u}) * boost::unit_test::data::make(kv_dtypes), chunk, kv) {
  // Float weights: BLAS GEMMs round differently for other shapes, 1e-4; with an f16 cache such a
  // difference can carry a K or V across an f16 rounding boundary, one f16 unit (2^-10 of it):
  // measured 2.3e-4 (Falcon) and 4.1e-4 (Llama), bound 1e-3. Q4_1 weights as stored: the kernels
  // and attention compute each row on its own (quant_dot.hpp, paged_attention.hpp), so the same
  // bits, and the same f16 in the cache.
  struct Model {
    const char* name;
    const char* reference;
    double tolerance;
  };
  const double float_weights = kv == KvDtype::f16 ? 1e-3 : 1e-4;
  const Model models[] = {{"llama", "llama.reference.json", float_weights},
                          {"falcon-40b-style", "falcon-40b-style.reference.json", float_weights},
                          {"llama-q4_1.gguf", "llama-q4_1.reference.json", 0.0}};
  for (const auto& [name, reference, tolerance] : models) {
    auto m = actorlm::testing::load_model(name);
    const auto ref = actorlm::testing::load_reference(reference);
    Transformer t(m.weights);
    KvCache a(m.spec, m.weights.heads, block_size, num_blocks, 0, kv), b(m.spec, m.weights.heads, block_size, num_blocks, 0, kv);
    const auto table = actorlm::testing::shuffled_table(num_blocks, block_size, 24, chunk);
    const auto whole = run_prompt(t, a, ref.prompt, table, 24);
    const auto chunked = run_prompt(t, b, ref.prompt, table, chunk);
    double worst = 0;
    for (std::size_t i = 0; i < whole.size(); ++i) worst = actorlm::testing::nan_max(worst, max_abs_diff(whole[i], chunked[i]));
    BOOST_TEST_MESSAGE(name << " chunk " << chunk << " " << kv << " KV: max diff " << worst);
    BOOST_TEST(worst <= tolerance);
  }
}

// Many decode rows in one step attend one sequence per thread (transformer.cpp), a longer chunk
// beside them over the pool's split-K items; Q4_1 weights as stored compute each row on its own,
// so every sequence's logits are the bits it gets in a step alone.
BOOST_DATA_TEST_CASE(a_step_of_many_sequences_gives_each_the_logits_it_gets_alone,
                     boost::unit_test::data::make(kv_dtypes), kv) {
  auto m = actorlm::testing::load_model("llama-q4_1.gguf");
  Transformer t(m.weights, {}, 2);
  KvCache batched(m.spec, m.weights.heads, block_size, num_blocks, 0, kv), alone(m.spec, m.weights.heads, block_size, num_blocks, 0, kv);
  constexpr std::size_t seqs = 7;  // 6 decode rows (>= 2 x the pool's 2 threads) and one 3-token chunk
  std::vector<std::vector<std::uint32_t>> tables(seqs);
  std::vector<std::vector<std::int32_t>> prompts(seqs), next(seqs);
  std::vector<float> logits;
  for (std::size_t i = 0; i < seqs; ++i) {
    for (std::uint32_t b = 0; b < 8; ++b) tables[i].push_back(static_cast<std::uint32_t>(i * 8 + b));
    for (std::size_t j = 0; j < 5 + 2 * i; ++j) prompts[i].push_back(static_cast<std::int32_t>((j * 31 + i * 7) % 200 + 1));
    next[i] = i + 1 < seqs ? std::vector<std::int32_t>{static_cast<std::int32_t>(i + 3)} : std::vector<std::int32_t>{5, 6, 7};
    for (KvCache* c : {&batched, &alone}) {
      ForwardSeq s{prompts[i], 0, tables[i], false, false};
      t.forward({&s, 1}, *c, false, logits);
    }
  }
  std::vector<ForwardSeq> step;
  for (std::size_t i = 0; i < seqs; ++i)
    step.push_back({next[i], static_cast<std::uint32_t>(prompts[i].size()), tables[i], true, false});
  std::vector<float> together;
  t.forward(step, batched, true, together);
  const auto vocab = static_cast<std::size_t>(m.spec.vocab);
  BOOST_TEST(together.size() == seqs * vocab);
  for (std::size_t i = 0; i < seqs; ++i) {
    t.forward({&step[i], 1}, alone, true, logits);
    BOOST_TEST(std::equal(logits.begin(), logits.end(), together.begin() + static_cast<std::ptrdiff_t>(i * vocab)),
               "sequence " << i);
  }
}

BOOST_AUTO_TEST_CASE(parameter_counts_follow_the_architecture) {
  for (const char* name : {"llama", "llama-tied", "falcon-7b-style", "falcon-40b-style"}) {
    auto m = actorlm::testing::load_model(name);
    std::uint64_t stored = 0;
    for (const auto& info : m.source->tensors()) stored += std::uint64_t(info.numel());
    BOOST_TEST(m.spec.params() == stored, name);
  }
}

// The weights one rank loads are what model/arch's sharding rules (which the simulator's memory
// model also sizes GPUs by) say it holds, for every degree the model splits over.
BOOST_AUTO_TEST_CASE(each_rank_loads_what_the_sharding_rules_say_it_holds) {
  std::uint32_t split_degrees = 0;
  for (const char* name : {"llama.gguf", "falcon-7b-style", "falcon-40b-style"}) {
    auto src = model::open_tensor_source(fixture(name));
    const auto arch = model::read_architecture(*src);
    for (std::uint32_t world : model::shardable_degrees(arch, 4)) {
      split_degrees += world > 1;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        const auto w = load_weights(*src, arch, std::int32_t(rank), std::int32_t(world));
        const auto& l = w.layers.at(0);
        const std::size_t floats = l.attn_norm.size() + l.attn_norm_bias.size() + l.mlp_norm.size() +
                                   l.mlp_norm_bias.size() + l.wqkv.size() + l.wo.size() + l.w_up.size() +
                                   l.w_down.size();
        BOOST_TEST(floats == model::layer_weight_elements(arch, w.heads), name << " rank " << rank << "/" << world);
        BOOST_TEST(KvCache::bytes_per_block(arch, w.heads, 16) ==
                   2u * arch.layers * w.heads.kv_heads * 16u * arch.head_dim * sizeof(float));
      }
    }
  }
  BOOST_TEST(split_degrees > 0u);  // some fixture splits, or the loop above checked only whole models
}

// Split by vocabulary rows (the cuda backend's layout under tensor parallelism), each rank holds
// ceil(vocab / world) consecutive rows of the embedding and of the LM head (the last rank the
// rest), equal to those rows of the whole model's, and together the ranks hold every row once.
// A tied model (llama-tied, falcon-7b-style) projects with its embedding, so its ranks hold no
// separate LM head.
BOOST_AUTO_TEST_CASE(a_vocabulary_parallel_rank_holds_its_rows_of_the_embedding_and_the_lm_head) {
  std::uint32_t split_degrees = 0, tied_models = 0;
  for (const char* name : {"llama.gguf", "llama-tied.gguf", "falcon-7b-style.gguf", "falcon-40b-style.gguf"}) {
    auto src = model::open_tensor_source(fixture(name));
    const auto arch = model::read_architecture(*src);
    const auto whole = load_weights(*src, arch);
    const bool tied = whole.lm_head.empty();
    tied_models += tied;
    for (std::uint32_t world : model::shardable_degrees(arch, 4)) {
      split_degrees += world > 1;
      std::int64_t next = 0;  // the first row no rank has held yet
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        const auto w = load_weights(*src, arch, std::int32_t(rank), std::int32_t(world), WeightStorage::stored, 0, 1,
                                    /*vocab_parallel=*/true);
        const std::string what = std::string(name) + " rank " + std::to_string(rank) + "/" + std::to_string(world);
        const std::int64_t per_rank = (std::int64_t(arch.vocab) + world - 1) / world;
        BOOST_TEST(w.vocab_parallel == (world > 1), what);  // one rank holds it all anyway
        BOOST_TEST(w.computes_logits(), what);
        BOOST_TEST(w.samples() == (rank == 0), what);
        BOOST_TEST(w.heads.vocab_rows == std::uint32_t(per_rank), what);
        BOOST_TEST(w.vocab_first == next, what);
        const std::int64_t rows = std::min(per_rank, std::int64_t(arch.vocab) - w.vocab_first);
        BOOST_TEST(w.embed.rows == rows, what);
        BOOST_TEST(w.lm_head.empty() == tied, what);
        if (!tied) BOOST_TEST(w.lm_head.rows == rows, what);
        std::vector<float> mine(arch.hidden), theirs(arch.hidden);
        for (std::int64_t r = 0; r < rows; ++r) {
          w.embed.dequantize_row(r, mine);
          whole.embed.dequantize_row(w.vocab_first + r, theirs);
          BOOST_TEST(mine == theirs, what << " embedding row " << w.vocab_first + r);
          if (tied) continue;
          w.lm_head.dequantize_row(r, mine);
          whole.lm_head.dequantize_row(w.vocab_first + r, theirs);
          BOOST_TEST(mine == theirs, what << " LM head row " << w.vocab_first + r);
        }
        next = w.vocab_first + rows;
      }
      BOOST_TEST(next == std::int64_t(arch.vocab), name << " over " << world);
    }
  }
  BOOST_TEST(split_degrees > 0u);
  BOOST_TEST(tied_models == 2u);  // both kinds of model were checked
}

BOOST_AUTO_TEST_CASE(a_missing_tensor_is_named_in_the_error) {
  auto src = model::open_tensor_source(fixture("llama.gguf"));
  auto spec = model::read_architecture(*src);
  spec.layers += 1;  // asks for blk.2.*, which the file does not have
  BOOST_CHECK_EXCEPTION(load_weights(*src, spec), model::ModelFileError, [](const auto& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    return what.find("blk.2.attn_norm.weight") != std::string::npos && what.find("llama.gguf") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(a_token_outside_the_vocabulary_is_rejected) {
  auto m = actorlm::testing::load_model("llama.gguf");
  Transformer t(m.weights);
  KvCache cache(m.spec, m.weights.heads, block_size, 4, 0);
  const auto bad = static_cast<std::int32_t>(m.spec.vocab);
  const std::vector<std::uint32_t> table{0};
  ForwardSeq s{{&bad, 1}, 0, table, true, false};
  std::vector<float> logits;
  BOOST_CHECK_THROW(t.forward({&s, 1}, cache, true, logits), std::out_of_range);
}
