// Scenario files: the shipped ones parse into the regimes DJL Serving configured; every error
// names the file, line and dotted key that caused it (overrides included).
#define BOOST_TEST_MODULE scenario
#include <boost/test/unit_test.hpp>

#include "sim/scenario.hpp"

#include <string>

using namespace actorlm;
using sim::parse_scenario;

namespace {

const std::string dir = ACTORLM_SCENARIOS;

// A valid scenario; tests append or replace lines to break it.
const std::string base_text = R"(# line 1
[scenario]
name = "t"
seed = 3

[engine]
tensor_parallel_degree = 4

[model]
preset = "falcon-40b"

[sim]
instance = "g5.12xlarge"

[[regimes]]
name = "paged"
engine.batching = "paged"
scheduler.max_num_seqs = 32

[workload]
requests = 10
input = 32
output = 128
arrival = { process = "closed_loop", clients = 4 }
)";

// The single error of `text`, which must have exactly one.
config::ConfigError only_error(const std::string& text) {
  const auto r = parse_scenario(text, "s.toml");
  BOOST_TEST_REQUIRE(r.errors.size() == 1u, [&] {
    std::string all;
    for (const auto& e : r.errors) all += e.to_string() + "\n";
    return all;
  }());
  return r.errors.front();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_shipped_falcon_scenarios_hold_djls_three_regimes_and_two_workloads) {
  for (const char* name : {"falcon40b_g5_12xlarge_tp4.toml", "falcon40b_g5_48xlarge_tp8.toml"}) {
    const auto r = sim::load_scenario(dir + "/" + name);
    BOOST_TEST_REQUIRE(r.ok(), name << ": " << (r.errors.empty() ? "" : r.errors[0].to_string()));
    const auto& s = r.scenario;
    BOOST_TEST_REQUIRE(s.regimes.size() == 3u);
    const auto& dynamic = s.regimes[0].config;
    BOOST_TEST(s.regimes[0].name == "dynamic");
    BOOST_TEST((dynamic.engine.batching == config::Batching::dynamic));
    BOOST_TEST((dynamic.sim.parallelism == config::SimParallelism::layers));
    BOOST_TEST(dynamic.scheduler.batch_size == 4);
    BOOST_TEST(dynamic.scheduler.max_batch_delay_ms == 100.0);
    for (std::size_t i : {1u, 2u}) {
      const auto& c = s.regimes[i].config;
      BOOST_TEST((c.sim.parallelism == config::SimParallelism::tensor));
      BOOST_TEST(c.scheduler.max_num_seqs == 32);
      BOOST_TEST(c.scheduler.max_num_batched_tokens == 1024);
    }
    BOOST_TEST((s.regimes[1].config.engine.batching == config::Batching::continuous));
    BOOST_TEST((s.regimes[2].config.engine.batching == config::Batching::paged));
    BOOST_TEST(s.workloads.size() >= 2u);
    BOOST_TEST(s.workloads[0].name == "32in-128out");
    BOOST_TEST(s.workloads[1].name == "256in-32out");
    BOOST_TEST(s.slo.ttft_s.has_value());
  }
  const auto plan = sim::load_scenario(dir + "/plan_falcon40b.toml");
  BOOST_TEST_REQUIRE(plan.ok(), (plan.errors.empty() ? "" : plan.errors[0].to_string()));
  BOOST_TEST(plan.scenario.plan.has_value());
}

BOOST_AUTO_TEST_CASE(the_shipped_multinode_scenario_puts_eight_a10gs_in_one_instance_or_two) {
  const auto r = sim::load_scenario(dir + "/falcon40b_multinode.toml");
  BOOST_TEST_REQUIRE(r.ok(), (r.errors.empty() ? "" : r.errors[0].to_string()));
  const auto& g = r.scenario.regimes;
  BOOST_TEST_REQUIRE(g.size() == 5u);
  BOOST_TEST(g[0].config.sim.instance == "g5.48xlarge");
  BOOST_TEST(g[0].config.sim.nodes == 1);
  for (std::size_t i : {1u, 2u}) {
    BOOST_TEST(g[i].config.sim.instance == "g5.12xlarge");
    BOOST_TEST(g[i].config.sim.nodes == 2);
    BOOST_TEST(g[i].config.engine.tensor_parallel_degree == 8);
  }
  BOOST_TEST((g[2].config.sim.parallelism == config::SimParallelism::layers));
  BOOST_TEST(g[3].config.sim.nodes == 2);  // TP 4 x 2 stages, a stage on each
  BOOST_TEST(g[3].config.engine.tensor_parallel_degree == 4);
  BOOST_TEST(g[3].config.engine.pipeline_parallel_degree == 2);
  BOOST_TEST(g[4].config.engine.tensor_parallel_degree == 4);
  const auto plan = sim::load_scenario(dir + "/plan_falcon40b.toml");
  BOOST_TEST_REQUIRE(plan.ok());
  BOOST_TEST((plan.scenario.plan->nodes == std::vector<std::uint32_t>{1, 2}));
}

