// parse_config, load_config and to_toml on valid input, and the shape of their error reports.
#define BOOST_TEST_MODULE actors_config_config_parse
#include "actors/config/config.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace actorlm::config;

namespace {

// Every error, one per line, so a failing check shows what the parser said.
std::string describe(const ParseResult& result) {
  std::string out;
  for (const ConfigError& e : result.errors) out += e.to_string() + '\n';
  return out;
}

ParseResult parse_ok(std::string_view text) {
  ParseResult result = parse_config(text, "test.toml");
  BOOST_TEST_REQUIRE(result.ok(), "unexpected errors:\n" << describe(result));
  return result;
}

constexpr std::string_view full_config = R"(# every key set, none to its default
[server]
host = "0.0.0.0"
port = 9000
api_key = "s3cr\"et\\key"
max_body_bytes = 4096
drain_timeout_s = 5.5
log_prompts = true
io_threads = 3
max_connections = 500
header_timeout_s = 2.5
body_timeout_s = 7.0
keep_alive_timeout_s = 1.5
write_timeout_s = 9.0

[engine]
backend = "sim"
tensor_parallel_degree = 4
batching = "continuous"
seed = 42

[cache]
block_size = 32
gpu_memory_utilization = 0.85
swap_space = 8.5
prefix_caching = false
watermark = 0.05
num_gpu_blocks_override = 1000
dtype = "f32"

[scheduler]
max_num_seqs = 64
max_num_batched_tokens = 4096
max_batch_delay_ms = 20.0
batch_size = 8
chunked_prefill = true
preemption = "swap"
max_queue_len = 100
priority_aging_per_s = 2.5

[model]
name = "falcon"
path = "/models/falcon"
preset = "falcon-40b"
max_model_len = 8192
weights = "f32"

[sim]
hardware = "a100"
instance = "p4d.24xlarge"
nodes = 2
clock = "wall"
seed = 7
parallelism = "layers"
hardware_catalogue = "my_hardware.toml"
model_catalogue = "my_models.toml"

[cluster]
workers = ["node1:9000", "[::1]:9001"]
placement = [0, 0, 1, 1]
insecure = true
connect_timeout_s = 30.0
heartbeat_interval_s = 1.0
)";

}  // namespace

BOOST_AUTO_TEST_CASE(fills_every_default_when_the_file_is_empty) {
  const ParseResult result = parse_ok("");
  BOOST_TEST((result.config == Config{}));
  BOOST_TEST(result.config.server.host == "127.0.0.1");
  BOOST_TEST(result.config.scheduler.max_num_seqs == 256);
  BOOST_TEST((result.config.scheduler.preemption == Preemption::automatic));
  BOOST_TEST((result.config.sim.clock == SimClock::virtual_time));
  BOOST_TEST(result.config.cluster.workers.empty());
}

BOOST_AUTO_TEST_CASE(fills_the_defaults_of_absent_keys_in_a_present_section) {
  const ParseResult result = parse_ok("[cache]\nblock_size = 64\n");
  Config expected;
  expected.cache.block_size = 64;
  BOOST_TEST((result.config == expected));
}

