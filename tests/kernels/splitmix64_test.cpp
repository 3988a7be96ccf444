// kernels/splitmix64.hpp against the published algorithm's outputs (Vigna's splitmix64.c; the
// seed 1234567 sequence is also Rosetta Code's "Pseudo-random numbers/Splitmix64" task).
#define BOOST_TEST_MODULE kernels_splitmix64
#include "kernels/splitmix64.hpp"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdint>
#include <iterator>

namespace {

using namespace actorlm::kernels;

// The generator as the reference writes it: the state advances by gamma, the output is mixed.
std::array<std::uint64_t, 5> first_five(std::uint64_t state) {
  std::array<std::uint64_t, 5> out{};
  for (auto& x : out) {
    x = splitmix64(state);
    state += splitmix64_gamma;
  }
  return out;
}

struct Reference {
  std::uint64_t seed;
  std::array<std::uint64_t, 5> outputs;
};

const Reference references[] = {
    {0,
     {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full, 0xf88bb8a8724c81ecull,
      0x1b39896a51a8749bull}},
    {1234567,
     {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
      4593380528125082431ull, 16408922859458223821ull}},
};

}  // namespace

BOOST_DATA_TEST_CASE(a_seeds_first_outputs_are_the_published_ones,
                     boost::unit_test::data::xrange(std::size(references)), i) {
  const Reference& ref = references[i];
  BOOST_TEST_CONTEXT("seed " << ref.seed) {
    BOOST_TEST(first_five(ref.seed) == ref.outputs, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(splitmix64_is_the_mix_of_state_plus_gamma_and_usable_at_compile_time) {
  static_assert(splitmix64(0) == 0xe220a8397b1dcdafull);
  static_assert(splitmix64_mix(splitmix64_gamma) == splitmix64(0));
  static_assert(splitmix64_mix(0) == 0);  // the mix alone fixes zero; the increment avoids it
  BOOST_TEST(splitmix64(41) == splitmix64_mix(41 + splitmix64_gamma));
}
