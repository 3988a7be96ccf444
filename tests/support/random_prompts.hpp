#pragma once
// `n` prompts of 3 to 22 random token ids below `vocab`, the same for the same seed: the engine
// tests' requests, which compare one backend or configuration against another.

#include "actors/scheduler/request.hpp"

#include <cstdint>
#include <random>
#include <vector>

namespace actorlm::testing {

inline std::vector<std::vector<scheduler::TokenId>> random_prompts(std::size_t n, std::uint32_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<scheduler::TokenId>> out(n);
  for (auto& p : out) {
    p.resize(3 + rng() % 20);
    for (auto& t : p) t = static_cast<scheduler::TokenId>(rng() % vocab);
  }
  return out;
}

}  // namespace actorlm::testing
