// tools/bench/fidelity_floor.hpp: the floor the twin cases' measurements set under bench
// fidelity's errors. Each bound is checked against a brute-force search over shared predictions
// on seeded random pairs (no prediction beats it, the stated one attains it), and the pairing
// against hand-made reports.
#define BOOST_TEST_MODULE tools_bench_fidelity_floor
#include "tools/bench/fidelity_floor.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace actorlm;
using namespace actorlm::bench;
namespace tt = boost::test_tools;
using M = FidelityMetrics;

double rel(double s, double m) { return std::abs(s / m - 1); }

FidelityResult result(const std::string& workload, config::Batching regime, std::uint32_t clients, double measured,
                      double simulated) {
  FidelityResult r;
  r.c.workload = workload;
  r.c.regime = regime;
  r.c.clients = clients;
  r.measured.throughput = measured;
  r.simulated.throughput = simulated;
  return r;
}

constexpr auto continuous = config::Batching::continuous;
constexpr auto paged = config::Batching::paged;

}  // namespace

BOOST_AUTO_TEST_CASE(no_shared_prediction_comes_closer_to_two_measurements_than_the_floors_and_the_stated_ones_reach_them) {
  std::mt19937_64 rng(20261205);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    const double m1 = u(rng), m2 = u(rng);
    const double sum_floor = twin_pair_sum_floor(m1, m2), max_floor = twin_pair_max_floor(m1, m2);
    BOOST_TEST(sum_floor >= 0);
    BOOST_TEST(max_floor >= 0);
    double best_sum = 1e9, best_max = 1e9;
    for (int k = 0; k <= 4000; ++k) {  // predictions from 0.25 to 4.25
      const double s = 0.25 + k * 1e-3;
      best_sum = std::min(best_sum, rel(s, m1) + rel(s, m2));
      best_max = std::min(best_max, std::max(rel(s, m1), rel(s, m2)));
    }
    // No prediction of the grid beats a floor; the grid's step is 1e-3 on predictions near 1 and
    // an error moves by at most 4e-3 per step, so its best comes within that of each floor.
    BOOST_TEST(best_sum >= sum_floor - 1e-12);
    BOOST_TEST(best_max >= max_floor - 1e-12);
    BOOST_TEST(best_sum <= sum_floor + 4e-3);
    BOOST_TEST(best_max <= max_floor + 4e-3);
    const double lo = std::min(m1, m2), hi = std::max(m1, m2);
    BOOST_TEST(std::abs(rel(lo, m1) + rel(lo, m2) - sum_floor) <= 1e-12);
    const double harmonic = 2 * m1 * m2 / (m1 + m2);
    BOOST_TEST(std::abs(std::max(rel(harmonic, m1), rel(harmonic, m2)) - max_floor) <= 1e-12);
    if (hi > lo) BOOST_TEST(rel(hi, m1) + rel(hi, m2) > sum_floor);  // the larger one does not reach it
  }
  BOOST_TEST(twin_pair_sum_floor(3, 3) == 0);
  BOOST_TEST(twin_pair_max_floor(3, 3) == 0);
}

BOOST_AUTO_TEST_CASE(twins_are_the_same_workload_and_load_in_the_other_regime_simulated_alike) {
  const std::vector<FidelityResult> cases = {
      result("short", continuous, 4, 100, 110),  // twin of the paged 4: floors 1 - 100/120, 20/220
      result("short", continuous, 16, 200, 210),  // its paged twin simulated otherwise: no pair
      result("short", paged, 4, 120, 110),
      result("short", paged, 16, 190, 230),
      result("long", continuous, 4, 50, 40),  // twin of the paged 4 below: measured alike, floor 0
      result("long", paged, 4, 50, 40),
      result("mix", paged, 4, 80, 70),  // same regime: no pair
      result("mix", paged, 4, 90, 70),
  };
  const TwinFloor f = twin_floor(cases, &M::throughput);
  BOOST_TEST(f.pairs == 2u);
  BOOST_TEST(f.mean == (1 - 100.0 / 120) / 8, tt::tolerance(1e-12));
  BOOST_TEST(f.max == 20.0 / 220, tt::tolerance(1e-12));
  // The run's own errors can be no better than its floor.
  double mean = 0, max = 0;
  for (const auto& r : cases) {
    mean += std::abs(r.error(&M::throughput)) / double(cases.size());
    max = std::max(max, std::abs(r.error(&M::throughput)));
  }
  BOOST_TEST(mean >= f.mean);
  BOOST_TEST(max >= f.max);
  // Another figure pairs on its own values: none simulated, none paired.
  const TwinFloor e2e = twin_floor(cases, &M::e2e_p90);
  BOOST_TEST(e2e.pairs == 0u);
  BOOST_TEST(e2e.mean == 0);
  BOOST_TEST(e2e.max == 0);
  BOOST_TEST(twin_floor({}, &M::throughput).pairs == 0u);
}

BOOST_AUTO_TEST_CASE(twins_pair_only_when_both_were_measured_and_their_simulations_agree_to_1e_9) {
  const std::vector<FidelityResult> cases = {
      result("short", continuous, 4, 100, 110), result("short", paged, 4, 0, 110),  // one not measured
      result("long", continuous, 4, 50, 40), result("long", paged, 4, 60, 40 * (1 + 1e-12)),  // alike
      result("mix", continuous, 4, 80, 70), result("mix", paged, 4, 90, 70 * (1 + 1e-6)),  // not alike
  };
  const TwinFloor f = twin_floor(cases, &M::throughput);
  BOOST_TEST(f.pairs == 1u);
  BOOST_TEST(f.max == 10.0 / 110, tt::tolerance(1e-12));
  BOOST_TEST(f.mean == (1 - 50.0 / 60) / 6, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(every_case_has_its_twin_and_the_twins_take_turns_to_run_first) {
  FidelityOptions o;
  const std::vector<FidelityCase> cases = fidelity_cases(o);
  BOOST_TEST_REQUIRE(cases.size() == 12u);
  std::vector<config::Batching> first;  // per workload, the regime that runs first
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const FidelityCase& c = cases[i];
    std::size_t twins = 0;
    for (const FidelityCase& d : cases)
      twins += d.workload == c.workload && d.clients == c.clients && d.regime != c.regime ? 1 : 0;
    BOOST_TEST(twins == 1u, c.workload << " " << c.clients);
    if (i % 4 == 0) first.push_back(c.regime);
  }
  BOOST_TEST((first == std::vector<config::Batching>{continuous, paged, continuous}));
}

BOOST_AUTO_TEST_CASE(a_case_pairs_with_one_twin_only) {
  // Three regimes' worth of cases alike (rounds of the same case are not cases): the first two pair,
  // the third stays alone.
  const std::vector<FidelityResult> cases = {result("short", continuous, 4, 100, 105), result("short", paged, 4, 110, 105),
                                             result("short", continuous, 4, 200, 105)};
  const TwinFloor f = twin_floor(cases, &M::throughput);
  BOOST_TEST(f.pairs == 1u);
  BOOST_TEST(f.max == 10.0 / 210, tt::tolerance(1e-12));
}
