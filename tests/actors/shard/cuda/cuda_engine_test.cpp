// The cuda backend through the real engine (scheduler, block manager, its detached shard actors,
// the memory plan from the device's memory) against the cpu backend through the same engine, on
// the default model (SmolLM2-135M-Instruct; the fixture models' head_dim 16 is not one the
// attention kernels serve) with f32 weights and an f32 KV cache: the greedy tokens must be the
// same, batched, with chunked prefill, and under preemption by swapping to host blocks, and so
// must the prompt's log-probabilities (prompt_logprobs, echo with logprobs); and
// tensor parallelism 3 over NCCL (its 9 heads and 3 KV heads split 3 ways), when three devices
// are visible, the same as one cuda rank. Built twice: on a GPU (label gpu; exits 77 without one) and on tools/cuda_emu (label
// cuda_emu, three emulated devices).
#define BOOST_TEST_MODULE cuda_engine
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "actors/engine/completions.hpp"
#include "actors/serving/backend.hpp"
#include "actors/serving/served_model.hpp"
#ifdef ACTORLM_CUDA_EMU
#include "tools/cuda_emu/host.hpp"
#endif
#include "tests/support/random_prompts.hpp"
#include "tests/support/gpu_test_main.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <filesystem>
#include <random>
#include <string>

using namespace actorlm;
using scheduler::TokenId;

namespace {

std::string default_model_path() {
  if (const char* dir = std::getenv("ACTORLM_MODELS_DIR")) return std::string(dir) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  return ACTORLM_DEFAULT_MODEL;
}

config::Config base_config(config::Backend backend) {
  config::Config c;
  c.engine.backend = backend;
  c.model.path = default_model_path();
  c.model.weights = config::CpuWeights::f32;
  c.cache.dtype = config::CacheDtype::f32;
  c.model.max_model_len = 128;
  c.cache.block_size = 4;
  c.cache.swap_space = 0.01;
  c.scheduler.max_num_seqs = 32;
  c.scheduler.max_num_batched_tokens = 512;
  return c;
}

// Every prompt's greedy tokens, submitted at once; the engine's stats beside; with
// `prompt_scores`, each request asks for its prompt's log-probabilities (top 2), which land there
// by request.
std::vector<std::vector<TokenId>> generate(const config::Config& cfg, const std::vector<std::vector<TokenId>>& ps,
                                           std::uint32_t max_tokens, scheduler::EngineStats* stats = nullptr,
                                           std::uint32_t* device_blocks = nullptr,
                                           std::map<scheduler::RequestId, std::vector<shard::PromptLogprob>>* prompt_scores = nullptr) {
  caf::actor_system_config sc;
  serving::register_engine_types(sc);
  caf::actor_system sys{sc};
  auto backend = serving::load_backend(cfg);
  if (device_blocks) *device_blocks = backend.capacity.device_blocks;
  engine::Engine eng(sys, cfg, backend.capacity, backend.factory);
  std::mutex mu;
  engine::Completions done(sys, 1, [&](const scheduler::TokenEvent& e) {
    if (!prompt_scores || e.prompt_logprobs.empty()) return;
    std::lock_guard lock(mu);
    (*prompt_scores)[e.request] = e.prompt_logprobs;
  });
  for (std::size_t i = 0; i < ps.size(); ++i) {
    scheduler::RequestSpec s;
    s.id = i + 1;
    s.prompt = ps[i];
    s.max_tokens = max_tokens;
    s.sampling.temperature = 0.0f;
    if (prompt_scores) s.sampling.prompt_logprobs = 2;
    BOOST_REQUIRE((eng.submit(std::move(s), done.sink()) == scheduler::SubmitStatus::accepted));
  }
  BOOST_REQUIRE(done.wait_finished(ps.size(), std::chrono::seconds(600)));
  if (stats) *stats = eng.stats();
  auto got = done.take();
  std::vector<std::vector<TokenId>> out;
  for (std::size_t i = 0; i < ps.size(); ++i) out.push_back(got.at(i + 1).samples.at(0));
  return out;
}

void expect_same(const std::vector<std::vector<TokenId>>& got, const std::vector<std::vector<TokenId>>& want,
                 std::uint32_t max_tokens) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(want[i].size() == max_tokens);
    BOOST_TEST(got[i] == want[i], boost::test_tools::per_element());
  }
}

constexpr std::uint32_t vocab = 49152;

boost::test_tools::assertion_result three_devices(boost::unit_test::test_unit_id) {
  int n = 0;
  boost::test_tools::assertion_result r(cudaGetDeviceCount(&n) == cudaSuccess && n >= 3);
  r.message() << "tensor parallelism 3 over NCCL needs three devices, " << n << " visible";
  return r;
}

