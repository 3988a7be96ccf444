// The simulator's catalogue: the embedded files parse, parameter counts computed from each
// architecture match the published ones, a wrong file is reported by file, line and key, and
// the optional cost-model terms read 0 when absent (bytes per weight 2) and in their units when
// given.
#define BOOST_TEST_MODULE sim_catalogue
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "sim/model/catalogue.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>

using namespace actorlm::sim;
namespace tt = boost::test_tools;

namespace {

struct Published {
  const char* key;
  double params;        // as published
  bool tied_head_twice; // the figure counts a tied LM head a second time
  double tolerance;     // relative
  const char* source;
};
std::ostream& operator<<(std::ostream& os, const Published& p) { return os << p.key; }

// Figures quoted from memory of the sources named; they could not be re-checked from this
// machine (no internet). Exact counts are those transformers' num_parameters() reports; the
// Hub's "Model size" figures are rounded (hence 1 %) and, for Falcon, count the tied LM head
// twice because the safetensors checkpoints store lm_head.weight separately.
const Published published[] = {
    {"falcon-7b", 7.22e9, true, 0.01, "huggingface.co/tiiuae/falcon-7b: Model size 7.22B params"},
    {"falcon-40b", 41.8e9, true, 0.01, "huggingface.co/tiiuae/falcon-40b: Model size 41.8B params"},
    {"llama-2-7b", 6'738'415'616, false, 0, "transformers LlamaForCausalLM num_parameters()"},
    {"llama-2-13b", 13'015'864'320, false, 0, "transformers LlamaForCausalLM num_parameters()"},
    {"llama-2-70b", 68'976'648'192, false, 0, "transformers LlamaForCausalLM num_parameters()"},
    {"llama-3-8b", 8'030'261'248, false, 0, "transformers LlamaForCausalLM num_parameters()"},
    {"llama-3-70b", 70'553'706'496, false, 0, "transformers LlamaForCausalLM num_parameters()"},
    {"smollm2-135m", 134'515'008, false, 0, "transformers LlamaForCausalLM num_parameters() (tied)"},
};

const char* good_hardware = R"([runtime]
framework_overhead_mib = 256
comm_buffer_mib = 128

[gpu.x]
name = "X"
memory_mib = 1024
bandwidth_gbps = 100
fp16_tflops = 10
link = "PCIe"
link_bandwidth_gbps = 10
link_latency_us = 5
host_bandwidth_gbps = 10
compute_efficiency = 0.5
memory_efficiency = 0.5
link_efficiency = 0.5
kernel_launch_us = 5
cuda_context_mib = 100
)";

const char* good_models = R"([model.tiny]
name = "Tiny"
layers = 2
hidden = 64
heads = 4
kv_heads = 2
head_dim = 16
ffn = 128
ffn_kind = "swiglu"
vocab = 100
tied_embeddings = true
parallel_attention = false
norm = "rmsnorm"
norms_per_layer = 2
max_context = 256
eos_token_id = 0
family = "llama"
norm_eps = 1e-5
rope_theta = 10000.0
rope_linear_factor = 1.0
bos_token_id = 1
)";

// good_hardware's [gpu.x] (the last table of the file) with `lines` appended, from line 19 on.
std::string hardware_with(const std::string& lines) { return std::string(good_hardware) + lines; }

std::string error_of(const std::string& hardware, const std::string& models) {
  try {
    Catalogue::parse(hardware, "hw.toml", models, "m.toml");
  } catch (const CatalogueError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_DATA_TEST_CASE(computes_parameter_counts_that_match_the_published_ones, published, p) {
  const ModelPreset& m = Catalogue::builtin().model(p.key);
  double computed = double(m.params());
  if (p.tied_head_twice && m.tied_embeddings) computed += double(m.vocab) * m.hidden;
  BOOST_TEST_MESSAGE(p.key << ": computed " << m.params() << " (as published: " << computed
                           << "), published " << p.params << " (" << p.source << ")");
  if (p.tolerance == 0) BOOST_TEST(computed == p.params);
  else BOOST_TEST(std::fabs(computed - p.params) / p.params <= p.tolerance);
}

BOOST_AUTO_TEST_CASE(counts_falcon_40b_with_its_two_layer_norms_and_grouped_kv) {
  const ModelPreset& m = Catalogue::builtin().model("falcon-40b");
  // Per layer: QKV 8192 x (128 + 2 x 8) x 64, dense 8192^2, MLP 2 x 8192 x 32768, 2 layer norms
  // of weight + bias.
  const std::uint64_t layer = 8192ull * 144 * 64 + 8192ull * 8192 + 2ull * 8192 * 32768 + 2ull * 2 * 8192;
  BOOST_TEST(m.layer_params() == layer);
  BOOST_TEST(m.params() == 60 * layer + 65024ull * 8192 + 2 * 8192);  // tied embedding, final norm
  BOOST_TEST(m.params() == 41'303'293'952ull);
}

BOOST_AUTO_TEST_CASE(holds_the_gpus_and_instances_the_simulator_needs) {
  const Catalogue& c = Catalogue::builtin();
  const Hardware& a10g = c.hardware("a10g");
  BOOST_TEST(a10g.memory_bytes == 23028.0 * 1024 * 1024);
  BOOST_TEST(a10g.bandwidth == 600e9);
  BOOST_TEST(a10g.flops == 70e12);
  BOOST_TEST(a10g.link.find("no NVLink") != std::string::npos);
  for (const char* gpu : {"l4", "a100-40gb", "a100-80gb", "h100-sxm", "h200"}) BOOST_TEST(c.hardware(gpu).flops > 0);
  for (auto [name, gpus] : {std::pair{"g5.12xlarge", 4u}, {"g5.24xlarge", 4u}, {"g5.48xlarge", 8u},
                            {"p4d.24xlarge", 8u}, {"p5.48xlarge", 8u}, {"g6.12xlarge", 4u}}) {
    const Instance& i = c.instance(name);
    BOOST_TEST(i.gpus == gpus, name);
    BOOST_TEST(i.price_per_hour > 0, name);
    BOOST_TEST(!i.price_note.empty(), name);
  }
  for (const Instance& i : c.all_instances()) {
    BOOST_TEST(i.has_network(), i.key);
    BOOST_TEST(i.network_latency > 0, i.key);
    BOOST_TEST((i.network_efficiency > 0 && i.network_efficiency <= 1), i.key);
    BOOST_TEST(!i.network_note.empty(), i.key);
  }
  BOOST_TEST(c.instance("g5.12xlarge").network_bandwidth == 40e9 / 8);  // Gbit/s as listed, in bytes/s
  BOOST_TEST(c.instance("p5.48xlarge").network_bandwidth == 3200e9 / 8);
  BOOST_TEST(c.instance("p4d.24xlarge").gpu == "a100-40gb");
  BOOST_TEST(c.instance("p5.48xlarge").gpu == "h100-sxm");
  BOOST_TEST(c.runtime().framework_bytes > 0);
}

BOOST_AUTO_TEST_CASE(an_unknown_name_lists_the_known_ones) {
  try {
    Catalogue::builtin().model("falcon-180b");
    BOOST_FAIL("no error");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("unknown model preset \"falcon-180b\"") != std::string::npos, what);
    BOOST_TEST(what.find("falcon-40b") != std::string::npos, what);
    BOOST_TEST(what.find("llama-3-70b") != std::string::npos, what);
  }
  BOOST_CHECK_THROW(Catalogue::builtin().hardware("v100"), std::invalid_argument);
  BOOST_CHECK_THROW(Catalogue::builtin().instance("g4dn.xlarge"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(parses_a_small_valid_catalogue) {
  const Catalogue c = Catalogue::parse(good_hardware, "hw.toml", good_models, "m.toml");
  BOOST_TEST(c.hardware("x").kernel_launch == 5e-6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.model("tiny").kv_heads == 2u);
  BOOST_TEST(c.runtime().comm_buffer_bytes == 128.0 * 1024 * 1024);
}

BOOST_AUTO_TEST_CASE(names_file_line_and_key_of_a_bad_value) {
  std::string models = good_models;
  models.replace(models.find("heads = 4"), 9, "heads = 0");  // line 5
  BOOST_TEST(error_of(good_hardware, models) ==
             "m.toml:5:9: model.tiny.heads: expected an integer in [1, 65536], found 0");
}

BOOST_AUTO_TEST_CASE(names_a_missing_key_an_unknown_key_and_an_unknown_gpu) {
  std::string models = good_models;
  models.replace(models.find("vocab = 100"), 11, "vocabulary = 100");
  const std::string hardware = std::string(good_hardware) +
                               "\n[instance.\"i1\"]\ngpu = \"y\"\ngpus = 2\nprice_per_hour = 1\nprice_note = \"n\"\n";
  const std::string what = error_of(hardware, models);
  BOOST_TEST(what.find("hw.toml:21:7: instance.i1.gpu: no [gpu.y] in this file") != std::string::npos, what);
  BOOST_TEST(what.find("m.toml:1:1: model.tiny.vocab: required key is missing") != std::string::npos, what);
  BOOST_TEST(what.find("m.toml:10:1: model.tiny.vocabulary:") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(an_instance_gives_all_its_network_figures_or_none) {
  const std::string instance = "\n[instance.\"i1\"]\ngpu = \"x\"\ngpus = 2\nprice_per_hour = 1\nprice_note = \"n\"\n";
  const Catalogue none = Catalogue::parse(std::string(good_hardware) + instance, "hw.toml", good_models, "m.toml");
  BOOST_TEST(!none.instance("i1").has_network());
  const std::string what = error_of(std::string(good_hardware) + instance + "network_gbps = 25\n", good_models);
  BOOST_TEST(what.find("instance.i1.network_latency_us: required key is missing") != std::string::npos, what);
  BOOST_TEST(what.find("instance.i1.network_note: required key is missing") != std::string::npos, what);
  const Catalogue full = Catalogue::parse(std::string(good_hardware) + instance +
                                              "network_gbps = 25\nnetwork_latency_us = 20\n"
                                              "network_efficiency = 0.5\nnetwork_note = \"ENA\"\n",
                                          "hw.toml", good_models, "m.toml");
  BOOST_TEST(full.instance("i1").network_bandwidth == 25e9 / 8);
  BOOST_TEST(full.instance("i1").network_latency == 20e-6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(full.instance("i1").network_efficiency == 0.5);
}

BOOST_AUTO_TEST_CASE(reports_kv_heads_that_do_not_divide_the_heads) {
  std::string models = good_models;
  models.replace(models.find("kv_heads = 2"), 12, "kv_heads = 3");
  BOOST_TEST(error_of(good_hardware, models) ==
             "m.toml:6:12: model.tiny.kv_heads: must divide heads (4), found 3");
}

BOOST_AUTO_TEST_CASE(reports_an_entry_that_contradicts_its_family) {
  std::string models = good_models;
  models.replace(models.find("family = \"llama\""), 16, "family = \"falcon\"");
  const std::string what = error_of(good_hardware, models);
  BOOST_TEST(what.find("m.toml:13:8: model.tiny.norm: must be layernorm for the falcon family") != std::string::npos, what);
  BOOST_TEST(what.find("model.tiny.ffn_kind: must be gelu for the falcon family") != std::string::npos, what);
  BOOST_TEST(what.find("model.tiny.parallel_attention: must be true for the falcon family") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(reports_a_toml_syntax_error_with_its_position) {
  const std::string what = error_of(good_hardware, "[model.tiny\nname = 1\n");
  BOOST_TEST(what.rfind("m.toml:1:", 0) == 0, what);
}

BOOST_AUTO_TEST_CASE(loads_a_user_file_in_place_of_the_embedded_one) {
  const std::string path = "sim_catalogue_test_models.toml";
  std::ofstream(path) << good_models;
  const Catalogue c = Catalogue::load("", path);
  std::remove(path.c_str());
  BOOST_TEST(c.all_models().size() == 1u);
  BOOST_TEST(c.hardware("a10g").name == "NVIDIA A10G");  // the embedded hardware file
  BOOST_CHECK_THROW(Catalogue::load("/nonexistent/hw.toml", ""), CatalogueError);
}

BOOST_AUTO_TEST_CASE(leaves_every_optional_term_at_zero_when_its_key_is_absent) {
  // Every shipped entry predates the optional keys: the cost model stays the roofline for them.
  const auto check = [](const Catalogue& c) {
    BOOST_TEST_REQUIRE(!c.all_hardware().empty());
    for (const Hardware& h : c.all_hardware()) {
      BOOST_TEST(h.small_gemm_rows == 0u, h.key);
      BOOST_TEST(h.small_gemm_flops == 0, h.key);
      BOOST_TEST(h.gemm_weight_rate == 0, h.key);
      BOOST_TEST(h.attention_flops == 0, h.key);
      BOOST_TEST(h.prefill_attention_flops == 0, h.key);
      BOOST_TEST(h.large_batch_rows == 0u, h.key);
      BOOST_TEST(h.large_batch_flops == 0, h.key);
      BOOST_TEST(h.step_overhead == 0, h.key);
      BOOST_TEST(h.memory_overlap == 1, h.key);  // GPUs: the roofline
    }
    BOOST_TEST_REQUIRE(!c.all_models().empty());
    for (const ModelPreset& m : c.all_models())  // the cpu backend's quantized file aside (below)
      if (m.key != "smollm2-135m-instruct-q4_1") BOOST_TEST(m.weight_bytes == 2, m.key);
  };
  check(Catalogue::builtin());
  check(Catalogue::parse(good_hardware, "hw.toml", good_models, "m.toml"));
}

BOOST_AUTO_TEST_CASE(describes_the_default_q4_1_file_as_the_instruct_model_with_its_bytes_per_weight) {
  const Catalogue& c = Catalogue::builtin();
  const ModelPreset& q = c.model("smollm2-135m-instruct-q4_1");
  const ModelPreset& f = c.model("smollm2-135m-instruct");
  BOOST_TEST((static_cast<const actorlm::model::Architecture&>(q) == static_cast<const actorlm::model::Architecture&>(f)));
  // 96,576,768 bytes as the cpu backend holds the file, over its 134,515,008 weights.
  BOOST_TEST(q.weight_bytes == 96576768.0 / 134515008.0, tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(reads_the_optional_terms_in_their_units) {
  const std::string hardware = hardware_with(
      "small_gemm_rows = 32\n"
      "small_gemm_tflops = 1.5\n"
      "gemm_dequant_gweights_per_s = 3\n"
      "attention_tflops = 0.25\n"
      "prefill_attention_tflops = 0.75\n"
      "large_batch_gemm_rows = 1024\n"
      "large_batch_gemm_tflops = 0.5\n"
      "step_overhead_us = 40\n"
      "memory_compute_overlap = 0.6\n");
  const std::string models = std::string(good_models) + "bytes_per_weight = 0.5625\n";
  const Catalogue c = Catalogue::parse(hardware, "hw.toml", models, "m.toml");
  const Hardware& h = c.hardware("x");
  BOOST_TEST(h.small_gemm_rows == 32u);
  BOOST_TEST(h.small_gemm_flops == 1.5e12, tt::tolerance(1e-12));        // TFLOPS -> FLOP/s
  BOOST_TEST(h.gemm_weight_rate == 3e9, tt::tolerance(1e-12));           // Gweights/s -> weights/s
  BOOST_TEST(h.attention_flops == 0.25e12, tt::tolerance(1e-12));
  BOOST_TEST(h.prefill_attention_flops == 0.75e12, tt::tolerance(1e-12));
  BOOST_TEST(h.large_batch_rows == 1024u);
  BOOST_TEST(h.large_batch_flops == 0.5e12, tt::tolerance(1e-12));
  BOOST_TEST(h.step_overhead == 40e-6, tt::tolerance(1e-12));            // us -> s
  BOOST_TEST(h.memory_overlap == 0.6);
  BOOST_TEST(c.model("tiny").weight_bytes == 0.5625);                    // bytes, as written
  BOOST_TEST(h.flops == 10e12, tt::tolerance(1e-12));                    // the required keys as before
}

struct HalfPair {
  const char* line;  // the one key of the pair given, appended as line 19
  const char* error;
};
std::ostream& operator<<(std::ostream& os, const HalfPair& p) { return os << p.line; }
const HalfPair half_pairs[] = {
    {"small_gemm_rows = 32\n",
     "hw.toml:19:19: gpu.x.small_gemm_rows: small_gemm_rows and small_gemm_tflops go together: give both or neither"},
    {"small_gemm_tflops = 1.5\n",
     "hw.toml:19:21: gpu.x.small_gemm_tflops: small_gemm_rows and small_gemm_tflops go together: give both or "
     "neither"},
    {"large_batch_gemm_rows = 1024\n",
     "hw.toml:19:25: gpu.x.large_batch_gemm_rows: large_batch_gemm_rows and large_batch_gemm_tflops go together: "
     "give both or neither"},
};

BOOST_DATA_TEST_CASE(names_file_line_and_key_of_a_small_gemm_key_given_without_its_partner, half_pairs, p) {
  BOOST_TEST(error_of(hardware_with(p.line), good_models) == p.error);
}

BOOST_AUTO_TEST_CASE(reports_a_bad_value_of_the_small_gemm_pair_once_and_not_as_a_missing_partner) {
  for (const char* lines : {"small_gemm_rows = 0\nsmall_gemm_tflops = 1\n", "small_gemm_rows = 3.5\nsmall_gemm_tflops = 1\n",
                            "small_gemm_rows = 32\nsmall_gemm_tflops = 0\n"}) {
    const std::string what = error_of(hardware_with(lines), good_models);
    BOOST_TEST(what.find('\n') == std::string::npos, lines << " gave more than one error: " << what);
    BOOST_TEST(what.find("go together") == std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(reads_the_older_boolean_overlap_as_the_roofline_or_the_sum_and_refuses_it_beside_the_fraction) {
  // Catalogues that calibrate wrote before 2026-12-07 say memory_overlaps_compute = false.
  BOOST_TEST(Catalogue::parse(hardware_with("memory_overlaps_compute = false\n"), "hw.toml", good_models, "m.toml")
                 .hardware("x").memory_overlap == 0);
  BOOST_TEST(Catalogue::parse(hardware_with("memory_overlaps_compute = true\n"), "hw.toml", good_models, "m.toml")
                 .hardware("x").memory_overlap == 1);
  BOOST_TEST(Catalogue::parse(hardware_with("memory_compute_overlap = 0\n"), "hw.toml", good_models, "m.toml")
                 .hardware("x").memory_overlap == 0);
  BOOST_TEST(error_of(hardware_with("memory_overlaps_compute = false\nmemory_compute_overlap = 0.5\n"), good_models) ==
             "hw.toml:19:27: gpu.x.memory_overlaps_compute: memory_overlaps_compute and memory_compute_overlap say "
             "the same: give one");
}

BOOST_AUTO_TEST_CASE(range_checks_the_optional_keys_like_the_required_ones) {
  BOOST_TEST(error_of(hardware_with("step_overhead_us = 0\n"), good_models) ==
             "hw.toml:19:20: gpu.x.step_overhead_us: expected a number > 0, found 0");
  BOOST_TEST(error_of(good_hardware, std::string(good_models) + "bytes_per_weight = -1\n") ==
             "m.toml:22:20: model.tiny.bytes_per_weight: expected a number > 0, found -1");
  BOOST_TEST(error_of(hardware_with("memory_overlaps_compute = 0\n"), good_models) ==
             "hw.toml:19:27: gpu.x.memory_overlaps_compute: expected a boolean (true or false), found an integer (0)");
  BOOST_TEST(error_of(hardware_with("memory_compute_overlap = 1.5\n"), good_models) ==
             "hw.toml:19:26: gpu.x.memory_compute_overlap: expected a number in [0, 1], found 1.5");
  const std::string what = error_of(hardware_with("attention_tflop = 1\n"), good_models);
  BOOST_TEST(what.find("hw.toml:19:1: gpu.x.attention_tflop:") != std::string::npos, what);  // a typo is unknown
}
