// actors/serving/backend.hpp: the backend registry. Every backend this build has is registered
// under its engine.backend name, a name registered twice or without a stop bound is refused, and
// the stop bound (how long a cluster's head waits for its own ranks after a worker is lost) is
// what each backend's collectives wait: the cpu backend's all-reduce 60 s, its layer split's link
// the step deadline + 10 s; the cuda backend's NCCL (no timeout of its own) the step deadline +
// 10 s, at least 60 s; nothing for one rank or for the sim backend, whose ranks never wait on
// each other.
#define BOOST_TEST_MODULE serving_backend
#include <boost/test/unit_test.hpp>

#include "actors/serving/backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace actorlm;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

bool has(const std::string& backend) {
  const auto names = serving::registered_backends();
  return std::find(names.begin(), names.end(), backend) != names.end();
}

config::Config on(config::Backend backend, std::int64_t tp, std::int64_t pp, double step_timeout_s = 60) {
  config::Config c;
  c.engine.backend = backend;
  c.engine.tensor_parallel_degree = tp;
  c.engine.pipeline_parallel_degree = pp;
  c.engine.step_timeout_s = step_timeout_s;
  return c;
}

config::Config cpu(std::int64_t tp, std::int64_t pp, double step_timeout_s = 60) {
  return on(config::Backend::cpu, tp, pp, step_timeout_s);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_sim_and_cpu_backends_are_registered_and_a_name_cannot_be_taken_twice_or_without_a_stop_bound) {
  BOOST_TEST(has("cpu"));
  BOOST_TEST(has("sim"));
  const auto names = serving::registered_backends();
  BOOST_TEST(std::is_sorted(names.begin(), names.end()));
  const serving::StopBound none = [](const config::Config&) { return milliseconds(0); };
  BOOST_CHECK_THROW(serving::register_backend("cpu", {}, none), std::logic_error);
  BOOST_CHECK_THROW(serving::register_backend("a-backend-without-a-stop-bound", {}, {}), std::logic_error);
  BOOST_TEST(!has("a-backend-without-a-stop-bound"));
}

BOOST_AUTO_TEST_CASE(cpu_ranks_stop_within_their_collectives_timeout) {
  BOOST_TEST(serving::rank_stop_bound(cpu(1, 1)).count() == 0);  // no peer to wait for
  BOOST_TEST(serving::rank_stop_bound(cpu(2, 1)).count() == milliseconds(seconds(60)).count());
  BOOST_TEST(serving::rank_stop_bound(cpu(4, 1, 300)).count() == milliseconds(seconds(60)).count());
  // A layer split: the longer of the all-reduce's 60 s and the step deadline + 10 s.
  BOOST_TEST(serving::rank_stop_bound(cpu(1, 2)).count() == milliseconds(seconds(70)).count());
  BOOST_TEST(serving::rank_stop_bound(cpu(2, 2, 120)).count() == milliseconds(seconds(130)).count());
  BOOST_TEST(serving::rank_stop_bound(cpu(1, 2, 20)).count() == milliseconds(seconds(60)).count());
  BOOST_TEST(serving::rank_stop_bound(cpu(1, 2, 0.5)).count() == 60000);
}

BOOST_AUTO_TEST_CASE(sim_ranks_stop_at_once) {
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::sim, 8, 1)).count() == 0);
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::sim, 2, 4, 300)).count() == 0);
}

BOOST_AUTO_TEST_CASE(cuda_ranks_blocked_in_nccl_are_awaited_past_the_step_deadline,
                     *boost::unit_test::precondition([](boost::unit_test::test_unit_id) { return has("cuda"); })) {
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::cuda, 1, 1)).count() == 0);
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::cuda, 2, 1)).count() == milliseconds(seconds(70)).count());
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::cuda, 8, 1, 20)).count() == milliseconds(seconds(60)).count());
  BOOST_TEST(serving::rank_stop_bound(on(config::Backend::cuda, 4, 1, 300)).count() == milliseconds(seconds(310)).count());
}

BOOST_AUTO_TEST_CASE(a_backend_this_build_lacks_is_named_with_the_ones_it_has,
                     *boost::unit_test::precondition([](boost::unit_test::test_unit_id) { return !has("cuda"); })) {
  config::Config c;
  c.engine.backend = config::Backend::cuda;
  try {
    (void)serving::rank_stop_bound(c);
    BOOST_FAIL("no error for a backend this build lacks");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("engine.backend = \"cuda\"") != std::string::npos, what);
    BOOST_TEST(what.find("cpu") != std::string::npos, what);
  }
}