boost::test_tools::assertion_result model_present(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(std::filesystem::exists(default_model_path()));
  r.message() << "the default model is not at " << default_model_path() << " (set ACTORLM_MODELS_DIR)";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_cuda_engine_gives_the_cpu_engines_greedy_tokens, *boost::unit_test::precondition(model_present)) {
  const auto ps = testing::random_prompts(8, vocab, 1);
  const auto want = generate(base_config(config::Backend::cpu), ps, 10);
  // No block-count override: the KV cache is what the memory plan leaves of the device.
  std::uint32_t blocks = 0;
  const auto got = generate(base_config(config::Backend::cuda), ps, 10, nullptr, &blocks);
  BOOST_TEST_MESSAGE(blocks << " KV blocks planned");
  BOOST_TEST(blocks > 0u);
  expect_same(got, want, 10);
}

BOOST_AUTO_TEST_CASE(chunked_prefill_and_swapping_to_host_blocks_keep_the_tokens,
                     *boost::unit_test::precondition(model_present)) {
  const auto ps = testing::random_prompts(10, vocab, 3);
  auto cfg = base_config(config::Backend::cuda);
  cfg.cache.num_gpu_blocks_override = 256;
  const auto want = generate(base_config(config::Backend::cpu), ps, 24);
  auto chunked = cfg;
  chunked.scheduler.chunked_prefill = true;
  chunked.scheduler.max_num_batched_tokens = 8;
  chunked.scheduler.max_num_seqs = 4;
  expect_same(generate(chunked, ps, 24), want, 24);
  auto tight = cfg;
  tight.cache.num_gpu_blocks_override = 24;  // 96 token slots for 10 requests of up to 46 tokens
  tight.model.max_model_len = 64;
  tight.scheduler.preemption = config::Preemption::swap;
  tight.cache.prefix_caching = false;
  scheduler::EngineStats st;
  expect_same(generate(tight, ps, 24, &st), want, 24);
  BOOST_TEST_MESSAGE("swap-outs: " << st.counts.swap_outs);
  BOOST_TEST(st.counts.swap_outs > 0u);
  // The same with the decode steps as CUDA graphs: a step that swaps sequences back in waits for
  // all of its swaps (on the cache's own stream) before its graph.
  tight.engine.cuda_graphs = true;
#ifdef ACTORLM_CUDA_EMU
  const auto graphs_before = cuda_emu::counts().graph_launches;
#endif
  expect_same(generate(tight, ps, 24, &st), want, 24);
  BOOST_TEST(st.counts.swap_outs > 0u);
#ifdef ACTORLM_CUDA_EMU
  BOOST_TEST(cuda_emu::counts().graph_launches > graphs_before);
#endif
}

// What lm-evaluation-harness's loglikelihood requests and vLLM's prompt_logprobs ask: every
// prompt token's log-probability given those before it, with its top 2, through the engine;
// with chunked prefill, so a prompt's scores come from several steps.
BOOST_AUTO_TEST_CASE(prompt_log_probabilities_through_the_engine_are_the_cpu_backends,
                     *boost::unit_test::precondition(model_present)) {
  const auto ps = testing::random_prompts(4, vocab, 5);
  auto cpu_cfg = base_config(config::Backend::cpu);
  auto cuda_cfg = base_config(config::Backend::cuda);
  for (auto* c : {&cpu_cfg, &cuda_cfg}) {
    c->cache.num_gpu_blocks_override = 256;
    c->scheduler.chunked_prefill = true;
    c->scheduler.max_num_batched_tokens = 8;
  }
  std::map<scheduler::RequestId, std::vector<shard::PromptLogprob>> want, got;
  expect_same(generate(cuda_cfg, ps, 2, nullptr, nullptr, &got), generate(cpu_cfg, ps, 2, nullptr, nullptr, &want), 2);
  BOOST_REQUIRE_EQUAL(got.size(), ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto& w = want.at(i + 1);
    const auto& g = got.at(i + 1);
    BOOST_REQUIRE_EQUAL(w.size(), ps[i].size() - 1);
    BOOST_REQUIRE_EQUAL(g.size(), w.size());
    for (std::size_t j = 0; j < w.size(); ++j) {
      BOOST_TEST(g[j].position == w[j].position);
      BOOST_TEST(std::abs(g[j].logprob - w[j].logprob) < 2e-3, "request " << i + 1 << " position " << w[j].position);
      BOOST_TEST(std::abs(std::int64_t(g[j].rank) - std::int64_t(w[j].rank)) <= 1, "request " << i + 1 << " position " << w[j].position);
      BOOST_REQUIRE_EQUAL(g[j].top.size(), w[j].top.size());
      if (w[j].top[0].logprob - w[j].top[1].logprob > 2e-3f)  // no near-tie between the two most likely
        BOOST_TEST(g[j].top[0].token == w[j].top[0].token, "request " << i + 1 << " position " << w[j].position);
    }
  }
}

