// The per-GPU memory model: sharded weights written out by hand, KV heads split or replicated,
// the breakdown summing to the budget, and the "does not fit" message.
#define BOOST_TEST_MODULE sim_memory_model
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "sim/model/memory_model.hpp"

#include <cmath>
#include <string>

using namespace actorlm::sim;
namespace data = boost::unit_test::data;

namespace {

const Catalogue& cat() { return Catalogue::builtin(); }

MemoryOptions djl_options() {  // DJL's rolling batch settings for the Falcon-40B comparison
  MemoryOptions o;
  o.gpu_memory_utilization = 0.9;
  o.block_size = 16;
  o.max_num_batched_tokens = 1024;
  o.max_num_seqs = 32;
  o.max_model_len = 2048;
  return o;
}

MemoryBreakdown falcon40b_a10g(Parallelism p, MemoryOptions o = djl_options()) {
  return plan_memory(cat().model("falcon-40b"), cat().hardware("a10g"), cat().runtime(), p, o);
}

std::string message_of(const ModelPreset& m, const Hardware& h, Parallelism p, MemoryOptions o) {
  try {
    plan_memory(m, h, cat().runtime(), p, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(falcon_40b_at_tp_4_holds_a_quarter_of_every_sharded_matrix) {
  const MemoryBreakdown b = falcon40b_a10g({ParallelKind::tensor, 4});
  BOOST_TEST_MESSAGE(describe_memory(b, cat().model("falcon-40b"), cat().hardware("a10g")));
  // Per layer on one rank: QKV 8192 x (32 + 2 x 2) x 64, dense 32 x 64 x 8192, MLP 2 x 8192 x 8192,
  // two layer norms (weight + bias) replicated; embedding 65024 / 4 rows; final norm; 2 bytes each.
  const double layer = 8192.0 * 36 * 64 + 32.0 * 64 * 8192 + 2.0 * 8192 * 8192 + 2 * 2 * 8192;
  const double weights = 2 * (60 * layer + 16256.0 * 8192 + 2 * 8192);
  BOOST_TEST(b.weights_bytes == weights);
  BOOST_TEST(b.kv_bytes_per_token == 2.0 * 60 * 2 * 64 * 2);  // K and V, 60 layers, 2 KV heads
  BOOST_TEST(b.block_bytes == 16 * b.kv_bytes_per_token);
  BOOST_TEST(b.comm_bytes > 0);
  BOOST_TEST(b.num_blocks > 0u);
}

BOOST_AUTO_TEST_CASE(a_rank_that_holds_the_whole_vocabulary_counts_every_row_of_the_embedding_and_the_head) {
  // Falcon-40B ties its head to the embedding: one matrix, all 65,024 rows on the rank, 2 bytes
  // each, where Megatron's share at TP 8 is 8,128 rows.
  MemoryOptions whole = djl_options();
  whole.vocab_parallel = false;
  const MemoryBreakdown tied = falcon40b_a10g({ParallelKind::tensor, 8}, whole);
  const MemoryBreakdown share = falcon40b_a10g({ParallelKind::tensor, 8});
  BOOST_TEST(tied.weights_bytes - share.weights_bytes == 2 * (65024.0 - 8128) * 8192);
  BOOST_TEST(tied.num_blocks < share.num_blocks);
  // At TP 4 the 0.8 GB more leave no room on an A10G at 0.9: 21.45 GB of weights.
  const std::string refused =
      message_of(cat().model("falcon-40b"), cat().hardware("a10g"), {ParallelKind::tensor, 4}, whole);
  BOOST_TEST(refused.find("weights 21.45 GB") != std::string::npos, refused);
  // Llama-3-8B has its own head: the sampling rank holds both whole, 2 x (128,256 - 32,064) rows
  // more than its Megatron share at TP 4, 2 bytes each; at TP 1 the two layouts are the same.
  const ModelPreset& llama = cat().model("llama-3-8b");
  const Hardware& a100 = cat().hardware("a100-80gb");
  MemoryOptions split;
  split.vocab_parallel = true;
  MemoryOptions held = split;
  held.vocab_parallel = false;
  const Parallelism tp4{ParallelKind::tensor, 4}, tp1{ParallelKind::tensor, 1};
  const MemoryBreakdown s4 = plan_memory(llama, a100, cat().runtime(), tp4, split);
  const MemoryBreakdown h4 = plan_memory(llama, a100, cat().runtime(), tp4, held);
  BOOST_TEST(h4.weights_bytes - s4.weights_bytes == 2.0 * (128256 - 32064) * 4096 * llama.weight_bytes);
  BOOST_TEST(h4.num_blocks < s4.num_blocks);
  BOOST_TEST(plan_memory(llama, a100, cat().runtime(), tp1, held).weights_bytes ==
             plan_memory(llama, a100, cat().runtime(), tp1, split).weights_bytes);
  BOOST_TEST(plan_memory(llama, a100, cat().runtime(), tp1, held).num_blocks ==
             plan_memory(llama, a100, cat().runtime(), tp1, split).num_blocks);
}

BOOST_AUTO_TEST_CASE(falcon_40b_at_tp_8_has_one_kv_head_per_rank_and_more_room) {
  const MemoryBreakdown tp4 = falcon40b_a10g({ParallelKind::tensor, 4});
  const MemoryBreakdown tp8 = falcon40b_a10g({ParallelKind::tensor, 8});
  BOOST_TEST_MESSAGE(describe_memory(tp8, cat().model("falcon-40b"), cat().hardware("a10g")));
  BOOST_TEST(tp8.kv_bytes_per_token == 2.0 * 60 * 1 * 64 * 2);
  BOOST_TEST(tp8.weights_bytes < tp4.weights_bytes);
  BOOST_TEST(tp8.kv_tokens() > 10 * tp4.kv_tokens());
}

BOOST_AUTO_TEST_CASE(replicates_kv_heads_when_there_are_fewer_than_ranks) {
  const ModelPreset& m = cat().model("llama-2-70b");  // 8 KV heads
  BOOST_TEST(rank_shard(m, 8).kv_heads == 1u);
  BOOST_TEST(rank_shard(m, 16).kv_heads == 1u);  // 16 ranks: each holds a copy of one KV head
  BOOST_TEST(rank_shard(m, 16).q_heads == 4u);
  BOOST_TEST(rank_shard(cat().model("falcon-7b"), 1).kv_heads == 1u);
  BOOST_CHECK_THROW(rank_shard(cat().model("falcon-7b"), 4), std::invalid_argument);  // 71 heads
  BOOST_CHECK_THROW(rank_shard(m, 3), std::invalid_argument);
}

BOOST_DATA_TEST_CASE(breakdown_components_sum_to_the_usable_budget,
                     data::make({"smollm2-135m", "llama-2-7b", "llama-3-8b", "llama-2-70b", "falcon-40b"}) *
                         data::make({"a10g", "a100-80gb", "h200"}) * data::make({1u, 2u, 4u, 8u}) *
                         data::make({0, 1}),
                     model, gpu, degree, split) {
  const Parallelism p{split ? ParallelKind::layers : ParallelKind::tensor, degree};
  MemoryOptions o;
  o.max_model_len = 512;
  MemoryBreakdown b;
  try {
    b = plan_memory(cat().model(model), cat().hardware(gpu), cat().runtime(), p, o);
  } catch (const std::invalid_argument& e) {  // does not split or does not fit: says why
    const std::string what = e.what();
    BOOST_TEST((what.find("needs") != std::string::npos || what.find("cannot be split") != std::string::npos ||
                what.find("less than one sequence") != std::string::npos), what);
    return;
  }
  const double sum = b.weights_bytes + b.activation_bytes + b.cuda_context_bytes + b.framework_bytes +
                     b.comm_bytes + b.kv_bytes + b.spare_bytes;
  BOOST_TEST(std::fabs(sum - b.usable_bytes) <= 1e-6 * b.usable_bytes);
  BOOST_TEST(b.usable_bytes == b.device_bytes * o.gpu_memory_utilization);
  BOOST_TEST(b.spare_bytes >= 0);
  BOOST_TEST(b.spare_bytes < b.block_bytes);  // every whole block that fits is a KV block
  BOOST_TEST(b.kv_tokens() >= o.max_model_len);
}

BOOST_AUTO_TEST_CASE(a_model_that_does_not_fit_says_what_it_needs_and_what_there_is) {
  const std::string what = message_of(cat().model("falcon-40b"), cat().hardware("a10g"),
                                      {ParallelKind::tensor, 2}, djl_options());
  BOOST_TEST(what.find("TP 2: Falcon-40B needs 4") != std::string::npos, what);  // 41.x GB
  BOOST_TEST(what.find("weights 41.31 GB") != std::string::npos, what);
  BOOST_TEST(what.find("NVIDIA A10G's 24.15 GB x 0.90 gpu_memory_utilization leaves 21.73 GB") !=
                 std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(too_little_kv_for_one_sequence_is_an_error) {
  MemoryOptions o = djl_options();
  o.max_model_len = 1'000'000;
  const std::string what = message_of(cat().model("llama-2-7b"), cat().hardware("a10g"),
                                      {ParallelKind::tensor, 1}, o);
  BOOST_TEST(what.find("less than one sequence of model.max_model_len = 1000000") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(a_layer_split_puts_a_slice_of_layers_and_their_kv_on_each_gpu) {
  // HF Accelerate preallocates nothing: the whole device is the budget.
  MemoryOptions o = djl_options();
  o.gpu_memory_utilization = 1.0;
  const MemoryBreakdown b = falcon40b_a10g({ParallelKind::layers, 4}, o);
  BOOST_TEST_MESSAGE(describe_memory(b, cat().model("falcon-40b"), cat().hardware("a10g")));
  BOOST_TEST(b.layers == 15u);
  BOOST_TEST(b.kv_bytes_per_token == 2.0 * 15 * 8 * 64 * 2);  // whole KV heads of 15 layers
  BOOST_TEST(b.comm_bytes == 0);
  const ModelPreset& m = cat().model("falcon-40b");
  // The binding GPU holds 15 layers and one copy of the (tied) embedding, plus a norm or not.
  const double layers = 15.0 * double(m.layer_params()) * 2;
  BOOST_TEST(b.weights_bytes >= layers + 2.0 * m.vocab * m.hidden);
  BOOST_TEST(b.weights_bytes <= layers + 2.0 * m.vocab * m.hidden + 2.0 * m.norm_params());
  BOOST_TEST(actorlm::model::layers_of_stage(m, 7, 0) == 9u);  // 60 = 4 x 9 + 3 x 8
  BOOST_TEST(actorlm::model::layers_of_stage(m, 7, 6) == 8u);
}

BOOST_AUTO_TEST_CASE(every_gpu_of_a_layer_split_gets_the_same_blocks_and_its_own_breakdown) {
  MemoryOptions o = djl_options();
  o.gpu_memory_utilization = 1.0;
  const ModelPreset& m = cat().model("falcon-40b");
  const auto all = plan_memory_per_gpu(m, cat().hardware("a10g"), cat().runtime(), {ParallelKind::layers, 8}, o);
  BOOST_TEST_REQUIRE(all.size() == 8u);
  std::uint32_t layers = 0;
  for (const MemoryBreakdown& b : all) {
    BOOST_TEST_MESSAGE(describe_memory(b, m, cat().hardware("a10g")));
    layers += b.layers;
    BOOST_TEST(b.num_blocks == all[0].num_blocks);
    BOOST_TEST(b.spare_bytes >= 0);
    const double sum = b.weights_bytes + b.activation_bytes + b.overhead_bytes() + b.kv_bytes + b.spare_bytes;
    BOOST_TEST(std::fabs(sum - b.usable_bytes) <= 1e-6 * b.usable_bytes);
  }
  BOOST_TEST(layers == 60u);
  BOOST_TEST(all[0].layers == 8u);  // 60 = 4 x 8 + 4 x 7
  BOOST_TEST(all[7].layers == 7u);
  const MemoryBreakdown tightest = plan_memory(m, cat().hardware("a10g"), cat().runtime(), {ParallelKind::layers, 8}, o);
  for (const MemoryBreakdown& b : all) BOOST_TEST(b.spare_bytes >= tightest.spare_bytes);
  BOOST_TEST(tightest.spare_bytes < tightest.block_bytes);
}

BOOST_AUTO_TEST_CASE(a_stage_of_tp_4_holds_its_half_of_the_layers_at_tp_4_shares) {
  MemoryOptions o = djl_options();
  o.gpu_memory_utilization = 1.0;
  const ModelPreset& m = cat().model("falcon-40b");
  const Hardware& hw = cat().hardware("a10g");
  Parallelism hybrid{ParallelKind::layers, 8};
  hybrid.stage_tp = 4;
  const auto stages = plan_memory_per_gpu(m, hw, cat().runtime(), hybrid, o);
  BOOST_TEST_REQUIRE(stages.size() == 2u);  // one plan per stage: its 4 GPUs are alike
  const auto tp4 = plan_memory_per_gpu(m, hw, cat().runtime(), {ParallelKind::tensor, 4}, o).front();
  for (const MemoryBreakdown& b : stages) {
    BOOST_TEST_MESSAGE(describe_memory(b, m, hw));
    BOOST_TEST(b.layers == 30u);
    BOOST_TEST(b.kv_bytes_per_token == tp4.kv_bytes_per_token / 2);  // TP 4's KV heads, half the layers
    BOOST_TEST(b.comm_bytes == tp4.comm_bytes);                       // it all-reduces as TP 4 does
    BOOST_TEST(b.weights_bytes < tp4.weights_bytes);
  }
  BOOST_TEST(describe_memory(stages[1], m, hw).find("2 stages of TP 4: stage 1 (GPUs 4-7, 30 of 60 layers)") == 0u,
             describe_memory(stages[1], m, hw));
  // Half the layers' weights on each GPU leaves room for more than twice TP 4's blocks.
  BOOST_TEST(stages[0].num_blocks > 2 * tp4.num_blocks);
}

BOOST_AUTO_TEST_CASE(more_memory_utilization_never_gives_fewer_blocks) {
  std::uint32_t last = 0;
  for (double u = 0.90; u <= 1.0; u += 0.01) {
    MemoryOptions o = djl_options();
    o.gpu_memory_utilization = u;
    const std::uint32_t blocks = falcon40b_a10g({ParallelKind::tensor, 4}, o).num_blocks;
    BOOST_TEST(blocks >= last);
    last = blocks;
  }
}

BOOST_AUTO_TEST_CASE(the_block_override_is_taken_as_given) {
  MemoryOptions o = djl_options();
  o.num_gpu_blocks_override = 200;
  const MemoryBreakdown b = falcon40b_a10g({ParallelKind::tensor, 8}, o);
  BOOST_TEST(b.num_blocks == 200u);
  BOOST_TEST(b.spare_bytes > b.block_bytes);
}

BOOST_AUTO_TEST_CASE(describes_the_breakdown_in_one_line) {
  const MemoryBreakdown b = falcon40b_a10g({ParallelKind::tensor, 4});
  const std::string text = describe_memory(b, cat().model("falcon-40b"), cat().hardware("a10g"));
  BOOST_TEST(text.rfind("TP 4: weights 20.65 GB of 24.15 GB (NVIDIA A10G, 21.73 GB usable)", 0) == 0, text);
  BOOST_TEST(text.find("KV for " + std::to_string(b.kv_tokens()) + " tokens") != std::string::npos, text);
}
