// parse_workload: the TOML schema of a workload table, and its error messages.
#define BOOST_TEST_MODULE sim_workload_toml
#include "sim/workload.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace actorlm::sim;

namespace {

std::string errors_of(const WorkloadParse& parsed) {
  std::string out;
  for (const auto& e : parsed.errors) out += e.to_string() + '\n';
  return out;
}

WorkloadParse parse(std::string_view text, std::string_view file = "scenario.toml") {
  const toml::table root = toml::parse(text, file);
  return parse_workload(*root["workload"].as_table());
}

WorkloadSpec parse_ok(std::string_view text, std::string_view file = "scenario.toml") {
  WorkloadParse parsed = parse(text, file);
  BOOST_TEST_REQUIRE(parsed.ok(), "unexpected errors:\n" << errors_of(parsed));
  return parsed.spec;
}

}  // namespace

BOOST_AUTO_TEST_CASE(integer_lengths_are_fixed_and_poisson_needs_a_rate) {
  const WorkloadSpec spec = parse_ok(R"(
[workload]
requests = 500
input = 32
output = 128
arrival = { process = "poisson", rate = 2.5 }
)");
  BOOST_TEST(spec.requests == 500u);
  BOOST_TEST(std::get<FixedLength>(spec.input).value == 32u);
  BOOST_TEST(std::get<FixedLength>(spec.output).value == 128u);
  BOOST_TEST(std::get<PoissonArrivals>(spec.arrival).rate == 2.5);
}

BOOST_AUTO_TEST_CASE(distribution_tables_fill_every_field) {
  const WorkloadSpec spec = parse_ok(R"(
[workload]
requests = 10
[workload.input]
distribution = "normal"
mean = 256
sd = 64.5
max = 1024
[workload.output]
distribution = "lognormal"
mu = 4
sigma = 0.5
min = 2
[workload.arrival]
process = "gamma"
rate = 3
burstiness = 4.0
)");
  const auto& input = std::get<NormalLength>(spec.input);
  BOOST_TEST(input.mean == 256.0);
  BOOST_TEST(input.sd == 64.5);
  BOOST_TEST(input.min == 1u);
  BOOST_TEST(input.max == 1024u);
  const auto& output = std::get<LogNormalLength>(spec.output);
  BOOST_TEST(output.mu == 4.0);
  BOOST_TEST(output.sigma == 0.5);
  BOOST_TEST(output.min == 2u);
  BOOST_TEST(output.max == default_max_length);
  const auto& gamma = std::get<GammaArrivals>(spec.arrival);
  BOOST_TEST(gamma.rate == 3.0);
  BOOST_TEST(gamma.burstiness == 4.0);
}

BOOST_AUTO_TEST_CASE(lognormal_by_mean_and_sd_and_closed_loop_clients) {
  const WorkloadSpec spec = parse_ok(R"(
[workload]
requests = 64
input = { distribution = "uniform", min = 8, max = 16 }
output = { distribution = "lognormal", mean = 100, sd = 50 }
arrival = { process = "closed_loop", clients = 8, think_time_s = 0.25 }
)");
  const auto& u = std::get<UniformLength>(spec.input);
  BOOST_TEST(u.min == 8u);
  BOOST_TEST(u.max == 16u);
  const auto expected = lognormal_from_mean_sd(100, 50, 1, default_max_length);
  BOOST_TEST(std::get<LogNormalLength>(spec.output).mu == expected.mu);
  BOOST_TEST(std::get<LogNormalLength>(spec.output).sigma == expected.sigma);
  BOOST_TEST(closed_loop_clients(spec).value_or(0) == 8u);
  BOOST_TEST(std::get<ClosedLoopArrivals>(spec.arrival).think_time_s == 0.25);
}

BOOST_AUTO_TEST_CASE(a_bad_value_is_reported_with_position_and_dotted_key) {
  const WorkloadParse parsed = parse(R"([workload]
requests = 10
output = 4
arrival = { process = "poisson", rate = 1 }
[workload.input]
distribution = "normal"
mean = -3
sd = 1
)");
  BOOST_TEST(errors_of(parsed) ==
             "scenario.toml:7:8: workload.input.mean: expected a number > 0, found -3\n");
}

