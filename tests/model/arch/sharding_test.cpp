// The tensor-parallel sharding rules (model/arch/sharding.hpp) over a grid of head counts and
// degrees 1..8, checked against the rules written out independently here: every query head and
// FFN column on exactly one rank, each rank's query heads reading KV heads it holds, KV heads
// replicated when there are fewer than ranks, and refusals that name the count and the degree.
#define BOOST_TEST_MODULE sharding
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "model/arch/sharding.hpp"

#include <ostream>
#include <stdexcept>
#include <vector>

using namespace actorlm::model;
namespace data = boost::unit_test::data;

namespace {

struct Shape {
  std::uint32_t heads, kv_heads, ffn;
};
std::ostream& operator<<(std::ostream& o, const Shape& s) {
  return o << s.heads << "q/" << s.kv_heads << "kv ffn " << s.ffn;
}

// Multi-head, grouped, multi-query, odd counts (Falcon-7B's 71 heads, SmolLM2's 9/3), and an FFN
// width that only some degrees divide.
const Shape shapes[] = {{8, 8, 64},  {32, 8, 128}, {64, 8, 256}, {71, 1, 284}, {9, 3, 36},
                        {16, 2, 64}, {8, 1, 48},   {12, 4, 96},  {8, 8, 60}};

Architecture arch_of(const Shape& s) {
  Architecture a;
  a.layers = 4;
  a.hidden = 64 * s.heads;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = 64;
  a.ffn = s.ffn;
  a.vocab = 1000;
  a.max_context = 128;
  return a;
}

// The rule, stated independently of the code under test.
bool splits(const Shape& s, std::uint32_t d) {
  return s.heads % d == 0 && s.ffn % d == 0 && (s.kv_heads % d == 0 || d % s.kv_heads == 0);
}

std::string refusal(const Architecture& a, std::uint32_t d) {
  try {
    check_shardable(a, d);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

}  // namespace

BOOST_DATA_TEST_CASE(every_head_and_column_lands_on_one_rank_or_the_split_is_refused,
                     data::make(shapes) * data::xrange(1u, 9u), shape, degree) {
  const Architecture a = arch_of(shape);
  if (!splits(shape, degree)) {
    BOOST_CHECK_THROW(shard_for_rank(a, 0, degree), std::invalid_argument);
    BOOST_TEST(refusal(a, degree).find("cannot be split evenly over " + std::to_string(degree) + " ranks") !=
               std::string::npos, refusal(a, degree));
    return;
  }
  const std::uint32_t group = shape.heads / shape.kv_heads;
  std::vector<int> q_owner(shape.heads, 0), ffn_owner(shape.ffn, 0), kv_holders(shape.kv_heads, 0);
  for (std::uint32_t r = 0; r < degree; ++r) {
    const RankShard s = shard_for_rank(a, r, degree);
    BOOST_TEST(s.rank == r);
    BOOST_TEST(s.degree == degree);
    BOOST_TEST(s.q_heads == shape.heads / degree);
    BOOST_TEST(s.ffn_columns == shape.ffn / degree);
    BOOST_TEST(s.vocab_rows == (a.vocab + degree - 1) / degree);
    // Split when there are at least as many KV heads as ranks, one replicated copy otherwise.
    BOOST_TEST(s.kv_heads == (shape.kv_heads >= degree ? shape.kv_heads / degree : 1u));
    BOOST_TEST(s.kv_replicated == (shape.kv_heads < degree));
    for (std::uint32_t j = 0; j < s.q_heads; ++j) {
      ++q_owner[s.q_begin + j];
      // Local query head j reads the global KV head of its group, which this rank holds.
      BOOST_TEST(s.kv_begin + s.kv_of(j) == (s.q_begin + j) / group);
      BOOST_TEST(s.kv_of(j) < s.kv_heads);
    }
    for (std::uint32_t c = 0; c < s.ffn_columns; ++c) ++ffn_owner[s.ffn_begin + c];
    for (std::uint32_t k = 0; k < s.kv_heads; ++k) ++kv_holders[s.kv_begin + k];
    BOOST_TEST(kv_elements_per_token(a, s, a.layers) == 2ull * a.layers * s.kv_heads * a.head_dim);
  }
  for (int n : q_owner) BOOST_TEST(n == 1);
  for (int n : ffn_owner) BOOST_TEST(n == 1);
  // Every KV head is held by degree / kv_heads ranks when replicated, by exactly one otherwise.
  for (int n : kv_holders) BOOST_TEST(n == int(shape.kv_heads < degree ? degree / shape.kv_heads : 1));
}

BOOST_DATA_TEST_CASE(one_rank_holds_its_share_of_every_weight_matrix,
                     data::make(shapes) * data::xrange(1u, 9u), shape, degree) {
  if (!splits(shape, degree)) return;
  const Architecture a = arch_of(shape);
  const RankShard whole = shard_for_rank(a, 0, 1);
  BOOST_TEST(a.layers * layer_weight_elements(a, whole) + a.embedding_params() + a.norm_params() == a.params());
  const RankShard s = shard_for_rank(a, 0, degree);
  // Q, output projection and MLP divide by the degree; K/V divide, or are copied; norms copied.
  const std::uint64_t h = a.hidden, d = a.head_dim;
  const std::uint64_t expected = h * (a.heads / degree) * d * 2 + 2 * h * s.kv_heads * d +
                                 std::uint64_t{a.ffn_matrices()} * h * (a.ffn / degree) +
                                 a.norms_per_layer * a.norm_params();
  BOOST_TEST(layer_weight_elements(a, s) == expected);
}

BOOST_AUTO_TEST_CASE(a_refusal_names_the_count_the_degree_and_the_degrees_that_work) {
  const Architecture falcon7b = arch_of({71, 1, 284});
  BOOST_TEST(refusal(falcon7b, 4) ==
             "tensor parallel degree 4: 71 attention heads cannot be split evenly over 4 ranks "
             "(degrees that can: 1, 71)");
  const Architecture grouped = arch_of({12, 4, 96});
  BOOST_TEST(refusal(grouped, 6) ==
             "tensor parallel degree 6: 4 KV heads cannot be split evenly over 6 ranks, nor replicated "
             "(the ranks are not a multiple of them) (degrees that can: 1, 2, 4, 12)");
  const Architecture narrow_ffn = arch_of({8, 8, 60});
  BOOST_TEST(refusal(narrow_ffn, 8) ==
             "tensor parallel degree 8: 60 FFN columns cannot be split evenly over 8 ranks "
             "(degrees that can: 1, 2, 4)");
  BOOST_TEST(refusal(narrow_ffn, 0) == "tensor parallel degree 0: there must be at least one rank");
  BOOST_CHECK_THROW(shard_for_rank(narrow_ffn, 2, 2), std::invalid_argument);  // rank out of range
  BOOST_TEST((shardable_degrees(arch_of({9, 3, 36}), 8) == std::vector<std::uint32_t>{1, 3}));
}

BOOST_AUTO_TEST_CASE(a_layer_split_gives_the_first_gpus_one_layer_more) {
  Architecture a = arch_of({8, 8, 64});
  a.layers = 60;
  std::uint32_t total = 0;
  for (std::uint32_t g = 0; g < 7; ++g) total += layers_of_stage(a, 7, g);
  BOOST_TEST(total == 60u);
  BOOST_TEST(layers_of_stage(a, 7, 0) == 9u);  // 60 = 4 x 9 + 3 x 8
  BOOST_TEST(layers_of_stage(a, 7, 6) == 8u);
  BOOST_CHECK_THROW(layers_of_stage(a, 61, 0), std::invalid_argument);
  BOOST_CHECK_THROW(layers_of_stage(a, 7, 7), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(each_stage_starts_where_the_one_before_it_ends) {
  Architecture a = arch_of({8, 8, 64});
  for (std::uint32_t layers : {1u, 2u, 7u, 30u, 60u})
    for (std::uint32_t stages = 1; stages <= std::min(layers, 9u); ++stages) {
      a.layers = layers;
      std::uint32_t next = 0;
      for (std::uint32_t g = 0; g < stages; ++g) {
        BOOST_TEST(first_layer_of_stage(a, stages, g) == next);
        next += layers_of_stage(a, stages, g);
      }
      BOOST_TEST(next == layers);
    }
  a.layers = 60;
  BOOST_TEST(first_layer_of_stage(a, 7, 4) == 36u);  // after four stages of 9 layers
  BOOST_CHECK_THROW(first_layer_of_stage(a, 7, 7), std::invalid_argument);
}
