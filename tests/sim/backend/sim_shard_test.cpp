// The sim backend: its shards under the real engine (scheduler + block manager) on CAF's test
// coordinator, where every step takes exactly the cost model's time of virtual time; the
// same shards under the normal scheduler, where they take wall time; the step's shape and
// tokens; and the backend's set-up from a config.
#define BOOST_TEST_MODULE sim_shard
#include <boost/test/unit_test.hpp>

#include <cmath>

#define CAF_TEST_NO_MAIN
#define FAIL(msg) BOOST_FAIL(msg)
#include <caf/test/dsl.hpp>
#include <caf/test/unit_test_impl.hpp>

#include "actors/engine/engine.hpp"
#include "sim/backend/sim_backend.hpp"
#include "sim/backend/sim_shard.hpp"

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <future>
#include <map>

using namespace actorlm;
using namespace actorlm::scheduler;
using sim::Catalogue;

namespace {

struct Received {
  std::map<RequestId, std::vector<TokenId>> tokens;  // sample 0
  std::map<RequestId, int> finished;
  RequestId expect_finished = 0;  // wall-clock test: how many finishes end the wait
  std::promise<void> all_done;
};

token_sink::behavior_type collector(token_sink::pointer, Received* r) {
  return {[r](const SinkBatch& b) {
    for (const auto& t : b.tokens)
      if (t.sample == 0) r->tokens[t.request].push_back(t.token);
    for (const auto& f : b.finished)
      if (++r->finished[f.request] == 1 && r->finished.size() == r->expect_finished) r->all_done.set_value();
  }};
}

struct NetworkConfig : caf::actor_system_config {
  NetworkConfig() {
    kv::add_block_manager_types(*this);
    shard::add_shard_types(*this);
  }
};

// SmolLM2-135M on A10G over 3 GPUs (9 heads, 3 KV heads: 3 ranks split both).
config::Config smol_config() {
  config::Config c;
  c.engine.backend = config::Backend::sim;
  c.engine.tensor_parallel_degree = 3;
  c.model.preset = "smollm2-135m";
  c.model.max_model_len = 512;
  c.cache.block_size = 16;
  c.cache.num_gpu_blocks_override = 256;  // a small block manager; the budget holds far more
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = 512;
  c.sim.seed = 5;
  return c;
}

// Falcon-40B over 8 A10Gs of one g5.48xlarge, batches of up to 32 sequences.
config::Config falcon_tp8() {
  config::Config c;
  c.engine.backend = config::Backend::sim;
  c.engine.tensor_parallel_degree = 8;
  c.model.preset = "falcon-40b";
  c.sim.instance = "g5.48xlarge";
  c.scheduler.max_num_seqs = 32;
  c.scheduler.max_num_batched_tokens = 2048;
  return c;
}

RequestSpec spec_of(RequestId id, std::uint32_t prompt, std::uint32_t max_tokens) {
  RequestSpec s;
  s.id = id;
  s.prompt.assign(prompt, TokenId(100 + id));
  s.max_tokens = max_tokens;
  s.sampling.seed = 77;
  return s;  // no stop tokens, no eos: runs to max_tokens, as simulated requests do
}

std::int64_t modelled_ns(const sim::CostModel& cost, const sim::StepShape& s) {
  return std::max<std::int64_t>(1, std::llround(cost.step_seconds(s) * 1e9));
}

struct Fixture : test_coordinator_fixture<NetworkConfig> {
  Received received;
  engine::EngineActors engine;
  token_sink sink = sys.spawn(collector, &received);
  sim::SimBackend backend = sim::load_sim_backend(smol_config());

  Fixture() { engine = engine::spawn_engine(sys, smol_config(), backend.capacity, backend.factory); }
  ~Fixture() { engine::stop_engine(engine); }

