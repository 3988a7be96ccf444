// One row per way a config can be wrong: each must yield exactly one error, at the exact line and
// column, under the right key, with a message that says what was expected and what was found.
#define BOOST_TEST_MODULE actors_config_malformed_configs
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

struct MalformedCase {
  const char* name;
  const char* toml;
  std::uint32_t line;
  std::uint32_t column;
  const char* key;
  const char* message;  // a distinctive part of the expected message
};

// Boost.Test prints the sample that failed; the case name is enough to find its row.
std::ostream& operator<<(std::ostream& out, const MalformedCase& c) { return out << c.name; }

const std::vector<MalformedCase> cases = {
    // Syntax: toml++'s description, at the offending character, with no key.
    {"syntax_missing_value", "[server]\nport = \n", 2, 8, "", "expected value"},
    {"syntax_unterminated_string", "[model]\nname = \"abc\n", 2, 12, "", "string"},
    {"syntax_redefined_key", "[cache]\nblock_size = 16\nblock_size = 32\n", 3, 14, "",
     "cannot redefine existing integer 'block_size'"},

    // Names: unknown keys and sections, at the name.
    {"unknown_key_with_suggestion", "[scheduler]\nmax_num_seq = 64\n", 2, 1,
     "scheduler.max_num_seq", "unknown key; did you mean 'max_num_seqs'?"},
    {"unknown_indented_key_with_suggestion", "[cache]\n  blok_size = 8\n", 2, 3, "cache.blok_size",
     "did you mean 'block_size'?"},
    {"unknown_key_without_close_match", "[cache]\ncolour = 1\n", 2, 1, "cache.colour",
     "unknown key; known keys are: block_size, gpu_memory_utilization, swap_space"},
    {"unknown_nested_table_in_section", "[scheduler.limits]\nx = 1\n", 1, 12, "scheduler.limits",
     "unknown key"},
    {"unknown_section_with_suggestion", "[schedular]\nmax_num_seqs = 1\n", 1, 2, "schedular",
     "unknown section [schedular]; did you mean [scheduler]?"},
    {"unknown_section_without_close_match", "[logging]\nlevel = 1\n", 1, 2, "logging",
     "unknown section [logging]; known sections are: [server], [engine]"},
    {"top_level_key_outside_any_section", "port = 80\n", 1, 1, "port",
     "settings belong in a section"},
    {"section_not_a_table", "engine = 3\n", 1, 10, "engine",
     "expected a table (section [engine]), found an integer (3)"},
    {"section_as_array_of_tables", "[[model]]\nname = \"x\"\n", 1, 1, "model",
     "expected a table (section [model]), found an array"},

    // Types.
    {"string_for_integer", "[cache]\nblock_size = \"16\"\n", 2, 14, "cache.block_size",
     "expected an integer, found a string (\"16\")"},
    {"float_for_integer", "[server]\nport = 80.0\n", 2, 8, "server.port",
     "expected an integer, found a float (80.0)"},
    {"integer_for_boolean", "[cache]\nprefix_caching = 1\n", 2, 18, "cache.prefix_caching",
     "expected a boolean (true or false), found an integer (1)"},
    {"array_for_string", "[model]\nname = [\"a\"]\n", 2, 8, "model.name",
     "expected a string, found an array"},
    {"string_for_float", "[cache]\nswap_space = \"4\"\n", 2, 14, "cache.swap_space",
     "expected a number, found a string (\"4\")"},
    {"boolean_for_enum", "[engine]\nbackend = true\n", 2, 11, "engine.backend",
     "expected one of \"sim\", \"cpu\", \"cuda\", found a boolean (true)"},
    {"date_for_string", "[sim]\nhardware = 2024-01-01\n", 2, 12, "sim.hardware",
     "expected a string, found a date"},

    // Ranges, one per ranged key.
    {"port_above_range", "[server]\nport = 70000\n", 2, 8, "server.port",
     "expected an integer in [0, 65535], found 70000"},
    {"max_body_bytes_below_range", "[server]\nmax_body_bytes = 100\n", 2, 18,
     "server.max_body_bytes", "expected an integer in [1024, 1073741824], found 100"},
    {"io_threads_above_range", "[server]\nio_threads = 65\n", 2, 14, "server.io_threads",
     "expected an integer in [1, 64], found 65"},
    {"header_timeout_zero", "[server]\nheader_timeout_s = 0\n", 2, 20, "server.header_timeout_s",
     "expected a number in (0, 3600], found 0"},
    {"httplib_threads_key_removed", "[server]\nthreads = 512\n", 2, 1, "server.threads", "unknown key; known keys are: host, port, api_key, max_body_bytes, drain_timeout_s, log_prompts, io_threads,"},
    {"drain_timeout_negative", "[server]\ndrain_timeout_s = -1\n", 2, 19, "server.drain_timeout_s",
     "expected a number in [0, 3600], found -1"},
    {"engine_seed_negative", "[engine]\nseed = -1\n", 2, 8, "engine.seed",
     "expected an integer >= 0, found -1"},
    {"gpu_memory_utilization_zero", "[cache]\ngpu_memory_utilization = 0\n", 2, 26,
     "cache.gpu_memory_utilization", "expected a number in (0, 1], found 0"},
    {"gpu_memory_utilization_above_one", "[cache]\ngpu_memory_utilization = 1.5\n", 2, 26,
     "cache.gpu_memory_utilization", "expected a number in (0, 1], found 1.5"},
    {"swap_space_negative", "[cache]\nswap_space = -0.5\n", 2, 14, "cache.swap_space",
     "expected a number >= 0, found -0.5"},
    {"swap_space_infinite", "[cache]\nswap_space = inf\n", 2, 14, "cache.swap_space",
     "expected a number >= 0, found inf"},
    {"watermark_at_open_bound", "[cache]\nwatermark = 0.5\n", 2, 13, "cache.watermark",
     "expected a number in [0, 0.5), found 0.5"},
    {"num_gpu_blocks_override_negative", "[cache]\nnum_gpu_blocks_override = -1\n", 2, 27,
     "cache.num_gpu_blocks_override", "expected an integer >= 0, found -1"},
    {"max_num_seqs_zero", "[scheduler]\nmax_num_seqs = 0\n", 2, 16, "scheduler.max_num_seqs",
     "expected an integer in [1, 65536], found 0"},
    {"max_num_batched_tokens_above_range", "[scheduler]\nmax_num_batched_tokens = 16777217\n", 2,
     26, "scheduler.max_num_batched_tokens", "expected an integer in [1, 16777216], found 16777217"},
    {"max_batch_delay_above_range", "[scheduler]\nmax_batch_delay_ms = 60000.5\n", 2, 22,
     "scheduler.max_batch_delay_ms", "expected a number in [0, 60000], found 60000.5"},
    {"batch_size_zero", "[scheduler]\nbatch_size = 0\n", 2, 14, "scheduler.batch_size",
     "expected an integer in [1, 4096], found 0"},
    {"max_queue_len_zero", "[scheduler]\nmax_queue_len = 0\n", 2, 17, "scheduler.max_queue_len",
     "expected an integer in [1, 16777216], found 0"},
    {"priority_aging_negative", "[scheduler]\npriority_aging_per_s = -1\n", 2, 24,
     "scheduler.priority_aging_per_s", "expected a number in [0, 1000000], found -1"},
    {"max_model_len_above_range", "[model]\nmax_model_len = 1048577\n", 2, 17, "model.max_model_len",
     "expected an integer in [1, 1048576], found 1048577"},
    {"sim_seed_negative", "[sim]\nseed = -5\n", 2, 8, "sim.seed", "expected an integer >= 0, found -5"},

    // Enums, one per enum.
    {"backend_unknown", "[engine]\nbackend = \"gpu\"\n", 2, 11, "engine.backend",
     "expected one of \"sim\", \"cpu\", \"cuda\", found \"gpu\""},
    {"batching_unknown", "[engine]\nbatching = \"static\"\n", 2, 12, "engine.batching",
     "expected one of \"dynamic\", \"continuous\", \"paged\", found \"static\""},
    {"preemption_spelled_like_the_cpp_name", "[scheduler]\npreemption = \"automatic\"\n", 2, 14,
     "scheduler.preemption", "expected one of \"recompute\", \"swap\", \"auto\", found \"automatic\""},
    {"clock_spelled_like_the_cpp_name", "[sim]\nclock = \"virtual_time\"\n", 2, 9, "sim.clock",
     "expected one of \"virtual\", \"wall\", found \"virtual_time\""},
    {"parallelism_unknown", "[sim]\nparallelism = \"pipeline\"\n", 2, 15, "sim.parallelism",
     "expected one of \"tensor\", \"layers\", found \"pipeline\""},

    // Powers of two.
    {"block_size_not_a_power_of_two", "[cache]\nblock_size = 24\n", 2, 14, "cache.block_size",
     "expected a power of two in [1, 256], found 24"},
    {"block_size_power_of_two_too_large", "[cache]\nblock_size = 512\n", 2, 14, "cache.block_size",
     "expected a power of two in [1, 256], found 512"},
    {"tensor_parallel_degree_too_large", "[engine]\ntensor_parallel_degree = 128\n", 2, 26,
     "engine.tensor_parallel_degree", "expected an integer in [1, 64], found 128"},

    // Cross-field rules, at whichever involved key is written last.
    {"batched_tokens_below_max_num_seqs",
     "[scheduler]\nmax_num_seqs = 512\nmax_num_batched_tokens = 256\nchunked_prefill = true\n", 3,
     26, "scheduler.max_num_batched_tokens",
     "max_num_batched_tokens (256) must be at least scheduler.max_num_seqs (512)"},
    {"max_num_seqs_written_after_batched_tokens",
     "[scheduler]\nmax_num_batched_tokens = 2048\nchunked_prefill = true\nmax_num_seqs = 4096\n", 4,
     16, "scheduler.max_num_seqs",
     "max_num_batched_tokens (2048) must be at least scheduler.max_num_seqs (4096)"},
    {"batched_tokens_below_max_model_len_without_chunked_prefill",
     "[scheduler]\nmax_num_batched_tokens = 1024\n[model]\nmax_model_len = 4096\n", 4, 17,
     "model.max_model_len",
     "(1024) is less than model.max_model_len (4096), so a full-length prompt could never be "
     "scheduled; raise it or set scheduler.chunked_prefill = true"},
    {"chunked_prefill_turned_off_last",
     "[model]\nmax_model_len = 16384\n[scheduler]\nchunked_prefill = false\n", 4, 19,
     "scheduler.chunked_prefill", "(8192) is less than model.max_model_len (16384)"},
    {"sim_backend_without_preset", "[engine]\nbackend = \"sim\"\n", 2, 11, "engine.backend",
     "requires model.preset"},
    {"sim_backend_with_empty_preset", "[engine]\nbackend = \"sim\"\n[model]\npreset = \"\"\n", 4,
     10, "model.preset", "requires model.preset"},
    {"empty_host", "[server]\nhost = \"\"\n", 2, 8, "server.host",
     "expected a host name or address (a non-empty string), found a string (\"\")"},

    // Cluster workers, each bad entry by index.
    {"worker_without_port", "[cluster]\nworkers = [\"node1:80\", \"node2\"]\n", 2, 24,
     "cluster.workers[1]", "expected \"host:port\" with port in [1, 65535], or \"head\" (this process), found \"node2\""},
    {"worker_port_out_of_range", "[cluster]\nworkers = [\"node1:70000\"]\n", 2, 12,
     "cluster.workers[0]", "found \"node1:70000\""},
    {"worker_without_host", "[cluster]\nworkers = [\":80\"]\n", 2, 12, "cluster.workers[0]",
     "found \":80\""},
    {"worker_not_a_string", "[cluster]\nworkers = [\"a:1\", 7]\n", 2, 19, "cluster.workers[1]",
     "found an integer (7)"},
    {"workers_not_an_array", "[cluster]\nworkers = \"node1:80\"\n", 2, 11, "cluster.workers",
     "expected an array of \"host:port\" with port in [1, 65535], or \"head\" (this process), found a string"},

    // engine.devices: the cuda backend's GPUs, one per rank, none twice.
    {"devices_for_another_backend", "[engine]\nbackend = \"cpu\"\ndevices = [1]\n", 3, 11, "engine.devices",
     "engine.devices picks GPUs for the cuda backend; engine.backend is \"cpu\""},
    {"devices_listing_a_gpu_twice", "[engine]\nbackend = \"cuda\"\ntensor_parallel_degree = 2\ndevices = [3, 3]\n", 4,
     11, "engine.devices", "GPU 3 is listed twice (entries 0 and 1): each rank needs a GPU of its own"},
    {"devices_more_than_ranks", "[engine]\nbackend = \"cuda\"\ntensor_parallel_degree = 2\ndevices = [3, 1, 0]\n", 4,
     11, "engine.devices", "engine.devices lists 3 GPUs, more than there are ranks (engine.tensor_parallel_degree = 2)"},
    {"devices_negative", "[engine]\nbackend = \"cuda\"\ndevices = [-1]\n", 3, 12, "engine.devices[0]", "[0, 1023]"},
    // engine.cuda_graphs: the cuda backend's.
    {"cuda_graphs_for_another_backend", "[engine]\nbackend = \"cpu\"\ncuda_graphs = true\n", 3, 15,
     "engine.cuda_graphs", "engine.cuda_graphs replays the cuda backend's decode steps; engine.backend is \"cpu\""},
    {"cuda_graphs_not_a_boolean", "[engine]\nbackend = \"cuda\"\ncuda_graphs = 1\n", 3, 15, "engine.cuda_graphs",
     "found an integer (1)"},

    // Cluster rules across keys: placement, TLS, plaintext off the machine, virtual time.
    {"more_workers_than_ranks", "[cluster]\nworkers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n", 2, 11,
     "cluster.workers", "names 2 workers but engine.tensor_parallel_degree = 1 gives only 1 ranks"},
    {"placement_of_the_wrong_length",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"127.0.0.1:1\"]\nplacement = [0]\n", 5, 13,
     "cluster.placement", "has 1 entries; it needs one per rank (engine.tensor_parallel_degree = 2)"},
    {"placement_naming_no_worker",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"127.0.0.1:1\"]\nplacement = [0, 1]\n", 5, 13,
     "cluster.placement", "cluster.placement[1] = 1 names no worker (cluster.workers has 1, indices 0 to 0)"},
    {"placement_leaving_a_worker_idle",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n"
     "placement = [1, 1]\n", 5, 13, "cluster.placement", "gives worker 0 (127.0.0.1:1) no rank"},
    {"tls_files_incomplete", "[cluster]\ntls_cert = \"node.pem\"\n", 2, 12, "cluster.tls_cert",
     "tls_cert, tls_key and tls_ca go together"},
    {"plaintext_to_another_machine", "[cluster]\nworkers = [\"10.0.0.2:7001\"]\n", 2, 11, "cluster.workers",
     "cluster.workers[0] = \"10.0.0.2:7001\" is not on this machine, and the cluster has no TLS"},
    {"sim_cluster_in_virtual_time",
     "[engine]\nbackend = \"sim\"\n[model]\npreset = \"falcon-40b\"\n[cluster]\nworkers = [\"127.0.0.1:1\"]\n", 6, 11,
     "cluster.workers", "sim shards on cluster workers run in wall-clock time"},
    {"head_named_twice", "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"head\", \"head\"]\n", 4, 11,
     "cluster.workers", "cluster.workers names \"head\" 2 times"},
    {"head_ranks_beside_other_machines_without_an_address",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"head\", \"10.0.0.2:7001\"]\ninsecure = true\n", 4, 11,
     "cluster.workers", "set cluster.head_data_address to this machine's address that the workers reach"},
    {"head_data_address_unspecified",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"head\", \"127.0.0.1:1\"]\nhead_data_address = \"0.0.0.0\"\n",
     5, 21, "cluster.head_data_address", "names no single address"},
    {"head_data_address_on_loopback_beside_other_machines",
     "[engine]\ntensor_parallel_degree = 2\n[cluster]\nworkers = [\"head\", \"10.0.0.2:1\"]\nhead_data_address = \"127.0.0.1\"\n"
     "insecure = true\n", 5, 21, "cluster.head_data_address", "is a loopback address, which the workers on other"},
    {"head_data_address_without_head", "[cluster]\nhead_data_address = \"10.0.0.1\"\n", 2, 21,
     "cluster.head_data_address", "cluster.workers does not name \"head\""},
    {"placement_of_the_wrong_length_for_a_layer_split",
     "[engine]\npipeline_parallel_degree = 3\n[cluster]\nworkers = [\"127.0.0.1:1\"]\nplacement = [0]\n", 5, 13,
     "cluster.placement",
     "has 1 entries; it needs one per rank (engine.pipeline_parallel_degree = 3)"},

    // Parallelism: a layer split's stages.
    {"pipeline_parallel_degree_zero", "[engine]\npipeline_parallel_degree = 0\n", 2, 28,
     "engine.pipeline_parallel_degree", "found 0"},
    {"sim_nodes_zero", "[sim]\nnodes = 0\n", 2, 9, "sim.nodes", "found 0"},
    {"sim_nodes_not_dividing_the_gpus",
     "[engine]\ntensor_parallel_degree = 6\n[sim]\ninstance = \"g5.12xlarge\"\nnodes = 4\n", 5, 9, "sim.nodes",
     "sim.nodes (4) must divide engine.tensor_parallel_degree (6)"},
    {"sim_nodes_without_an_instance", "[engine]\ntensor_parallel_degree = 8\n[sim]\nnodes = 2\n", 4, 9, "sim.nodes",
     "sim.nodes = 2 needs sim.instance"},
};

std::string describe(const ParseResult& result) {
  std::string out;
  for (const ConfigError& e : result.errors) out += e.to_string() + '\n';
  return out;
}

}  // namespace

BOOST_DATA_TEST_CASE(reports_one_error_at_the_offending_key, data::make(cases), c) {
  const ParseResult result = parse_config(c.toml, "bad.toml");
  BOOST_TEST_REQUIRE(result.errors.size() == 1u, "errors:\n" << describe(result));
  const ConfigError& e = result.errors.front();
  BOOST_TEST(e.file == "bad.toml");
  BOOST_TEST(e.line == c.line, e.to_string());
  BOOST_TEST(e.column == c.column, e.to_string());
  BOOST_TEST(e.key == c.key);
  BOOST_TEST(e.message.find(c.message) != std::string::npos,
             "message \"" << e.message << "\" lacks \"" << c.message << '"');
}

BOOST_AUTO_TEST_CASE(covers_at_least_twenty_malformed_configs) {
  BOOST_TEST(cases.size() >= 20u);
}
