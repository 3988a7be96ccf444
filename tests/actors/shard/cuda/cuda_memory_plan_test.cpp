// The cuda backend's memory plan against the simulator's: for the same model, device and keys,
// `actorlm serve` on a GPU (plan_cuda_memory, fed what the driver reports) and `actorlm simulate
// --memory` (the sim backend, fed the catalogue) hold the same number of KV blocks, on one GPU
// and under tensor parallelism (where both split the vocabulary over the ranks, as Megatron
// does). Runs on any machine: the plan is plain C++.
#define BOOST_TEST_MODULE cuda_memory_plan
#include <boost/test/unit_test.hpp>

#include "actors/shard/cuda/cuda_memory_plan.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"
#include "sim/backend/sim_backend.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>
#include <string>

using namespace actorlm;

namespace {

config::Config config_of(const std::string& toml) {
  auto r = config::parse_config(toml, "test.toml");
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.errors.empty() ? "" : r.errors.front().to_string()));
  return r.config;
}

model::Architecture default_model() {
  const auto src = model::open_tensor_source(ACTORLM_DEFAULT_MODEL);
  return model::read_architecture(*src);
}

const sim::Hardware& catalogue_gpu(const std::string& key) { return sim::Catalogue::builtin().hardware(key); }

// The sim backend for the default model's catalogue entry on `gpu`.
sim::SimBackend simulated(const std::string& gpu, const std::string& extra) {
  const auto cfg = config_of("[engine]\nbackend = \"sim\"\n" + extra + "[model]\npreset = \"smollm2-135m-instruct\"\n[sim]\nhardware = \"" +
                             gpu + "\"\n");
  return sim::load_sim_backend(cfg);
}

// Its block count.
std::uint32_t simulated_blocks(const std::string& gpu, const std::string& extra) {
  return simulated(gpu, extra).capacity.device_blocks;
}

// The cuda backend's, for the default model as its GGUF file describes it, on a device that
// reports the catalogue entry's name and memory.
shard::CudaMemoryPlan served_plan(const std::string& gpu, const std::string& extra, double kv_bytes = 2) {
  const auto cfg = config_of("[engine]\nbackend = \"cuda\"\n" + extra);
  const sim::Hardware& h = catalogue_gpu(gpu);
  return shard::plan_cuda_memory(default_model(), "SmolLM2-135M-Instruct", 2, kv_bytes, {h.name, h.memory_bytes}, cfg);
}

}  // namespace

