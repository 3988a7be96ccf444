// SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"; the
// reference is Vigna's splitmix64.c): the one copy of the counter-based hash behind the sampler's
// draws, the simulator's tokens and prompts and the workload's independent streams.
//
// Why here: header-only plain C++ at the bottom of the dependency order (no CAF, no library to
// link), so kernels/, actors/, sim/, tools/ and tests/ may all include it. It sits beside the
// kernels because the sampler is its reference user; it is not a model-file concern (model/).
#pragma once

#include <cstdint>

namespace actorlm::kernels {

// The generator's increment (2^64 / golden ratio, odd).
inline constexpr std::uint64_t splitmix64_gamma = 0x9e3779b97f4a7c15ull;

// The output function alone (Stafford's "Mix13" variant of MurmurHash3's finalizer): a bijection
// on 64 bits with good avalanche. For callers that fold the increment into their own counter.
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The next output of a generator whose state is `state`: state + gamma, mixed. Stateless, so it
// doubles as a hash; the generator's k-th output from seed s is splitmix64(s + (k - 1) * gamma).
constexpr std::uint64_t splitmix64(std::uint64_t state) {
  return splitmix64_mix(state + splitmix64_gamma);
}

}  // namespace actorlm::kernels