BOOST_AUTO_TEST_CASE(missing_and_unknown_keys_are_errors) {
  const WorkloadParse parsed = parse(R"([workload]
requests = 10
input = { distribution = "uniform", min = 4 }
output = 8
outptu = 9
arrival = { process = "gamma", rate = 1, burstines = 2 }
)");
  BOOST_TEST(errors_of(parsed) ==
             "scenario.toml:3:9: workload.input.max: required key is missing (for distribution = "
             "\"uniform\")\n"
             "scenario.toml:5:1: workload.outptu: unknown key in a workload; did you mean 'output'?\n"
             "scenario.toml:6:11: workload.arrival.burstiness: required key is missing (for process = "
             "\"gamma\")\n"
             "scenario.toml:6:42: workload.arrival.burstines: unknown key for process = \"gamma\"; "
             "did you mean 'burstiness'?\n");
}

BOOST_AUTO_TEST_CASE(wrong_types_and_choices_name_what_was_found) {
  const WorkloadParse parsed = parse(R"([workload]
requests = "ten"
input = 0
output = { distribution = "poisson" }
arrival = { process = "poisson", rate = 1 }
)");
  BOOST_TEST(errors_of(parsed) ==
             "scenario.toml:2:12: workload.requests: expected an integer, found a string (\"ten\")\n"
             "scenario.toml:3:9: workload.input: expected an integer in [1, 4294967295], found 0\n"
             "scenario.toml:4:27: workload.output.distribution: expected one of \"fixed\", "
             "\"uniform\", \"normal\", \"lognormal\", found \"poisson\"\n");
}

BOOST_AUTO_TEST_CASE(a_trace_is_loaded_relative_to_the_toml_file) {
  const std::string file = std::string(ACTORLM_SIM_FIXTURES) + "/scenario.toml";
  const WorkloadSpec spec = parse_ok(R"([workload]
requests = 2
arrival = { process = "trace", path = "mooncake_small.jsonl", speedup = 2 }
)", file);
  const auto& trace = std::get<TraceReplay>(spec.arrival);
  BOOST_TEST(trace.rows.size() == 3u);
  BOOST_TEST(trace.speedup == 2.0);
  const auto requests = generate(spec, 0);
  BOOST_TEST_REQUIRE(requests.size() == 2u);
  BOOST_TEST(requests[1].arrival_ns == 13'741'000'000);  // 27482 ms / 2
}

BOOST_AUTO_TEST_CASE(a_trace_takes_no_length_tables_and_its_errors_name_the_trace_file) {
  const std::string dir = ACTORLM_SIM_FIXTURES;
  WorkloadParse parsed = parse(R"([workload]
input = 3
arrival = { process = "trace", path = "mooncake_small.jsonl" }
)", dir + "/scenario.toml");
  BOOST_TEST(errors_of(parsed) == dir + "/scenario.toml:2:9: workload.input: not used with "
                                        "process = \"trace\" (the trace gives lengths)\n");
  parsed = parse(R"([workload]
arrival = { process = "trace", path = "azure_negative_length.csv" }
)", dir + "/scenario.toml");
  BOOST_TEST(errors_of(parsed) == dir + "/azure_negative_length.csv:3:8: GeneratedTokens: "
                                        "expected a token count >= 0, found -4\n");
}

BOOST_AUTO_TEST_CASE(max_tokens_is_read_for_drawn_and_traced_lengths_and_must_be_positive) {
  BOOST_TEST(parse_ok(R"([workload]
requests = 5
input = 8
output = 16
max_tokens = 512
arrival = { process = "poisson", rate = 1 }
)").max_tokens == 512u);
  BOOST_TEST(parse_ok(R"([workload]
requests = 5
input = 8
output = 16
arrival = { process = "poisson", rate = 1 }
)").max_tokens == 0u);
  const std::string file = std::string(ACTORLM_SIM_FIXTURES) + "/scenario.toml";
  BOOST_TEST(parse_ok(R"([workload]
max_tokens = 64
arrival = { process = "trace", path = "mooncake_small.jsonl" }
)", file).max_tokens == 64u);
  BOOST_TEST(errors_of(parse(R"([workload]
requests = 5
input = 8
output = 16
max_tokens = 0
arrival = { process = "poisson", rate = 1 }
)")) == "scenario.toml:5:14: workload.max_tokens: expected an integer in [1, 4294967295], found 0\n");
}
