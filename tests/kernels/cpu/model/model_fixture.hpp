#pragma once
// Tiny random-weight models and their HF transformers reference outputs, committed under
// fixtures/ by tools/models/make_reference_models.py, and a one-sequence runner over them.

#include "kernels/cpu/model/transformer.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <string>

namespace actorlm::testing {

inline std::string fixture(const std::string& name) { return std::string(ACTORLM_MODEL_FIXTURES) + "/" + name; }

struct Reference {
  std::vector<std::int32_t> prompt;
  std::vector<std::vector<float>> logits;  // [prompt, vocab]
  std::vector<std::int32_t> greedy;
  std::vector<double> margins;             // top-2 logit margin at each greedy step
};

inline Reference load_reference(const std::string& name) {
  std::ifstream in(fixture(name));
  const auto j = nlohmann::json::parse(in);
  Reference r;
  r.prompt = j.at("prompt").get<std::vector<std::int32_t>>();
  r.logits = j.at("logits").get<std::vector<std::vector<float>>>();
  r.greedy = j.at("greedy").get<std::vector<std::int32_t>>();
  if (j.contains("greedy_top2_margins")) r.margins = j.at("greedy_top2_margins").get<std::vector<double>>();
  return r;
}

struct LoadedModel {
  std::unique_ptr<model::TensorSource> source;
  model::Architecture spec;
  kernels::cpu::ModelWeights weights;
};

inline LoadedModel load_model(const std::string& name, std::int32_t rank = 0, std::int32_t world = 1,
                              kernels::cpu::WeightStorage storage = kernels::cpu::WeightStorage::stored) {
  LoadedModel m;
  m.source = model::open_tensor_source(fixture(name));
  m.spec = model::read_architecture(*m.source);
  m.weights = kernels::cpu::load_weights(*m.source, m.spec, rank, world, storage);
  return m;
}

// A shuffled block table over a cache of `blocks` blocks (seeded), long enough for `tokens`.
inline std::vector<std::uint32_t> shuffled_table(std::uint32_t blocks, std::uint32_t block_size,
                                                 std::uint32_t tokens, unsigned seed) {
  std::vector<std::uint32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0u);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  ids.resize((tokens + block_size - 1) / block_size);
  return ids;
}

}  // namespace actorlm::testing