  SubmitStatus submit(RequestSpec spec) {
    auto rp = self->request(engine.scheduler, caf::infinite, std::move(spec), sink);
    consume_messages();
    SubmitStatus status = SubmitStatus::invalid;
    rp.receive([&](SubmitStatus st) { status = st; }, [&](caf::error&) {});
    return status;
  }
};

// Falcon-7B's timing on an A10G over a vocabulary of 3 tokens, stop token 1, seed 9.
sim::SimShardModel three_token_model() {
  const auto& cat = Catalogue::builtin();
  return {sim::CostModel(cat.model("falcon-7b"), cat.hardware("a10g"), {}, 16), 3, 1, 9};
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(virtual_time, Fixture)

BOOST_AUTO_TEST_CASE(steps_take_the_cost_models_time_and_requests_get_max_tokens_tokens) {
  constexpr std::uint32_t prompt = 40, max_tokens = 12;
  const auto t0 = sched.clock().now();
  BOOST_TEST((submit(spec_of(1, prompt, max_tokens)) == SubmitStatus::accepted));
  run();  // fires each step's delayed reply: virtual time moves by the modelled durations
  // (run() then also fires the engine's step watchdog, which stays armed once idle: the clock
  // ends at its deadline, so the run's length is read from the last step's end instead.)

  std::vector<TokenId> expected;
  for (std::uint32_t i = 0; i < max_tokens; ++i)
    expected.push_back(sim::sim_token(5, 77, 1, 0, prompt + i, 49152, 0));
  BOOST_TEST(received.tokens[1] == expected, boost::test_tools::per_element());
  BOOST_TEST(received.finished[1] == 1);

  auto records = request<std::vector<StepRecord>>(engine.scheduler, sched_records_atom::value);
  std::erase_if(records, [](const StepRecord& r) { return r.batch_size == 0; });  // bookkeeping only
  BOOST_TEST_REQUIRE(records.size() == max_tokens);  // one prefill step, then one decode step per token
  const sim::CostModel& cost = backend.shard_model->cost;
  std::int64_t total = 0;
  for (std::uint32_t k = 0; k < max_tokens; ++k) {
    sim::StepShape s;
    if (k == 0) s.add(prompt, prompt, true);
    else s.add(1, prompt + k, true);
    BOOST_TEST(records[k].end - records[k].start == modelled_ns(cost, s), "step " << k);
    total += modelled_ns(cost, s);
  }
  const auto t0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  BOOST_TEST(records.back().end - t0_ns == total);  // back to back, from the submission on
}

BOOST_AUTO_TEST_CASE(batched_requests_share_steps_and_each_gets_its_own_tokens) {
  for (RequestId id = 1; id <= 5; ++id) BOOST_TEST((submit(spec_of(id, 10 + id, 3 + id)) == SubmitStatus::accepted));
  run();
  for (RequestId id = 1; id <= 5; ++id) {
    BOOST_TEST(received.tokens[id].size() == 3 + id);
    BOOST_TEST(received.tokens[id].front() == sim::sim_token(5, 77, id, 0, 10 + id, 49152, 0));
  }
  const auto records = request<std::vector<StepRecord>>(engine.scheduler, sched_records_atom::value);
  BOOST_TEST(records.size() < 5u + 6 + 7 + 8 + 9);  // batched, not one request at a time
}

BOOST_AUTO_TEST_CASE(an_engine_with_only_rank_0_spawned_serves_the_same_tokens_in_the_same_time) {
  BOOST_TEST((submit(spec_of(1, 30, 9)) == SubmitStatus::accepted));
  run();
  const auto all_ranks = request<std::vector<StepRecord>>(engine.scheduler, sched_records_atom::value);

  Received other;
  auto other_sink = sys.spawn(collector, &other);
  const auto rank0 = engine::spawn_engine(sys, smol_config(), backend.capacity, backend.rank0_factory);
  BOOST_TEST(rank0.shards.size() == 3u);
  BOOST_TEST(!rank0.shards[1]);  // no actor behind ranks 1 and 2
  auto rp = self->request(rank0.scheduler, caf::infinite, spec_of(1, 30, 9), other_sink);
  run();
  rp.receive([](SubmitStatus st) { BOOST_TEST((st == SubmitStatus::accepted)); }, [](caf::error&) { BOOST_FAIL("refused"); });
  BOOST_TEST(other.tokens[1].size() == 9u);
  BOOST_TEST(other.tokens[1] == received.tokens[1], boost::test_tools::per_element());
  const auto records = request<std::vector<StepRecord>>(rank0.scheduler, sched_records_atom::value);
  BOOST_TEST_REQUIRE(records.size() == all_ranks.size());
  for (std::size_t i = 0; i < records.size(); ++i)
    BOOST_TEST(records[i].end - records[i].start == all_ranks[i].end - all_ranks[i].start);
  engine::stop_engine(rank0);
  caf::anon_send_exit(other_sink, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(a_padding_row_costs_a_decode_token_at_the_longest_context) {
  shard::Step step;
  shard::SeqWork a;
  a.begin = 99;  // one token attending to 100 positions
  a.end = 100;
  a.num_samples = 1;
  shard::SeqWork pad;
  pad.padding = true;
  step.seqs = {pad, a};
  step.swap_in = {{1, 2}, {3, 4}};
  step.copies = {{5, 6}};
  const sim::StepShape s = sim::step_shape(step);
  BOOST_TEST(s.tokens == 2u);
  BOOST_TEST(s.decode_seqs == 2u);
  BOOST_TEST(s.decode_context == 200u);
  BOOST_TEST(s.logit_rows == 2u);
  BOOST_TEST(s.swapped_blocks == 2u);
  BOOST_TEST(s.copied_blocks == 1u);
}

BOOST_AUTO_TEST_CASE(samples_one_token_per_requested_sample_never_the_stop_token) {
  const sim::SimShardModel m = three_token_model();
  shard::Step step;
  step.id = 4;
  shard::SamplingParams sampling;
  sampling.logprobs = true;
  sampling.top_logprobs = 2;
  step.added = {{10, 7, 0, 3, {5, 6, 7}, sampling}, {11, 7, 0, 3, {5, 6, 7}, sampling}};
  shard::SeqWork prefill;  // n = 4 parallel samples from the prompt's last logits
  prefill.seq = 10;
  prefill.end = 3;
  prefill.num_samples = 4;
  shard::SeqWork chunk = prefill;  // a chunk that does not end its prompt: samples nothing
  chunk.seq = 11;
  chunk.num_samples = 0;
  step.seqs = {prefill, chunk};
  sim::SimSequences seqs;
  const shard::StepResult r = sim::simulate_step(m, seqs, step);
  BOOST_TEST(r.step_id == 4u);
  BOOST_TEST_REQUIRE(r.tokens.size() == 4u);
  for (std::uint32_t j = 0; j < 4; ++j) {
    BOOST_TEST(r.tokens[j].seq == 10u);
    BOOST_TEST(r.tokens[j].token != 1);  // vocabulary {0, 1, 2}, stop token 1
    BOOST_TEST(r.tokens[j].token == sim::sim_token(9, 0, 7, j, 3, 3, 1));
    BOOST_TEST(r.tokens[j].top.size() == 2u);
  }
  BOOST_TEST(r.duration_ns == modelled_ns(m.cost, sim::step_shape(step)));
  BOOST_TEST(sim::simulate_step(m, seqs, step).tokens[2].token == r.tokens[2].token);  // deterministic
  shard::Step unknown;
  unknown.seqs = {prefill};
  unknown.dropped = {10};
  BOOST_CHECK_THROW(sim::simulate_step(m, seqs, unknown), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(prompt_log_probabilities_are_the_uniform_draws_for_each_computed_prompt_position) {
  const sim::SimShardModel m = three_token_model();
  shard::SamplingParams asks;
  asks.prompt_logprobs = 2;
  shard::Step step;
  step.added = {{10, 7, 0, 4, {2, 0, 1, 2}, asks}, {11, 8, 0, 4, {2, 0, 1, 2}, {}}};
  shard::SeqWork chunk;  // positions 1 and 2 score prompt tokens 2 and 3; 3 would sample
  chunk.seq = 10;
  chunk.begin = 1;
  chunk.end = 4;
  chunk.num_samples = 1;
  shard::SeqWork plain = chunk;  // does not ask
  plain.seq = 11;
  step.seqs = {chunk, plain};
  sim::SimSequences seqs;
  const auto r = sim::simulate_step(m, seqs, step);
  BOOST_TEST_REQUIRE(r.prompt_logprobs.size() == 2u);
  for (std::uint32_t i = 0; i < 2; ++i) {
    const auto& e = r.prompt_logprobs[i];
    BOOST_TEST(e.seq == 10u);
    BOOST_TEST(e.position == i + 2);
    BOOST_TEST(e.token == (std::vector<kv::TokenId>{1, 2}[i]));
    BOOST_TEST(e.logprob == -std::log(3.0f));
    BOOST_TEST(e.rank == 1u);  // every token alike
    BOOST_TEST_REQUIRE(e.top.size() == 2u);
    BOOST_TEST(e.top[0].token == e.token);
  }
  BOOST_TEST(r.tokens.size() == 2u);
  // The scored chunk's 3 rows go through the LM head, the other sequence's last row only.
  sim::StepShape shape = sim::step_shape(step);
  BOOST_TEST(shape.logit_rows == 2u);
  BOOST_TEST(sim::step_shape(step, &seqs).logit_rows == 4u);
  shape.logit_rows = 4;
  BOOST_TEST(r.duration_ns == modelled_ns(m.cost, shape));
  BOOST_TEST(r.duration_ns > modelled_ns(m.cost, sim::step_shape(step)));
  // Once the prompt is scored (its last chunk, from position 3 on), a chunk costs as before.
  shard::Step later;
  shard::SeqWork rest = chunk;
  rest.begin = 3;
  later.seqs = {rest};
  BOOST_TEST(sim::step_shape(later, &seqs).logit_rows == 1u);
}

BOOST_AUTO_TEST_CASE(draws_cover_the_vocabulary_evenly) {
  std::vector<int> counts(10);
  for (std::uint64_t pos = 0; pos < 10000; ++pos) ++counts[sim::sim_token(1, 2, 3, 0, pos, 10, -1)];
  for (int c : counts) BOOST_TEST((c > 900 && c < 1100));  // 1000 expected, ~30 standard deviation
}

BOOST_AUTO_TEST_CASE(under_the_normal_scheduler_steps_take_wall_time) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{2});
  caf::actor_system sys{cfg};
  config::Config c = smol_config();
  c.engine.tensor_parallel_degree = 1;
  const auto backend = sim::load_sim_backend(c);
  Received got;
  got.expect_finished = 2;
  auto done = got.all_done.get_future();
  const auto start = std::chrono::steady_clock::now();
  {
    engine::Engine eng(sys, c, backend.capacity, backend.factory);
    auto sink = sys.spawn(collector, &got);
    BOOST_TEST((eng.submit(spec_of(1, 30, 20), sink) == SubmitStatus::accepted));
    BOOST_TEST((eng.submit(spec_of(2, 8, 5), sink) == SubmitStatus::accepted));
    BOOST_TEST_REQUIRE((done.wait_for(std::chrono::seconds(20)) == std::future_status::ready));
    const auto wall = std::chrono::steady_clock::now() - start;
    std::int64_t modelled = 0;
    for (const auto& rec : eng.take_step_records()) modelled += rec.end - rec.start;
    const double wall_ms = std::chrono::duration<double, std::milli>(wall).count();
    BOOST_TEST_MESSAGE("wall " << wall_ms << " ms, modelled steps " << modelled / 1e6 << " ms");
    // At least one step per token of the longer request, each at least its modelled time
    // (SmolLM2 on A10G: about 2.5 ms per decode step, mostly kernel launches).
    sim::StepShape one;
    one.add(1, 30, true);
    BOOST_TEST(modelled >= 19 * modelled_ns(backend.shard_model->cost, one));
    BOOST_TEST(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count() >= modelled);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  BOOST_TEST(got.tokens[1].size() == 20u);
  BOOST_TEST(got.tokens[2].size() == 5u);
}

BOOST_AUTO_TEST_CASE(the_backend_is_set_up_from_the_config) {
  const auto b = sim::load_sim_backend(falcon_tp8());
  BOOST_TEST_MESSAGE(b.describe());
  BOOST_TEST(b.hardware.key == "a10g");
  BOOST_TEST(b.capacity.device_blocks == b.memory.num_blocks);
  BOOST_TEST(b.capacity.vocab_size == 65024u);
  BOOST_TEST(b.capacity.host_blocks == std::uint32_t(4.0 * (1ull << 30) / b.memory.block_bytes));
  BOOST_TEST(b.describe().find("Falcon-40B") != std::string::npos);
  BOOST_TEST(b.describe().find("TP 8: weights 10.33 GB") != std::string::npos, b.describe());
}

BOOST_AUTO_TEST_CASE(two_nodes_hold_what_one_instance_of_their_gpus_would_and_name_their_network) {
  config::Config c = falcon_tp8();
  const auto one = sim::load_sim_backend(c);
  c.sim.instance = "g5.12xlarge";
  c.sim.nodes = 2;
  const auto two = sim::load_sim_backend(c);
  BOOST_TEST_MESSAGE(two.describe());
  BOOST_TEST(two.parallelism.nodes == 2u);
  BOOST_TEST(two.capacity.device_blocks == one.capacity.device_blocks);  // the same A10Gs, the same shares
  BOOST_TEST(two.describe().find("2 x g5.12xlarge (8 x NVIDIA A10G") != std::string::npos, two.describe());
  BOOST_TEST(two.describe().find("between nodes 40 Gbit/s (70 % reached), 25 us") != std::string::npos, two.describe());
  BOOST_TEST(two.describe().find("over 8 GPUs on 2 nodes") != std::string::npos, two.describe());
}

BOOST_AUTO_TEST_CASE(a_pipeline_parallel_degree_is_the_layer_split_over_as_many_gpus) {
  config::Config layers = falcon_tp8();
  layers.sim.parallelism = config::SimParallelism::layers;
  config::Config stages = falcon_tp8();
  stages.engine.tensor_parallel_degree = 1;
  stages.engine.pipeline_parallel_degree = 8;
  const auto a = sim::load_sim_backend(layers), b = sim::load_sim_backend(stages);
  BOOST_TEST((b.parallelism.kind == sim::ParallelKind::layers));
  BOOST_TEST(b.parallelism.degree == 8u);
  BOOST_TEST(b.capacity.device_blocks == a.capacity.device_blocks);
  BOOST_TEST(b.describe() == a.describe());
  sim::StepShape decode;
  for (int i = 0; i < 16; ++i) decode.add(1, 512, true);
  BOOST_TEST(b.shard_model->cost.step_seconds(decode) == a.shard_model->cost.step_seconds(decode));
}

BOOST_AUTO_TEST_CASE(both_degrees_make_stages_of_tensor_parallel_gpus) {
  config::Config c = falcon_tp8();
  c.engine.tensor_parallel_degree = 4;
  c.engine.pipeline_parallel_degree = 2;
  c.sim.instance = "g5.12xlarge";
  c.sim.nodes = 2;
  const auto b = sim::load_sim_backend(c);
  BOOST_TEST(b.parallelism.stages() == 2u);
  BOOST_TEST(b.parallelism.tensor_degree() == 4u);
  BOOST_TEST(b.memory_per_gpu.size() == 2u);
  BOOST_TEST(b.describe().find("layer split over 2 stages of tensor parallel 4, over 8 GPUs on 2 nodes") !=
                 std::string::npos, b.describe());
}

BOOST_AUTO_TEST_CASE(the_backend_refuses_what_cannot_be_served_and_says_why) {
  auto error_of = [](const config::Config& c) -> std::string {
    try {
      sim::load_sim_backend(c);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  };
  config::Config c;
  c.engine.backend = config::Backend::sim;
  c.model.preset = "falcon-41b";
  BOOST_TEST(error_of(c).find("unknown model preset \"falcon-41b\"; known: falcon-40b, falcon-7b, llama-2-13b") == 0u,
             error_of(c));
  c.model.preset = "falcon-40b";
  c.sim.instance = "g5.12xlarge";
  c.engine.tensor_parallel_degree = 8;
  BOOST_TEST(error_of(c) == "engine.tensor_parallel_degree = 8 needs 8 GPUs, but g5.12xlarge has 4 (NVIDIA A10G): "
                            "sim.nodes = 2 spreads them over that many");
  c.sim.nodes = 3;
  BOOST_TEST(error_of(c) == "sim.nodes = 3 must divide engine.tensor_parallel_degree = 8: every node holds as many GPUs");
  c.sim.nodes = 2;
  c.engine.tensor_parallel_degree = 16;
  BOOST_TEST(error_of(c) == "engine.tensor_parallel_degree = 16 over sim.nodes = 2 needs 8 GPUs per node, but "
                            "g5.12xlarge has 4 (NVIDIA A10G)");
  c.sim.nodes = 1;
  c.engine.tensor_parallel_degree = 4;  // default 8192 batched tokens: the workspace does not fit
  BOOST_TEST(error_of(c).find("TP 4: Falcon-40B needs") == 0u, error_of(c));
  c.sim.instance.clear();
  c.sim.nodes = 2;
  BOOST_TEST(error_of(c) == "sim.nodes = 2 needs sim.instance: the network between nodes is the instance's");
  c.sim.nodes = 1;
  c.sim.hardware = "tpu";
  BOOST_TEST(error_of(c).find("unknown hardware \"tpu\"") == 0u, error_of(c));
  c.sim.hardware = "h100-sxm";
  c.model.max_model_len = 4096;
  BOOST_TEST(error_of(c) == "model.max_model_len = 4096 is longer than Falcon-40B's context of 2048 tokens");
  c.model.max_model_len = 2048;
  c.sim.model_catalogue = "/nonexistent/models.toml";
  BOOST_CHECK_THROW(sim::load_sim_backend(c), sim::CatalogueError);
}