BOOST_AUTO_TEST_CASE(reads_every_key_of_a_full_file) {
  const Config c = parse_ok(full_config).config;
  BOOST_TEST(c.server.host == "0.0.0.0");
  BOOST_TEST(c.server.port == 9000);
  BOOST_TEST(c.server.api_key == "s3cr\"et\\key");
  BOOST_TEST(c.server.max_body_bytes == 4096);
  BOOST_TEST(c.server.drain_timeout_s == 5.5);
  BOOST_TEST(c.server.log_prompts);
  BOOST_TEST(c.server.io_threads == 3);
  BOOST_TEST(c.server.max_connections == 500);
  BOOST_TEST(c.server.header_timeout_s == 2.5);
  BOOST_TEST(c.server.body_timeout_s == 7.0);
  BOOST_TEST(c.server.keep_alive_timeout_s == 1.5);
  BOOST_TEST(c.server.write_timeout_s == 9.0);
  BOOST_TEST((c.engine.backend == Backend::sim));
  BOOST_TEST(c.engine.tensor_parallel_degree == 4);
  BOOST_TEST((c.engine.batching == Batching::continuous));
  BOOST_TEST(c.engine.seed == 42);
  BOOST_TEST(c.cache.block_size == 32);
  BOOST_TEST(c.cache.gpu_memory_utilization == 0.85);
  BOOST_TEST(c.cache.swap_space == 8.5);
  BOOST_TEST(!c.cache.prefix_caching);
  BOOST_TEST(c.cache.watermark == 0.05);
  BOOST_TEST(c.cache.num_gpu_blocks_override == 1000);
  BOOST_TEST((c.cache.dtype == CacheDtype::f32));
  BOOST_TEST(c.scheduler.max_num_seqs == 64);
  BOOST_TEST(c.scheduler.max_num_batched_tokens == 4096);
  BOOST_TEST(c.scheduler.max_batch_delay_ms == 20.0);
  BOOST_TEST(c.scheduler.batch_size == 8);
  BOOST_TEST(c.scheduler.chunked_prefill);
  BOOST_TEST((c.scheduler.preemption == Preemption::swap));
  BOOST_TEST(c.scheduler.max_queue_len == 100);
  BOOST_TEST(c.scheduler.priority_aging_per_s == 2.5);
  BOOST_TEST(c.model.name == "falcon");
  BOOST_TEST(c.model.path == "/models/falcon");
  BOOST_TEST((c.model.weights == CpuWeights::f32));
  BOOST_TEST(c.model.preset == "falcon-40b");
  BOOST_TEST(c.model.max_model_len == 8192);
  BOOST_TEST(c.sim.hardware == "a100");
  BOOST_TEST(c.sim.instance == "p4d.24xlarge");
  BOOST_TEST(c.sim.nodes == 2);
  BOOST_TEST((c.sim.clock == SimClock::wall));
  BOOST_TEST(c.sim.seed == 7);
  BOOST_TEST((c.sim.parallelism == SimParallelism::layers));
  BOOST_TEST(c.sim.hardware_catalogue == "my_hardware.toml");
  BOOST_TEST(c.sim.model_catalogue == "my_models.toml");
  BOOST_TEST(c.cluster.placement == (std::vector<std::int64_t>{0, 0, 1, 1}));
  BOOST_TEST(c.cluster.insecure);
  BOOST_TEST(c.cluster.connect_timeout_s == 30.0);
  BOOST_TEST(c.cluster.heartbeat_interval_s == 1.0);
  BOOST_TEST(c.cluster.workers == (std::vector<std::string>{"node1:9000", "[::1]:9001"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_head_may_host_ranks_beside_its_workers) {
  const Config local = parse_ok("[engine]\ntensor_parallel_degree = 3\n[cluster]\nworkers = [\"head\", \"127.0.0.1:7101\"]\n").config;
  BOOST_TEST(local.cluster.workers.front() == "head");
  BOOST_TEST(head_data_address(local.cluster) == "127.0.0.1");  // every worker on loopback
  BOOST_TEST(worker_of_rank(local.cluster, 3) == (std::vector<std::uint32_t>{0, 1, 1}), boost::test_tools::per_element());
  const Config remote = parse_ok(
      "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"10.0.0.2:7101\", \"head\"]\n"
      "head_data_address = \"10.0.0.1\"\ninsecure = true\n").config;
  BOOST_TEST(head_data_address(remote.cluster) == "10.0.0.1");
}

BOOST_AUTO_TEST_CASE(accepts_an_integer_where_a_float_is_expected) {
  const Config c = parse_ok("[cache]\nswap_space = 4\ngpu_memory_utilization = 1\n"
                            "[server]\ndrain_timeout_s = 0\n").config;
  BOOST_TEST(c.cache.swap_space == 4.0);
  BOOST_TEST(c.cache.gpu_memory_utilization == 1.0);
  BOOST_TEST(c.server.drain_timeout_s == 0.0);
}

BOOST_AUTO_TEST_CASE(round_trips_the_defaults_through_to_toml) {
  const std::string text = to_toml(Config{});
  const ParseResult result = parse_ok(text);
  BOOST_TEST((result.config == Config{}), "re-parsed config differs:\n" << to_toml(result.config));
}

BOOST_AUTO_TEST_CASE(round_trips_a_non_default_config_through_to_toml) {
  Config c = parse_ok(full_config).config;
  c.model.name = "tab\there, newline\nthere, bell\a, é";  // escapes and UTF-8
  c.cache.swap_space = 1e-7;                             // prints in exponent form
  c.server.drain_timeout_s = 3.0;                        // must print as a float
  c.engine.seed = 9'000'000'000'000'000'000;
  const std::string text = to_toml(c);
  BOOST_TEST(text.find("drain_timeout_s = 3.0\n") != std::string::npos, text);
  const ParseResult result = parse_ok(text);
  BOOST_TEST((result.config == c), "re-parsed config differs:\n" << to_toml(result.config));
}

BOOST_AUTO_TEST_CASE(a_cuda_process_may_list_gpus_for_fewer_ranks_than_the_engine_and_they_round_trip) {
  // A cluster worker's config: it hosts some of the ranks, which only loading tells it.
  Config c = parse_ok("[engine]\nbackend = \"cuda\"\ntensor_parallel_degree = 3\ndevices = [2, 0]\n").config;
  BOOST_TEST((c.engine.devices == std::vector<std::int64_t>{2, 0}));
  BOOST_TEST((parse_ok(to_toml(c)).config == c));
}

BOOST_AUTO_TEST_CASE(lists_every_section_in_schema_order) {
  const std::string text = to_toml(Config{});
  std::size_t previous = 0;
  for (const char* section :
       {"[server]", "[engine]", "[cache]", "[scheduler]", "[model]", "[sim]", "[cluster]"}) {
    const std::size_t at = text.find(std::string("\n") + section + "\n");
    BOOST_TEST_REQUIRE(at != std::string::npos, section << " missing from:\n" << text);
    BOOST_TEST(at > previous, section << " out of order");
    previous = at;
  }
}

BOOST_AUTO_TEST_CASE(lists_the_keys_of_a_section_in_schema_order) {
  const std::string text = to_toml(Config{});
  const std::size_t seqs = text.find("max_num_seqs = 256\n");
  const std::size_t tokens = text.find("max_num_batched_tokens = 8192\n");
  const std::size_t preemption = text.find("preemption = \"auto\"\n");
  const std::size_t queue = text.find("max_queue_len = 1024\n");
  BOOST_TEST(seqs != std::string::npos);
  BOOST_TEST(seqs < tokens);
  BOOST_TEST(tokens < preemption);
  BOOST_TEST(preemption < queue);
  BOOST_TEST(text.find("workers = []\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reports_errors_in_file_order_with_exact_positions) {
  // Found section by section (engine before cache before scheduler), reported by position.
  const ParseResult result = parse_config("[scheduler]\n"
                                          "max_num_seqs = 0\n"
                                          "[cache]\n"
                                          "   block_size = \"16\"\n"
                                          "[engine]\n"
                                          "backend = \"gpu\"\n"
                                          "  tensor_paralel_degree = 2\n",
                                          "order.toml");
  BOOST_TEST_REQUIRE(result.errors.size() == 4u, describe(result));
  const std::vector<std::string> expected = {
      "order.toml:2:16: scheduler.max_num_seqs: expected an integer in [1, 65536], found 0",
      "order.toml:4:17: cache.block_size: expected an integer, found a string (\"16\")",
      "order.toml:6:11: engine.backend: expected one of \"sim\", \"cpu\", \"cuda\", found \"gpu\"",
      "order.toml:7:3: engine.tensor_paralel_degree: unknown key; did you mean "
      "'tensor_parallel_degree'?",
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    BOOST_TEST(result.errors[i].to_string() == expected[i]);
  }
  BOOST_TEST(result.errors[0].line == 2u);
  BOOST_TEST(result.errors[0].column == 16u);
  BOOST_TEST(result.errors[0].file == "order.toml");
  BOOST_TEST(result.errors[0].key == "scheduler.max_num_seqs");
}

BOOST_AUTO_TEST_CASE(reports_several_errors_at_once) {
  const ParseResult result = parse_config("[server]\nport = -1\nhost = \"\"\n"
                                          "[cache]\nblock_size = 24\nwatermark = 0.5\n"
                                          "[sim]\nclock = \"fast\"\n"
                                          "[cluster]\nworkers = [\"a:1\", \"node2\", 3]\n",
                                          "many.toml");
  BOOST_TEST(result.errors.size() == 7u, describe(result));
  BOOST_TEST((result.config == Config{}), "a config with errors is left at its defaults");
}

BOOST_AUTO_TEST_CASE(rejects_a_weights_type_the_cpu_backend_does_not_keep) {
  const ParseResult result = parse_config("[model]\nweights = \"q4_1\"\n", "weights.toml");
  BOOST_TEST_REQUIRE(result.errors.size() == 1u, describe(result));
  BOOST_TEST(result.errors[0].key == "model.weights");
  BOOST_TEST(result.errors[0].message.find("\"stored\"") != std::string::npos, describe(result));
}

BOOST_AUTO_TEST_CASE(reads_both_kv_cache_dtypes_and_shows_the_default) {
  BOOST_TEST((Config{}.cache.dtype == CacheDtype::f16));
  BOOST_TEST((parse_ok("[cache]\ndtype = \"f16\"\n").config.cache.dtype == CacheDtype::f16));
  BOOST_TEST((parse_ok("[cache]\ndtype = \"f32\"\n").config.cache.dtype == CacheDtype::f32));
  BOOST_TEST(to_toml(Config{}).find("\n[cache]\n") < to_toml(Config{}).find("dtype = \"f16\"\n"));
  Config c;
  c.cache.dtype = CacheDtype::f32;
  BOOST_TEST((parse_ok(to_toml(c)).config == c));
}

BOOST_AUTO_TEST_CASE(rejects_a_kv_cache_dtype_the_cpu_backend_does_not_have) {
  for (const char* bad : {"\"bf16\"", "\"F16\"", "16"}) {
    const ParseResult result = parse_config(std::string("[cache]\ndtype = ") + bad + "\n", "dtype.toml");
    BOOST_TEST_REQUIRE(result.errors.size() == 1u, describe(result));
    BOOST_TEST(result.errors[0].key == "cache.dtype", describe(result));
    BOOST_TEST(result.errors[0].line == 2u);
    BOOST_TEST_MESSAGE(result.errors[0].to_string());
  }
  const ParseResult r = parse_config("[cache]\ndtype = \"bf16\"\n", "dtype.toml");
  BOOST_TEST(r.errors.at(0).message.find("\"f16\"") != std::string::npos, describe(r));
  BOOST_TEST(r.errors.at(0).message.find("\"f32\"") != std::string::npos, describe(r));
}

BOOST_AUTO_TEST_CASE(reports_a_syntax_error_alone_with_its_position) {
  const ParseResult result = parse_config("[server]\nport = \n", "syntax.toml");
  BOOST_TEST_REQUIRE(result.errors.size() == 1u, describe(result));
  BOOST_TEST(result.errors[0].line == 2u);
  BOOST_TEST(result.errors[0].column == 8u);
  BOOST_TEST(result.errors[0].key.empty());
}

BOOST_AUTO_TEST_CASE(skips_cross_field_rules_for_values_already_rejected) {
  // max_num_seqs = 0 is out of range; comparing the default 256 with 100 would only confuse.
  const ParseResult result =
      parse_config("[scheduler]\nmax_num_seqs = 0\nmax_num_batched_tokens = 100\nchunked_prefill = true\n",
                   "x.toml");
  BOOST_TEST(result.errors.size() == 1u, describe(result));
}

BOOST_AUTO_TEST_CASE(reports_a_missing_file_by_name_without_position) {
  const std::string path = "/nonexistent/actorlm/missing.toml";
  const ParseResult result = load_config(path);
  BOOST_TEST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].line == 0u);
  BOOST_TEST(result.errors[0].to_string() ==
             path + ": cannot read config file: No such file or directory");
}

BOOST_AUTO_TEST_CASE(loads_a_file_and_names_it_in_errors) {
  const auto path = std::filesystem::temp_directory_path() / "actorlm_config_parse_test.toml";
  std::ofstream{path} << "[engine]\nbackend = \"cuda\"\nbatching = \"eager\"\n";
  const ParseResult result = load_config(path.string());
  std::filesystem::remove(path);
  BOOST_TEST_REQUIRE(result.errors.size() == 1u, describe(result));
  BOOST_TEST(result.errors[0].file == path.string());
  BOOST_TEST(result.errors[0].line == 3u);
}

BOOST_AUTO_TEST_CASE(formats_an_error_like_a_compiler_diagnostic) {
  BOOST_TEST((ConfigError{"f.toml", 3, 1, "a.b", "bad"}.to_string()) == "f.toml:3:1: a.b: bad");
  BOOST_TEST((ConfigError{"f.toml", 0, 0, "a.b", "bad"}.to_string()) == "f.toml: a.b: bad");
  BOOST_TEST((ConfigError{"f.toml", 2, 7, "", "bad"}.to_string()) == "f.toml:2:7: bad");
}

BOOST_AUTO_TEST_CASE(spells_enums_as_in_toml) {
  BOOST_TEST(to_string(Preemption::automatic) == "auto");
  BOOST_TEST(to_string(SimClock::virtual_time) == "virtual");
  BOOST_TEST(to_string(Backend::cuda) == "cuda");
  BOOST_TEST(to_string(Batching::dynamic) == "dynamic");
}
