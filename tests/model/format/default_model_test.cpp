// The default model (SmolLM2-135M-Instruct, Q4_1 GGUF, fetched by tools/models/
// fetch_default_model.sh): its metadata, tensor directory and data read as llama.cpp's gguf
// Python reader lists them (numbers below taken from gguf.GGUFReader on this file).
#define BOOST_TEST_MODULE model_format_default_model
#include "model/format/gguf_file.hpp"
#include "model/format/open.hpp"

#include "tests/model/format/test_printing.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

using namespace actorlm::model;

namespace {

const GgufFile& model() {
  static const std::unique_ptr<GgufFile> f = [] {
    BOOST_TEST_REQUIRE(std::filesystem::exists(ACTORLM_DEFAULT_MODEL), ACTORLM_DEFAULT_MODEL
                       " is missing: run tools/models/fetch_default_model.sh");
    return GgufFile::open(ACTORLM_DEFAULT_MODEL);
  }();
  return *f;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_the_llama_hyperparameters) {
  const GgufFile& f = model();
  BOOST_TEST(f.metadata().size() == 33u);
  BOOST_TEST(f.get_string("general.architecture") == std::optional<std::string>("llama"));
  BOOST_TEST(f.get_int("llama.block_count") == std::optional<std::int64_t>(30));
  BOOST_TEST(f.get_int("llama.context_length") == std::optional<std::int64_t>(8192));
  BOOST_TEST(f.get_int("llama.embedding_length") == std::optional<std::int64_t>(576));
  BOOST_TEST(f.get_int("llama.feed_forward_length") == std::optional<std::int64_t>(1536));
  BOOST_TEST(f.get_int("llama.attention.head_count") == std::optional<std::int64_t>(9));
  BOOST_TEST(f.get_int("llama.attention.head_count_kv") == std::optional<std::int64_t>(3));
  BOOST_TEST(f.get_int("llama.vocab_size") == std::optional<std::int64_t>(49152));
  BOOST_TEST(f.get_int("llama.rope.dimension_count") == std::optional<std::int64_t>(64));
  BOOST_TEST(f.get_float("llama.rope.freq_base") == std::optional<double>(100000.0));
  BOOST_TEST(*f.get_float("llama.attention.layer_norm_rms_epsilon") == 1e-5,
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(f.get_int("general.file_type") == std::optional<std::int64_t>(3));  // mostly Q4_1
  BOOST_TEST(!f.get_int("general.alignment").has_value());  // the default, 32
}

BOOST_AUTO_TEST_CASE(reads_the_tokenizer_metadata) {
  const GgufFile& f = model();
  BOOST_TEST(f.get_string("tokenizer.ggml.model") == std::optional<std::string>("gpt2"));
  BOOST_TEST(f.get_string("tokenizer.ggml.pre") == std::optional<std::string>("smollm"));
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  BOOST_REQUIRE(tokens.has_value());
  BOOST_TEST(tokens->size() == 49152u);
  BOOST_TEST(tokens->at(1) == "<|im_start|>");
  BOOST_TEST(f.get_string_array("tokenizer.ggml.merges")->size() == 48900u);
  BOOST_TEST(f.get_int_array("tokenizer.ggml.token_type")->size() == 49152u);
  BOOST_TEST(f.get_int("tokenizer.ggml.bos_token_id") == std::optional<std::int64_t>(1));
  BOOST_TEST(f.get_bool("tokenizer.ggml.add_bos_token") == std::optional<bool>(false));
  BOOST_TEST(f.get_bool("tokenizer.ggml.add_space_prefix") == std::optional<bool>(false));
  BOOST_TEST(f.get_string("tokenizer.chat_template")->find("<|im_start|>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(lists_272_tensors_with_their_dtypes_shapes_and_offsets) {
  const GgufFile& f = model();
  BOOST_TEST(f.tensors().size() == 272u);
  std::map<DType, int> count;
  for (const TensorInfo& t : f.tensors()) ++count[t.dtype];
  BOOST_TEST(count[DType::q4_1] == 210);
  BOOST_TEST(count[DType::f32] == 61);
  BOOST_TEST(count[DType::q8_0] == 1);

  const TensorInfo* embd = f.find("token_embd.weight");
  BOOST_REQUIRE(embd != nullptr);
  BOOST_TEST(embd->dtype == DType::q8_0);
  BOOST_TEST(embd->shape == std::vector<std::int64_t>({49152, 576}));
  BOOST_TEST(embd->offset == 1785664u);  // GGUFReader's data_offset: the data section start
  BOOST_TEST(embd->nbytes == 49152u * 576 / 32 * 34);
  const TensorInfo* down = f.find("blk.0.ffn_down.weight");
  BOOST_REQUIRE(down != nullptr);
  BOOST_TEST(down->dtype == DType::q4_1);
  BOOST_TEST(down->shape == std::vector<std::int64_t>({576, 1536}));
  BOOST_TEST(down->offset == 31868992u);
  BOOST_TEST(f.find("blk.29.attn_norm.weight")->shape == std::vector<std::int64_t>({576}));
  BOOST_TEST(f.find("output.weight") == nullptr);  // tied embeddings
}

BOOST_AUTO_TEST_CASE(dequantizes_every_tensor_to_finite_values) {
  const auto src = open_tensor_source(ACTORLM_DEFAULT_MODEL);
  for (const TensorInfo& t : src->tensors()) {
    const std::vector<float> v = src->read_f32(t.name, t.shape);
    BOOST_TEST_REQUIRE(v.size() == static_cast<std::size_t>(t.numel()));
    const auto bad = std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    BOOST_TEST_REQUIRE(bad == 0, t.name << " has " << bad << " values that are not finite");
    if (t.name == "token_embd.weight") {
      // The first row (token 0) is a real embedding: finite, not all zero, within Q8_0's range.
      float max_abs = 0;
      for (std::size_t i = 0; i < 576; ++i) max_abs = std::max(max_abs, std::fabs(v[i]));
      BOOST_TEST(max_abs > 0.0f);
      BOOST_TEST(max_abs < 100.0f);
    }
    if (t.name == "blk.0.attn_norm.weight") {
      double sum = 0;
      for (const float x : v) sum += x;
      BOOST_TEST(sum != 0.0);
    }
  }
}