BOOST_AUTO_TEST_CASE(serving_on_a_gpu_plans_the_blocks_the_simulator_plans) {
  for (const std::string gpu : {"a10g", "l4", "a100-80gb", "h200"}) {
    // Both configurations start with [engine]: the extra keys go into it.
    const auto served = served_plan(gpu, "");
    BOOST_TEST_CONTEXT(gpu) {
      BOOST_TEST(served.catalogued);
      BOOST_TEST(served.gpu.num_blocks == simulated_blocks(gpu, ""));
      BOOST_TEST(served.gpu.num_blocks > 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(under_tensor_parallelism_serve_and_simulate_plan_the_same_blocks) {
  // SmolLM2 ties its head to the embedding: one 49,152 x 576 matrix, of which each rank holds
  // 16,384 rows at TP 3 (kernels/cpu/model/weights.hpp's vocab_parallel), as the simulator plans.
  const std::string tp3 = "tensor_parallel_degree = 3\n";
  for (const std::string gpu : {"a10g", "l4", "a100-80gb", "h200"}) {
    const auto served = served_plan(gpu, tp3);
    const auto sim = simulated(gpu, tp3);
    BOOST_TEST_CONTEXT(gpu) {
      BOOST_REQUIRE(sim.memory_per_gpu.size() == 1u);
      const sim::MemoryBreakdown& s = sim.memory_per_gpu.front();
      BOOST_TEST(served.gpu.weights_bytes == s.weights_bytes);
      BOOST_TEST(served.gpu.activation_bytes == s.activation_bytes);
      BOOST_TEST(served.gpu.block_bytes == s.block_bytes);
      BOOST_TEST(served.gpu.num_blocks == sim.capacity.device_blocks);
      BOOST_TEST(served.gpu.num_blocks > 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_cache_and_scheduler_keys_move_both_plans_alike) {
  const std::string keys = "[cache]\ngpu_memory_utilization = 0.5\nblock_size = 32\n[scheduler]\nmax_num_batched_tokens = 2048\n";
  const auto sim_cfg = config_of("[engine]\nbackend = \"sim\"\n" + keys +
                                 "[model]\npreset = \"smollm2-135m-instruct\"\n[sim]\nhardware = \"a10g\"\n");
  const auto served = served_plan("a10g", keys);
  BOOST_TEST(served.gpu.num_blocks == sim::load_sim_backend(sim_cfg).capacity.device_blocks);
  BOOST_TEST(served.gpu.block_size == 32u);
  BOOST_TEST(served.gpu.num_blocks < served_plan("a10g", "").gpu.num_blocks);
}

BOOST_AUTO_TEST_CASE(an_f32_cache_holds_half_the_tokens_of_an_f16_one) {
  const auto f16 = served_plan("h200", "", 2), f32 = served_plan("h200", "", 4);
  BOOST_TEST(f32.gpu.block_bytes == 2 * f16.gpu.block_bytes);
  BOOST_TEST(f32.gpu.num_blocks <= f16.gpu.num_blocks / 2 + 1);
  BOOST_TEST(f32.gpu.num_blocks >= f16.gpu.num_blocks / 2 - 1);
}

BOOST_AUTO_TEST_CASE(devices_are_matched_to_the_catalogue_by_their_model_word) {
  const auto& cat = sim::Catalogue::builtin();
  bool known = false;
  BOOST_TEST(shard::hardware_for({"NVIDIA A100-SXM4-80GB", 85e9}, cat, &known).name.find("A100") != std::string::npos);
  BOOST_TEST(known);
  const auto h200 = shard::hardware_for({"NVIDIA H200", 150e9}, cat, &known);
  BOOST_TEST(known);
  BOOST_TEST(h200.memory_bytes == 150e9);  // the device's own figure, not the catalogue's
  BOOST_TEST(h200.cuda_context_bytes == catalogue_gpu("h200").cuda_context_bytes);
  // L40S is not an L4: the generic entry, with the catalogue's largest CUDA context.
  const auto l40s = shard::hardware_for({"NVIDIA L40S", 48e9}, cat, &known);
  BOOST_TEST(!known);
  BOOST_TEST(l40s.name == "NVIDIA L40S");
  for (const auto& h : cat.all_hardware()) BOOST_TEST(l40s.cuda_context_bytes >= h.cuda_context_bytes);
}

BOOST_AUTO_TEST_CASE(a_model_that_does_not_fit_is_refused_naming_the_budget) {
  try {
    served_plan("a10g", "[cache]\ngpu_memory_utilization = 0.02\n");
    BOOST_FAIL("expected a refusal");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    BOOST_TEST(what.find("gpu_memory_utilization") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(each_rank_gets_the_gpu_engine_devices_names_or_by_default_its_own_index) {
  BOOST_TEST((shard::gpus_of_ranks({}, 2, 4) == std::vector<int>{0, 1}));
  BOOST_TEST((shard::gpus_of_ranks({3, 1}, 2, 4) == std::vector<int>{3, 1}));
  BOOST_TEST(shard::gpus_of_ranks({}, 0, 0).empty());  // a cluster's head hosts no rank
  BOOST_TEST(shard::gpus_of_ranks({2, 3}, 0, 0).empty());  // nor does a worker's offer, made before it is given any
  const auto message = [](const std::vector<std::int64_t>& devices, std::size_t ranks, int visible) {
    try {
      shard::gpus_of_ranks(devices, ranks, visible);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(message({}, 3, 2) == "cuda backend: 3 rank(s) to host here but 2 GPU(s) visible (CUDA_VISIBLE_DEVICES "
                                  "chooses which)");
  BOOST_TEST(message({0}, 2, 4) == "engine.devices lists 1 GPU(s), but this process hosts 2 rank(s): one GPU per rank");
  BOOST_TEST(message({0, 4}, 2, 4) == "engine.devices[1] = 4, but there are 4 GPU(s) visible (CUDA_VISIBLE_DEVICES "
                                      "chooses which)");
}
