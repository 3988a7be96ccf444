// The cpu backend through the real engine (scheduler, block manager, detached shard actors) on
// tiny fixture models: batching, chunked prefill, preemption by recompute or swap, and tensor
// parallelism over Gloo must not change greedy outputs, nor a layer split (stages handing hidden
// states over Gloo) greedy or seeded ones, with the KV cache in f16 or f32; n = 2 shares the
// prompt's blocks; an f16 cache holds twice the blocks of an f32 one, and each of two stages
// twice the blocks of one rank holding every layer.
#define BOOST_TEST_MODULE cpu_engine
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "actors/engine/completions.hpp"
#include "actors/serving/served_model.hpp"
#include "tests/support/random_prompts.hpp"
#include "actors/shard/cpu/cpu_backend.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <random>

namespace actorlm::config {
std::ostream& operator<<(std::ostream& o, Preemption p) { return o << to_string(p); }
std::ostream& operator<<(std::ostream& o, CacheDtype d) { return o << to_string(d); }
}  // namespace actorlm::config

using namespace actorlm;
using scheduler::TokenId;

namespace {

std::string fixture(const std::string& name) { return std::string(ACTORLM_MODEL_FIXTURES) + "/" + name; }

const config::CacheDtype kv_dtypes[] = {config::CacheDtype::f16, config::CacheDtype::f32};

config::Config base_config(const std::string& model, config::CacheDtype kv = config::CacheDtype::f16) {
  config::Config c;
  c.cache.dtype = kv;
  c.engine.backend = config::Backend::cpu;
  c.model.path = fixture(model);
  c.model.max_model_len = 128;
  c.cache.block_size = 4;
  c.cache.num_gpu_blocks_override = 256;
  c.cache.swap_space = 0.01;
  c.scheduler.max_num_seqs = 32;
  c.scheduler.max_num_batched_tokens = 512;
  return c;
}

struct RunOptions {
  bool concurrent = true;
  std::uint32_t n = 1;
  float temperature = 0.0f;
  std::uint64_t seed = 0;
};

// Every prompt's samples, submitted all at once or one after another.
std::vector<std::vector<std::vector<TokenId>>> generate(const config::Config& cfg,
                                                        const std::vector<std::vector<TokenId>>& ps,
                                                        std::uint32_t max_tokens, RunOptions o = {},
                                                        scheduler::EngineStats* stats = nullptr,
                                                        std::uint32_t* peak_blocks = nullptr) {
  caf::actor_system_config sc;
  serving::register_engine_types(sc);
  caf::actor_system sys{sc};
  auto backend = shard::load_cpu_backend(cfg);
  engine::Engine eng(sys, cfg, backend.capacity, backend.factory);
  engine::Completions done(sys, o.n);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    scheduler::RequestSpec s;
    s.id = i + 1;
    s.prompt = ps[i];
    s.max_tokens = max_tokens;
    s.n = o.n;
    s.sampling.temperature = o.temperature;
    s.sampling.seed = o.seed;
    BOOST_REQUIRE((eng.submit(std::move(s), done.sink()) == scheduler::SubmitStatus::accepted));
    if (!o.concurrent) BOOST_REQUIRE(done.wait_finished(i + 1, std::chrono::seconds(120)));
  }
  BOOST_REQUIRE(done.wait_finished(ps.size(), std::chrono::seconds(300)));
  if (stats) *stats = eng.stats();
  if (peak_blocks)
    for (const auto& r : eng.take_step_records()) *peak_blocks = std::max(*peak_blocks, r.kv_used_blocks);
  auto got = done.take();
  std::vector<std::vector<std::vector<TokenId>>> out;
  for (std::size_t i = 0; i < ps.size(); ++i) out.push_back(got.at(i + 1).samples);
  return out;
}

}  // namespace

BOOST_DATA_TEST_CASE(batched_greedy_outputs_equal_each_request_run_alone, boost::unit_test::data::make(kv_dtypes), kv) {
  const auto cfg = base_config("llama.gguf", kv);
  const auto ps = testing::random_prompts(12, 256, 1);
  const auto alone = generate(cfg, ps, 12, {.concurrent = false});
  const auto batched = generate(cfg, ps, 12);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    BOOST_TEST(alone[i].at(0).size() == 12u);
    BOOST_TEST(batched[i].at(0) == alone[i].at(0), boost::test_tools::per_element());
  }
}

