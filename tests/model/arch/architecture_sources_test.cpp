// The two sources of a model::Architecture agree: the simulator's catalogue entry for the default
// model (configs/catalogue/models.toml, smollm2-135m-instruct) equals what the checkpoint reader
// finds in models/SmolLM2-135M-Instruct.Q4_1.gguf (present after tools/setup.sh), field by field.
#define BOOST_TEST_MODULE architecture_sources
#include <boost/test/unit_test.hpp>

#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"
#include "sim/model/catalogue.hpp"

using namespace actorlm;

namespace {

model::Architecture from_default_model() {
  const auto source = model::open_tensor_source(ACTORLM_DEFAULT_MODEL);
  return model::read_architecture(*source);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_catalogue_describes_the_default_model_as_its_checkpoint_does) {
  const model::Architecture file = from_default_model();
  const model::Architecture& preset = sim::Catalogue::builtin().model("smollm2-135m-instruct");
  // Field by field first, so that a difference is named.
  BOOST_TEST((file.family == preset.family));
  BOOST_TEST(file.layers == preset.layers);
  BOOST_TEST(file.hidden == preset.hidden);
  BOOST_TEST(file.heads == preset.heads);
  BOOST_TEST(file.kv_heads == preset.kv_heads);
  BOOST_TEST(file.head_dim == preset.head_dim);
  BOOST_TEST(file.ffn == preset.ffn);
  BOOST_TEST((file.ffn_kind == preset.ffn_kind));
  BOOST_TEST(file.vocab == preset.vocab);
  BOOST_TEST((file.norm == preset.norm));
  BOOST_TEST(file.norm_eps == preset.norm_eps);  // both the float nearest 1e-5
  BOOST_TEST(file.norms_per_layer == preset.norms_per_layer);
  BOOST_TEST(file.rope_theta == preset.rope_theta);
  BOOST_TEST(file.rope_linear_factor == preset.rope_linear_factor);
  BOOST_TEST(file.parallel_attention == preset.parallel_attention);
  BOOST_TEST(file.tied_embeddings == preset.tied_embeddings);
  BOOST_TEST(file.max_context == preset.max_context);
  BOOST_TEST(file.bos_token_id == preset.bos_token_id);
  BOOST_TEST(file.eos_token_id == preset.eos_token_id);
  BOOST_TEST((file == preset));  // and nothing the list above missed
  BOOST_TEST(file.params() == 134'515'008u);  // transformers' num_parameters(), embeddings tied
}

BOOST_AUTO_TEST_CASE(the_base_and_instruct_entries_differ_only_in_their_special_tokens) {
  const sim::Catalogue& c = sim::Catalogue::builtin();
  model::Architecture base = c.model("smollm2-135m");
  const model::Architecture& instruct = c.model("smollm2-135m-instruct");
  BOOST_TEST(!(base == instruct));
  base.bos_token_id = instruct.bos_token_id;
  base.eos_token_id = instruct.eos_token_id;
  BOOST_TEST((base == instruct));
}
