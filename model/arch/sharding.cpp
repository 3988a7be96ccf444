#include "model/arch/sharding.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace actorlm::model {

namespace {

// Why `a` does not split over `degree` ranks; empty when it does.
std::string refusal(const Architecture& a, std::uint32_t degree) {
  if (degree == 0) return "tensor parallel degree 0: there must be at least one rank";
  const std::string n = std::to_string(degree);
  if (a.heads % degree != 0)
    return std::to_string(a.heads) + " attention heads cannot be split evenly over " + n + " ranks";
  if (a.kv_heads % degree != 0 && degree % a.kv_heads != 0)
    return std::to_string(a.kv_heads) + " KV heads cannot be split evenly over " + n +
           " ranks, nor replicated (the ranks are not a multiple of them)";
  if (a.ffn % degree != 0)
    return std::to_string(a.ffn) + " FFN columns cannot be split evenly over " + n + " ranks";
  return {};
}

}  // namespace

std::vector<std::uint32_t> shardable_degrees(const Architecture& a, std::uint32_t max_degree) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t d = 1; d <= max_degree; ++d)
    if (refusal(a, d).empty()) out.push_back(d);
  return out;
}

void check_shardable(const Architecture& a, std::uint32_t degree) {
  if (a.heads == 0 || a.kv_heads == 0 || a.ffn == 0)
    throw std::invalid_argument("cannot shard an architecture with no heads, KV heads or FFN columns");
  const std::string why = refusal(a, degree);
  if (why.empty()) return;
  if (degree == 0) throw std::invalid_argument(why);
  // Name the degrees that work, up to the largest that could (every rank needs a query head).
  std::string can;
  for (std::uint32_t d : shardable_degrees(a, a.heads)) can += (can.empty() ? "" : ", ") + std::to_string(d);
  throw std::invalid_argument("tensor parallel degree " + std::to_string(degree) + ": " + why +
                              " (degrees that can: " + can + ")");
}

RankShard shard_for_rank(const Architecture& a, std::uint32_t rank, std::uint32_t degree) {
  check_shardable(a, degree);
  if (rank >= degree)
    throw std::invalid_argument("tensor parallel degree " + std::to_string(degree) + ": rank " +
                                std::to_string(rank) + " out of range");
  RankShard r;
  r.rank = rank;
  r.degree = degree;
  r.q_heads = a.heads / degree;
  r.q_begin = rank * r.q_heads;
  // A rank's query heads read the KV heads of their groups: heads / degree query heads span
  // kv_heads / degree groups when the KV heads split, or lie inside one group when they are
  // replicated (degree = kv_heads x m with m dividing the group size, as heads % degree == 0).
  const std::uint32_t group = a.heads / a.kv_heads;
  r.kv_begin = r.q_begin / group;
  r.kv_heads = (r.q_begin + r.q_heads - 1) / group + 1 - r.kv_begin;
  r.kv_replicated = a.kv_heads < degree;
  r.ffn_columns = a.ffn / degree;
  r.ffn_begin = rank * r.ffn_columns;
  r.vocab_rows = (a.vocab + degree - 1) / degree;
  return r;
}

std::uint64_t layer_weight_elements(const Architecture& a, const RankShard& r) {
  const std::uint64_t h = a.hidden, d = a.head_dim;
  return h * (r.q_heads + 2ull * r.kv_heads) * d                    // QKV: [(q + 2 kv) d, hidden]
         + std::uint64_t{r.q_heads} * d * h                          // attention output: [hidden, q d]
         + std::uint64_t{a.ffn_matrices()} * h * r.ffn_columns       // MLP
         + std::uint64_t{a.norms_per_layer} * a.norm_params();       // replicated
}

std::uint64_t kv_elements_per_token(const Architecture& a, const RankShard& r, std::uint32_t layers) {
  return 2ull * layers * r.kv_heads * a.head_dim;
}

std::uint32_t layers_of_stage(const Architecture& a, std::uint32_t stages, std::uint32_t stage) {
  if (stages == 0 || stages > a.layers)
    throw std::invalid_argument(std::to_string(a.layers) + " layers cannot be split over " +
                                std::to_string(stages) + " GPUs");
  if (stage >= stages)
    throw std::invalid_argument("GPU " + std::to_string(stage) + " of a " + std::to_string(stages) +
                                "-GPU layer split is out of range");
  return a.layers / stages + (stage < a.layers % stages ? 1 : 0);
}

std::uint32_t first_layer_of_stage(const Architecture& a, std::uint32_t stages, std::uint32_t stage) {
  layers_of_stage(a, stages, stage);  // the same refusals
  return stage * (a.layers / stages) + std::min(stage, a.layers % stages);
}

}  // namespace actorlm::model