BOOST_AUTO_TEST_CASE(tensor_parallel_three_over_nccl_gives_the_tokens_of_one,
                     *boost::unit_test::precondition(model_present) * boost::unit_test::precondition(three_devices)) {
  auto cfg = base_config(config::Backend::cuda);
  cfg.cache.num_gpu_blocks_override = 256;
  const auto ps = testing::random_prompts(6, vocab, 4);
  const auto one = generate(cfg, ps, 10);
  cfg.engine.tensor_parallel_degree = 3;
  expect_same(generate(cfg, ps, 10), one, 10);
}

// Under tensor parallelism the embedding and the LM head are split by vocabulary rows: every
// rank projects its columns of the logits, the prompt's slices too, in step with the sampling
// rank (an all-reduce ends each projection). The prompt's scores are one rank's.
BOOST_AUTO_TEST_CASE(prompt_log_probabilities_under_tensor_parallelism_are_one_ranks,
                     *boost::unit_test::precondition(model_present) * boost::unit_test::precondition(three_devices)) {
  auto cfg = base_config(config::Backend::cuda);
  cfg.cache.num_gpu_blocks_override = 256;
  cfg.scheduler.chunked_prefill = true;
  cfg.scheduler.max_num_batched_tokens = 16;
  const auto ps = testing::random_prompts(3, vocab, 6);
  std::map<scheduler::RequestId, std::vector<shard::PromptLogprob>> one, three;
  const auto want = generate(cfg, ps, 3, nullptr, nullptr, &one);
  cfg.engine.tensor_parallel_degree = 3;
  expect_same(generate(cfg, ps, 3, nullptr, nullptr, &three), want, 3);
  BOOST_REQUIRE_EQUAL(three.size(), ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto& w = one.at(i + 1);
    const auto& g = three.at(i + 1);
    BOOST_REQUIRE_EQUAL(g.size(), w.size());
    for (std::size_t j = 0; j < w.size(); ++j) {
      BOOST_TEST(g[j].position == w[j].position);
      BOOST_TEST(std::abs(g[j].logprob - w[j].logprob) < 2e-3, "request " << i + 1 << " position " << w[j].position);
    }
  }
}

// engine.cuda_graphs: the decode steps replayed as CUDA graphs (one per padded batch size and
// context bucket, run launch by launch at its first step) give the tokens of the steps run
// launch by launch: on one rank, and on three with the all-reduces among the captured work.
config::Config graphs_config() {
  auto cfg = base_config(config::Backend::cuda);
  cfg.cache.num_gpu_blocks_override = 256;
  return cfg;
}

// The greedy tokens with engine.cuda_graphs, checked against `eager`; the graph launches they
// took, over every rank (counted on the emulation; 0 on a GPU).
std::uint64_t with_graphs(config::Config cfg, const std::vector<std::vector<TokenId>>& ps,
                          const std::vector<std::vector<TokenId>>& eager) {
  cfg.engine.cuda_graphs = true;
#ifdef ACTORLM_CUDA_EMU
  const auto before = cuda_emu::counts().graph_launches;
  expect_same(generate(cfg, ps, 10), eager, 10);
  return cuda_emu::counts().graph_launches - before;
#else
  expect_same(generate(cfg, ps, 10), eager, 10);
  return 0;
#endif
}

BOOST_AUTO_TEST_CASE(decode_steps_as_cuda_graphs_give_the_tokens_of_launch_by_launch_steps,
                     *boost::unit_test::precondition(model_present)) {
  const auto cfg = graphs_config();
  const auto ps = testing::random_prompts(5, vocab, 9);
  const auto launches = with_graphs(cfg, ps, generate(cfg, ps, 10));
#ifdef ACTORLM_CUDA_EMU
  BOOST_TEST(launches >= 5u);  // of the 9 decode steps, those after the first of each padded size
#else
  (void)launches;
#endif
}

BOOST_AUTO_TEST_CASE(decode_steps_as_cuda_graphs_under_tensor_parallelism_give_the_tokens_of_one_rank,
                     *boost::unit_test::precondition(model_present) * boost::unit_test::precondition(three_devices)) {
  auto cfg = graphs_config();
  const auto ps = testing::random_prompts(5, vocab, 9);
  const auto eager = generate(cfg, ps, 10);
  const auto one_rank = with_graphs(cfg, ps, eager);
  cfg.engine.tensor_parallel_degree = 3;
  const auto three_ranks = with_graphs(cfg, ps, eager);
#ifdef ACTORLM_CUDA_EMU
  // Every rank replays the same graphs: the all-reduces pair up.
  BOOST_TEST(one_rank > 0u);
  BOOST_TEST(three_ranks == 3u * one_rank);
#else
  (void)one_rank, (void)three_ranks;
#endif
}
