// The failure-handling keys: engine.step_timeout_s, and the sim backend's fault injection
// (sim.fault, sim.fault_step, sim.fault_rank): defaults, a round trip through `config show`,
// and one error per way they can be wrong, under the right key and with what was found.
#define BOOST_TEST_MODULE actors_config_failure_keys
#include "actors/config/config.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>
#include <vector>

using namespace actorlm::config;
namespace data = boost::unit_test::data;

namespace {

struct BadCase {
  const char* name;
  const char* toml;
  const char* key;
  const char* message;  // a distinctive part of the expected message
};
std::ostream& operator<<(std::ostream& out, const BadCase& c) { return out << c.name; }

const std::vector<BadCase> bad_cases = {
    {"step_timeout_zero", "[engine]\nstep_timeout_s = 0\n", "engine.step_timeout_s", "found 0"},
    {"step_timeout_negative", "[engine]\nstep_timeout_s = -5.0\n", "engine.step_timeout_s", "found -5"},
    {"step_timeout_a_string", "[engine]\nstep_timeout_s = \"60s\"\n", "engine.step_timeout_s", "found a string"},
    {"fault_unknown_name", "[sim]\nfault = \"crash\"\n", "sim.fault", "\"none\", \"error\", \"hang\", \"exit\""},
    {"fault_step_zero", "[sim]\nfault = \"error\"\nfault_step = 0\n", "sim.fault_step", "found 0"},
    {"fault_rank_out_of_range", "[sim]\nfault = \"exit\"\nfault_rank = 64\n", "sim.fault_rank", "found 64"},
    {"fault_rank_past_the_degree", "[engine]\ntensor_parallel_degree = 2\n[sim]\nfault = \"exit\"\nfault_rank = 2\n",
     "sim.fault_rank", "must be below engine.tensor_parallel_degree (2)"},
    {"error_fault_on_a_rank_nobody_awaits",
     "[engine]\ntensor_parallel_degree = 4\n[sim]\nfault = \"error\"\nfault_rank = 1\n", "sim.fault_rank",
     "needs sim.fault_rank = 0 (found 1)"},
    {"hang_fault_on_a_rank_nobody_awaits", "[engine]\ntensor_parallel_degree = 4\n[sim]\nfault = \"hang\"\nfault_rank = 3\n",
     "sim.fault_rank", "use \"exit\" to stop another rank"},
};

}  // namespace

BOOST_AUTO_TEST_CASE(defaults_are_a_generous_step_timeout_and_no_fault) {
  const Config c;
  BOOST_TEST(c.engine.step_timeout_s == 60.0);
  BOOST_TEST((c.sim.fault == SimFault::none));
  BOOST_TEST(c.sim.fault_step == 1);
  BOOST_TEST(c.sim.fault_rank == 0);
}

BOOST_AUTO_TEST_CASE(the_keys_parse_and_survive_config_show) {
  const auto r = parse_config(
      "[engine]\nstep_timeout_s = 2.5\ntensor_parallel_degree = 4\n[sim]\nfault = \"exit\"\nfault_step = 7\nfault_rank = 3\n",
      "t.toml");
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.errors.empty() ? "" : r.errors[0].to_string()));
  BOOST_TEST(r.config.engine.step_timeout_s == 2.5);
  BOOST_TEST((r.config.sim.fault == SimFault::exit));
  BOOST_TEST(r.config.sim.fault_step == 7);
  BOOST_TEST(r.config.sim.fault_rank == 3);
  const auto again = parse_config(to_toml(r.config), "shown.toml");
  BOOST_REQUIRE(again.ok());
  BOOST_TEST((again.config == r.config));
}

BOOST_DATA_TEST_CASE(each_bad_value_is_one_error_naming_its_key, data::make(bad_cases), c) {
  const auto r = parse_config(c.toml, "bad.toml");
  BOOST_REQUIRE_EQUAL(r.errors.size(), 1u);
  BOOST_TEST(r.errors[0].key == c.key);
  BOOST_TEST(r.errors[0].message.find(c.message) != std::string::npos, r.errors[0].to_string());
  BOOST_TEST(r.errors[0].line > 0u);
}