BOOST_AUTO_TEST_CASE(a_valid_scenario_parses_with_overrides_laid_over_the_base) {
  const auto r = parse_scenario(base_text, "s.toml");
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r.scenario.seed == 3u);
  BOOST_TEST(r.scenario.regimes[0].config.scheduler.max_num_seqs == 32);
  BOOST_TEST(r.scenario.regimes[0].config.engine.tensor_parallel_degree == 4);  // from the base
  BOOST_TEST(r.scenario.workloads[0].name == "workload");
}

BOOST_AUTO_TEST_CASE(a_bad_override_is_reported_at_its_line_under_the_regimes_key) {
  const auto e = only_error(replace(base_text, "scheduler.max_num_seqs = 32", "scheduler.max_num_seqs = 0"));
  BOOST_TEST(e.file == "s.toml");
  BOOST_TEST(e.line == 18u);
  BOOST_TEST(e.key == "regimes[0].scheduler.max_num_seqs");
}

BOOST_AUTO_TEST_CASE(an_unknown_key_in_a_base_section_is_reported_at_its_line) {
  const auto e = only_error(replace(base_text, "tensor_parallel_degree = 4", "tensor_parallel_degre = 4"));
  BOOST_TEST(e.line == 7u);
  BOOST_TEST(e.key == "engine.tensor_parallel_degre");
}

BOOST_AUTO_TEST_CASE(a_bad_base_value_is_reported_at_its_line) {
  const auto e = only_error(replace(base_text, "tensor_parallel_degree = 4", "tensor_parallel_degree = \"four\""));
  BOOST_TEST(e.line == 7u);
  BOOST_TEST(e.key == "engine.tensor_parallel_degree");
}

BOOST_AUTO_TEST_CASE(a_bad_workload_value_is_reported_at_its_line_and_key) {
  const auto e = only_error(replace(base_text, "input = 32", "input = -1"));
  BOOST_TEST(e.line == 22u);
  BOOST_TEST(e.key.find("workload.input") == 0u, e.key);
}

BOOST_AUTO_TEST_CASE(an_override_outside_the_config_sections_is_an_error) {
  const auto e = only_error(replace(base_text, "engine.batching = \"paged\"", "engin.batching = \"paged\""));
  BOOST_TEST(e.line == 17u);
  BOOST_TEST(e.key == "regimes[0].engin");
}

BOOST_AUTO_TEST_CASE(an_unknown_section_a_bad_slo_and_a_syntax_error_are_located) {
  auto e = only_error(base_text + "[slos]\nttft_s = 1\n");
  BOOST_TEST(e.line == 25u);
  BOOST_TEST(e.key == "slos");
  e = only_error(base_text + "[slo]\nttft_s = -1\n");
  BOOST_TEST(e.line == 26u);
  BOOST_TEST(e.key == "slo.ttft_s");
  e = only_error(base_text + "[slo\n");
  BOOST_TEST(e.line == 25u);
}

BOOST_AUTO_TEST_CASE(duplicate_regimes_and_a_missing_workload_are_errors) {
  auto e = only_error(base_text + "[[regimes]]\nname = \"paged\"\n");
  BOOST_TEST(e.key == "regimes[1].name");
  e = only_error(base_text.substr(0, base_text.find("[workload]")));
  BOOST_TEST(e.key == "workload");
}

BOOST_AUTO_TEST_CASE(a_plan_naming_an_unknown_instance_or_regime_is_located) {
  const auto r = parse_scenario(base_text + "[plan]\ninstances = [\"g5.12xlarge\", \"g9.huge\"]\n"
                                             "regimes = [\"pagd\"]\n", "s.toml");
  BOOST_TEST_REQUIRE(r.errors.size() == 2u);
  BOOST_TEST(r.errors[0].key == "plan.instances[1]");
  BOOST_TEST(r.errors[0].line == 26u);
  BOOST_TEST(r.errors[1].key == "plan.regimes[0]");
  BOOST_TEST(r.errors[1].line == 27u);
}

BOOST_AUTO_TEST_CASE(a_load_sweep_needs_a_rated_arrival_and_replaces_its_rate) {
  auto e = only_error(replace(base_text, "output = 128", "output = 128\nload_sweep = [1, 2]"));
  BOOST_TEST(e.key == "workload.load_sweep");
  const auto r = parse_scenario(
      replace(replace(base_text, "output = 128", "output = 128\nload_sweep = [1, 2.5]"),
              "{ process = \"closed_loop\", clients = 4 }", "{ process = \"poisson\", rate = 1 }"),
      "s.toml");
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r.scenario.workloads[0].load_sweep == (std::vector<double>{1, 2.5}));
  const auto at = sim::at_rate(r.scenario.workloads[0].spec, 2.5);
  BOOST_TEST(std::get<sim::PoissonArrivals>(at.arrival).rate == 2.5);
}