BOOST_DATA_TEST_CASE(chunked_prefill_through_the_engine_keeps_the_outputs, boost::unit_test::data::make(kv_dtypes), kv) {
  auto cfg = base_config("falcon-40b-style.gguf", kv);
  const auto ps = testing::random_prompts(8, 256, 2);
  const auto alone = generate(cfg, ps, 8, {.concurrent = false});
  cfg.scheduler.chunked_prefill = true;
  cfg.scheduler.max_num_batched_tokens = 8;
  cfg.scheduler.max_num_seqs = 4;
  const auto chunked = generate(cfg, ps, 8);
  for (std::size_t i = 0; i < ps.size(); ++i) BOOST_TEST(chunked[i].at(0) == alone[i].at(0), boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(preempted_requests_resume_with_the_same_tokens,
                     boost::unit_test::data::make({config::Preemption::recompute, config::Preemption::swap}) *
                         boost::unit_test::data::make(kv_dtypes),
                     mode, kv) {
  auto cfg = base_config("llama.gguf", kv);
  const auto ps = testing::random_prompts(10, 256, 3);
  const auto alone = generate(cfg, ps, 24, {.concurrent = false});
  cfg.cache.num_gpu_blocks_override = 24;  // 96 token slots for 10 requests of up to 46 tokens
  cfg.model.max_model_len = 64;
  cfg.scheduler.preemption = mode;
  cfg.cache.prefix_caching = false;
  scheduler::EngineStats st;
  const auto tight = generate(cfg, ps, 24, {}, &st);
  BOOST_TEST_MESSAGE("preemptions: " << st.counts.preemptions);
  BOOST_TEST(st.counts.preemptions > 0u);
  if (mode == config::Preemption::swap) BOOST_TEST(st.counts.swap_outs == st.counts.preemptions);
  else BOOST_TEST(st.counts.swap_outs == 0u);
  for (std::size_t i = 0; i < ps.size(); ++i) BOOST_TEST(tight[i].at(0) == alone[i].at(0), boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(tensor_parallel_two_equals_one,
                     boost::unit_test::data::make({"llama.gguf", "falcon-7b-style", "falcon-40b-style.gguf"}) *
                         boost::unit_test::data::make(kv_dtypes),
                     model, kv) {
  auto cfg = base_config(model, kv);
  const auto ps = testing::random_prompts(6, 256, 4);
  const auto one = generate(cfg, ps, 10);
  cfg.engine.tensor_parallel_degree = 2;
  const auto two = generate(cfg, ps, 10);
  for (std::size_t i = 0; i < ps.size(); ++i) BOOST_TEST(two[i].at(0) == one[i].at(0), boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(a_layer_split_over_two_stages_gives_exactly_the_tokens_of_one_rank,
                     boost::unit_test::data::make({"llama.gguf", "llama-tied.gguf", "falcon-7b-style",
                                                   "falcon-40b-style.gguf"}) *
                         boost::unit_test::data::make(kv_dtypes),
                     model, kv) {
  auto cfg = base_config(model, kv);
  const auto ps = testing::random_prompts(6, 256, 5);
  const RunOptions seeded{.temperature = 0.9f, .seed = 11};
  const auto greedy_one = generate(cfg, ps, 10);
  const auto seeded_one = generate(cfg, ps, 10, seeded);
  cfg.engine.pipeline_parallel_degree = 2;
  const auto backend = shard::load_cpu_backend(cfg);
  BOOST_TEST(backend.capacity.answering_rank == 1u);  // the last stage samples
  const auto greedy_two = generate(cfg, ps, 10);
  const auto seeded_two = generate(cfg, ps, 10, seeded);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    BOOST_TEST(greedy_two[i].at(0) == greedy_one[i].at(0), boost::test_tools::per_element());
    BOOST_TEST(seeded_two[i].at(0) == seeded_one[i].at(0), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(each_stage_of_a_two_stage_split_holds_twice_the_blocks_in_the_same_space) {
  auto cfg = base_config("llama.gguf");  // 2 layers: one per stage
  cfg.cache.num_gpu_blocks_override = 0;
  cfg.cache.cpu_kv_space = 0.01;  // GiB
  const auto one = shard::load_cpu_backend(cfg);
  cfg.engine.pipeline_parallel_degree = 2;
  const auto two = shard::load_cpu_backend(cfg);
  BOOST_TEST(two.block_bytes * 2 == one.block_bytes);
  BOOST_TEST(two.capacity.device_blocks / 2 == one.capacity.device_blocks);
}

BOOST_DATA_TEST_CASE(two_stages_of_tensor_parallel_two_give_the_tokens_of_tensor_parallel_two,
                     boost::unit_test::data::make({"llama.gguf", "llama-tied.gguf", "falcon-40b-style.gguf"}), model) {
  // Ranks 0-1 hold layer 0, ranks 2-3 layer 1; each stage all-reduces within itself. The sums
  // are those of tensor parallel 2 in one stage, so the tokens are exactly its.
  auto cfg = base_config(model);
  cfg.engine.tensor_parallel_degree = 2;
  const auto ps = testing::random_prompts(6, 256, 6);
  const RunOptions seeded{.temperature = 0.9f, .seed = 3};
  const auto greedy_tp = generate(cfg, ps, 10), seeded_tp = generate(cfg, ps, 10, seeded);
  cfg.engine.pipeline_parallel_degree = 2;
  BOOST_TEST(shard::load_cpu_backend(cfg).capacity.answering_rank == 2u);  // tensor rank 0 of the last stage
  const auto greedy = generate(cfg, ps, 10), sampled = generate(cfg, ps, 10, seeded);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    BOOST_TEST(greedy[i].at(0) == greedy_tp[i].at(0), boost::test_tools::per_element());
    BOOST_TEST(sampled[i].at(0) == seeded_tp[i].at(0), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(more_stages_than_layers_are_refused) {
  auto cfg = base_config("llama.gguf");
  cfg.engine.pipeline_parallel_degree = 3;
  BOOST_CHECK_EXCEPTION(shard::load_cpu_backend(cfg), std::invalid_argument, [](const auto& e) {
    return std::string(e.what()) == "engine.pipeline_parallel_degree = 3: the model has only 2 layers to split";
  });
}

BOOST_AUTO_TEST_CASE(two_samples_share_the_prompt_blocks_and_differ) {
  auto cfg = base_config("llama.gguf");
  const std::vector<std::vector<TokenId>> ps{std::vector<TokenId>(40, 7)};  // 10 full blocks
  std::uint32_t peak = 0;
  const auto a = generate(cfg, ps, 16, {.n = 2, .temperature = 1.0f, .seed = 11}, nullptr, &peak);
  // Shared: 10 prompt blocks + 4 of 16 new tokens per sample = 18; unshared it would be 28.
  BOOST_TEST_MESSAGE("peak KV blocks in use: " << peak);
  BOOST_TEST(peak <= 18u);
  const auto b = generate(cfg, ps, 16, {.n = 2, .temperature = 1.0f, .seed = 11});
  BOOST_REQUIRE(a[0].size() == 2u);
  BOOST_TEST(a[0][0] != a[0][1]);         // independent samples
  BOOST_TEST(a[0][0] == b[0][0], boost::test_tools::per_element());  // a seed reproduces them
  BOOST_TEST(a[0][1] == b[0][1], boost::test_tools::per_element());
  // Greedy, the two samples are the same sequence.
  const auto g = generate(cfg, ps, 8, {.n = 2});
  BOOST_TEST(g[0][0] == g[0][1], boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_cache_too_small_for_max_model_len_is_refused_with_the_numbers) {
  auto cfg = base_config("llama.gguf");
  cfg.cache.num_gpu_blocks_override = 4;
  BOOST_CHECK_EXCEPTION(shard::load_cpu_backend(cfg), std::invalid_argument, [](const auto& e) {
    const std::string w = e.what();
    BOOST_TEST_MESSAGE(w);
    return w.find("num_gpu_blocks_override = 4 holds 16 tokens") != std::string::npos && w.find("max_model_len = 128") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(an_f16_cache_holds_twice_the_blocks_of_an_f32_one_in_the_same_space) {
  auto cfg = base_config("llama.gguf");
  cfg.cache.num_gpu_blocks_override = 0;
  cfg.cache.cpu_kv_space = 0.01;  // GiB
  const auto f16 = shard::load_cpu_backend(cfg);
  cfg.cache.dtype = config::CacheDtype::f32;
  const auto f32 = shard::load_cpu_backend(cfg);
  BOOST_TEST_MESSAGE("blocks in 0.01 GiB: f16 " << f16.capacity.device_blocks << ", f32 " << f32.capacity.device_blocks);
  BOOST_TEST(f16.block_bytes * 2 == f32.block_bytes);
  // floor(2x) is 2 floor(x) or one more: the f16 cache holds twice the blocks, to the block.
  BOOST_TEST(f16.capacity.device_blocks / 2 == f32.capacity.device_blocks);
  BOOST_TEST(f16.capacity.host_blocks / 2 == f32.capacity.host_blocks);
  BOOST_TEST(f32.capacity.device_blocks > 0u);
}

BOOST_AUTO_TEST_CASE(an_indivisible_tensor_parallel_degree_is_refused) {
  auto cfg = base_config("llama.gguf");  // 4 heads
  cfg.engine.tensor_parallel_degree = 8;
  BOOST_CHECK_THROW(shard::load_cpu_backend(cfg), std::invalid_argument);
}
