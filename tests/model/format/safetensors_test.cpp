// Safetensors files and Hugging Face model folders: round trips of every dtype, single-file and
// sharded folders, open_tensor_source's dispatch, and one row per malformed input, each checked
// for its whole message.
#define BOOST_TEST_MODULE model_format_safetensors
#include "model/format/open.hpp"
#include "model/format/gguf_file.hpp"
#include "model/format/safetensors_file.hpp"

#include "tests/model/format/format_builder.hpp"
#include "tests/model/format/test_printing.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

using namespace actorlm::model;
using namespace actorlm::model::test;
namespace data = boost::unit_test::data;
using json = nlohmann::json;

namespace {

json entry(const std::string& dtype, json shape, std::uint64_t begin, std::uint64_t end) {
  return {{"dtype", dtype}, {"shape", std::move(shape)}, {"data_offsets", {begin, end}}};
}

Bytes f32s(std::initializer_list<float> v) {
  Bytes b;
  for (float x : v) put(b, x);
  return b;
}

// Three tensors, listed out of data order: c.bf16 first in the data, a.f32 last.
Bytes three_dtypes() {
  json h;
  h["__metadata__"] = {{"format", "pt"}};
  h["a.f32"] = entry("F32", {2, 3}, 16, 40);
  h["b.f16"] = entry("F16", {4}, 8, 16);
  h["c.bf16"] = entry("BF16", {2, 2}, 0, 8);
  const Bytes bf16 = concat({le<std::uint16_t>(0x3f80), le<std::uint16_t>(0xc000),
                             le<std::uint16_t>(0x7f80), le<std::uint16_t>(0x0001)});
  const Bytes f16 = concat({le<std::uint16_t>(0x3c00), le<std::uint16_t>(0xc000),
                            le<std::uint16_t>(0x7bff), le<std::uint16_t>(0x0001)});
  return safetensors_bytes(h.dump(), concat({bf16, f16, f32s({1, 2, 3, 4, 5, 6})}));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "(opened)";
}

struct Case {
  const char* name;
  std::function<Bytes()> make;
  std::string message;  // after "<path>: "
  bool prefix = false;  // the message only starts so (third-party text follows)
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

Bytes with_header(const std::string& header, std::size_t data_bytes = 16) {
  return safetensors_bytes(header, Bytes(data_bytes, 0));
}
Bytes one(json e, std::size_t data_bytes = 16) {
  json h;
  h["a"] = std::move(e);
  return with_header(h.dump(), data_bytes);
}

const std::vector<Case> cases = {
    {"shorter_than_the_length",
     [] {
       return Bytes{1, 2, 3, 4, 5};
     },
     "truncated: 5 bytes, too short for the 8-byte header length"},
    {"header_length_past_end", [] { return safetensors_bytes("{}", {}, 1000); },
     "header length 1000 is past end of file (size 10)"},
    {"header_length_2_to_the_64_minus_1",
     [] { return safetensors_bytes("{}", {}, ~std::uint64_t{0}); },
     "header length 18446744073709551615 is past end of file (size 10)"},
    {"header_not_json", [] { return with_header("{\"a\":"); },
     "header is not valid JSON: [json.exception.parse_error.101]", true},
    {"header_empty", [] { return with_header(""); },
     "header is not valid JSON: [json.exception.parse_error.101]", true},
    {"header_an_array", [] { return with_header("[]"); }, "header is not a JSON object"},
    {"header_nested_100_deep",
     [] {
       return with_header("{\"__metadata__\":" + std::string(100, '[') + std::string(100, ']') +
                          "}");
     },
     "header nests deeper than 64"},
    {"entry_not_an_object", [] { return one(1); }, "tensor 'a': header entry is not an object"},
    {"dtype_missing",
     [] {
       return one({{"shape", {4}}, {"data_offsets", {0, 16}}});
     },
     "tensor 'a': dtype is missing or not a string"},
    {"dtype_a_number",
     [] {
       return one({{"dtype", 1}, {"shape", {4}}, {"data_offsets", {0, 16}}});
     },
     "tensor 'a': dtype is missing or not a string"},
    {"dtype_i64", [] { return one(entry("I64", {2}, 0, 16)); },
     "tensor 'a' has dtype I64, which is not supported (F32, F16, BF16)"},
    {"dtype_f8", [] { return one(entry("F8_E4M3", {16}, 0, 16)); },
     "tensor 'a' has dtype F8_E4M3, which is not supported (F32, F16, BF16)"},
    {"shape_missing",
     [] {
       return one({{"dtype", "F32"}, {"data_offsets", {0, 16}}});
     },
     "tensor 'a': shape is missing or not an array"},
    {"shape_negative", [] { return one(entry("F32", {-4}, 0, 16)); },
     "tensor 'a': shape [-4] is not a list of non-negative integers"},
    {"shape_fractional", [] { return one(entry("F32", {1.5}, 0, 16)); },
     "tensor 'a': shape [1.5] is not a list of non-negative integers"},
    {"shape_beyond_int64", [] { return one(entry("F32", {~std::uint64_t{0}}, 0, 16)); },
     "tensor 'a': shape [18446744073709551615] is not a list of non-negative integers"},
    {"shape_overflowing",
     [] {
       return one(entry("F32", {1ull << 32, 1ull << 32}, 0, 16));
     },
     "tensor 'a': shape [4294967296, 4294967296] has more than 2^63 elements"},
    {"bytes_past_2_to_the_64", [] { return one(entry("F32", {1ull << 62}, 0, 16)); },
     "tensor 'a': shape [4611686018427387904] of F32 needs more than 2^64 bytes"},
    {"data_offsets_missing",
     [] {
       return one({{"dtype", "F32"}, {"shape", {4}}});
     },
     "tensor 'a': data_offsets is not a pair of non-negative integers"},
    {"data_offsets_three",
     [] {
       return one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 8, 16}}});
     },
     "tensor 'a': data_offsets is not a pair of non-negative integers"},
    {"data_offsets_negative",
     [] {
       return one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {-16, 0}}});
     },
     "tensor 'a': data_offsets is not a pair of non-negative integers"},
    {"data_offsets_reversed", [] { return one(entry("F32", {1}, 8, 4)); },
     "tensor 'a': data_offsets [8, 4) end before they begin"},
    {"data_past_end", [] { return one(entry("F32", {100}, 0, 400)); },
     "tensor 'a': data_offsets [0, 400) past end of the data area (16 bytes)"},
    {"data_short_for_shape", [] { return one(entry("F32", {4}, 0, 8)); },
     "tensor 'a': data_offsets [0, 8) hold 8 bytes, but shape [4] of F32 needs 16"},
    {"data_long_for_shape",
     [] {
       return one(entry("BF16", {2, 2}, 0, 16));
     },
     "tensor 'a': data_offsets [0, 16) hold 16 bytes, but shape [2, 2] of BF16 needs 8"},
    {"overlapping_data",
     [] {
       json h;
       h["a"] = entry("F32", {4}, 0, 16);
       h["b"] = entry("F32", {4}, 8, 24);
       return with_header(h.dump(), 24);
     },
     "tensors 'a' [0, 16) and 'b' [8, 24) overlap"},
};

// A model folder in `dir`: config.json and whatever else the test adds.
std::string model_folder(const TempDir& dir) {
  dir.write("m/config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4})");
  return (dir.path() / "m").string();
}

Bytes shard(const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  json h;
  Bytes d;
  for (const auto& [name, values] : tensors) {
    h[name] = entry("F32", {values.size()}, d.size(), d.size() + 4 * values.size());
    for (float v : values) put(d, v);
  }
  return safetensors_bytes(h.dump(), d);
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trips_tensors_of_every_dtype_in_data_order) {
  TempDir dir;
  const Bytes file = three_dtypes();
  const auto f = SafetensorsFile::open(dir.write("t.safetensors", file));
  const auto& ts = f->tensors();
  BOOST_REQUIRE(ts.size() == 3u);
  BOOST_TEST(ts[0].name == "c.bf16");
  BOOST_TEST(ts[1].name == "b.f16");
  BOOST_TEST(ts[2].name == "a.f32");
  BOOST_TEST(ts[2].dtype == DType::f32);
  BOOST_TEST(ts[2].shape == std::vector<std::int64_t>({2, 3}));
  const std::uint64_t data_start = file.size() - 40;
  BOOST_TEST(ts[0].offset == data_start);
  BOOST_TEST(ts[2].offset == data_start + 16);
  BOOST_TEST(ts[2].nbytes == 24u);

  BOOST_TEST(f->read_f32("a.f32") == std::vector<float>({1, 2, 3, 4, 5, 6}),
             boost::test_tools::per_element());
  const std::vector<float> h = f->read_f32("b.f16");
  BOOST_TEST(h == std::vector<float>({1.0f, -2.0f, 65504.0f, 5.9604645e-8f}),
             boost::test_tools::per_element());
  const std::vector<float> b = f->read_f32("c.bf16", std::vector<std::int64_t>{2, 2});
  BOOST_TEST(b[0] == 1.0f);
  BOOST_TEST(b[1] == -2.0f);
  BOOST_TEST(std::isinf(b[2]));
  BOOST_TEST(std::bit_cast<std::uint32_t>(b[3]) == 0x00010000u);
}

BOOST_AUTO_TEST_CASE(reads_the_seed_written_by_the_python_script) {
  const auto f =
      SafetensorsFile::open(ACTORLM_FORMAT_CORPUS "/safetensors/seed_three_dtypes.safetensors");
  BOOST_TEST(f->read_f32("a.f32", std::vector<std::int64_t>{2, 2}) ==
             std::vector<float>({0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(f->read_f32("b.f16") == std::vector<float>({1, -2, 0.5}),
             boost::test_tools::per_element());
  BOOST_TEST(f->read_f32("c.bf16") == std::vector<float>({1, -2}),
             boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(rejects_each_malformed_file_with_its_message, data::make(cases), c) {
  TempDir dir;
  const std::string path = dir.write("bad.safetensors", c.make());
  const std::string e = error_of([&] { SafetensorsFile::open(path); });
  const std::string want = path + ": " + c.message;
  if (c.prefix) {
    BOOST_TEST(e.substr(0, want.size()) == want);
  } else {
    BOOST_TEST(e == want);
  }
}

BOOST_AUTO_TEST_CASE(opens_a_folder_with_one_safetensors_file) {
  TempDir dir;
  const std::string folder = model_folder(dir);
  dir.write("m/model.safetensors", shard({{"x", {1, 2}}, {"y", {3}}}));
  const auto m = SafetensorsModel::open(folder);
  BOOST_TEST(m->path() == folder);
  BOOST_TEST(m->config().at("hidden_size").get<int>() == 4);
  BOOST_TEST(m->tensors().size() == 2u);
  BOOST_TEST(m->read_f32("x") == std::vector<float>({1, 2}), boost::test_tools::per_element());
  BOOST_TEST(m->read_f32("y") == std::vector<float>({3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(opens_a_sharded_folder_through_its_index) {
  TempDir dir;
  const std::string folder = model_folder(dir);
  dir.write("m/model-1.safetensors", shard({{"a", {1, 2, 3}}, {"unlisted", {9}}}));
  dir.write("m/model-2.safetensors", shard({{"b", {4}}, {"c", {5, 6}}}));
  dir.write("m/model.safetensors.index.json",
            R"({"metadata": {"total_size": 24}, "weight_map": {"a": "model-1.safetensors",
               "b": "model-2.safetensors", "c": "model-2.safetensors"}})");
  const auto m = SafetensorsModel::open(folder);
  BOOST_TEST(m->tensors().size() == 3u);
  BOOST_TEST(m->find("unlisted") == nullptr);
  BOOST_TEST(m->read_f32("a") == std::vector<float>({1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(m->read_f32("b") == std::vector<float>({4}), boost::test_tools::per_element());
  BOOST_TEST(m->read_f32("c", std::vector<std::int64_t>{2}) == std::vector<float>({5, 6}),
             boost::test_tools::per_element());
  BOOST_TEST(error_of([&] { m->read_f32("c", std::vector<std::int64_t>{1, 2}); }) ==
             folder + ": tensor 'c' has shape [2], expected [1, 2]");
}

struct FolderCase {
  const char* name;
  std::function<void(const TempDir&)> populate;  // after config.json
  std::function<std::string(const std::string& folder)> message;
  bool prefix = false;
};
std::ostream& operator<<(std::ostream& o, const FolderCase& c) { return o << c.name; }

void write_index(const TempDir& d, const std::string& weight_map) {
  d.write("m/model.safetensors.index.json", "{\"weight_map\": " + weight_map + "}");
}

const std::vector<FolderCase> folder_cases = {
    {"no_config", [](const TempDir& d) { std::filesystem::remove(d.path() / "m/config.json"); },
     [](const std::string& f) { return f + ": no config.json"; }},
    {"config_not_json", [](const TempDir& d) { d.write("m/config.json", "{hidden"); },
     [](const std::string& f) { return f + "/config.json: not valid JSON: [json.exception."; },
     true},
    {"config_not_an_object", [](const TempDir& d) { d.write("m/config.json", "[1]"); },
     [](const std::string& f) { return f + "/config.json: not a JSON object"; }},
    {"no_weights", [](const TempDir&) {},
     [](const std::string& f) {
       return f + ": no model.safetensors or model.safetensors.index.json";
     }},
    {"index_not_json", [](const TempDir& d) { d.write("m/model.safetensors.index.json", "{"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: not valid JSON: [json.exception.";
     },
     true},
    {"index_without_weight_map",
     [](const TempDir& d) { d.write("m/model.safetensors.index.json", "{\"metadata\": {}}"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: weight_map is missing or not an object";
     }},
    {"shard_name_a_number", [](const TempDir& d) { write_index(d, R"({"a": 1})"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'a': shard name is not a string";
     }},
    {"shard_in_the_parent_folder",
     [](const TempDir& d) { write_index(d, R"({"a": "../x.safetensors"})"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'a' maps to '../x.safetensors', which "
                  "is not a file name inside the folder";
     }},
    {"shard_an_absolute_path", [](const TempDir& d) { write_index(d, R"({"a": "/etc/passwd"})"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'a' maps to '/etc/passwd', which is not "
                  "a file name inside the folder";
     }},
    {"shard_in_a_subfolder",
     [](const TempDir& d) { write_index(d, R"({"a": "s/x.safetensors"})"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'a' maps to 's/x.safetensors', which is "
                  "not a file name inside the folder";
     }},
    {"shard_dot_dot", [](const TempDir& d) { write_index(d, R"({"a": ".."})"); },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'a' maps to '..', which is not a file "
                  "name inside the folder";
     }},
    {"shard_missing", [](const TempDir& d) { write_index(d, R"({"a": "model-9.safetensors"})"); },
     [](const std::string& f) {
       return f + "/model-9.safetensors: cannot open: No such file or directory";
     }},
    {"shard_a_folder",
     [](const TempDir& d) {
       std::filesystem::create_directories(d.path() / "m/sub.safetensors");
       write_index(d, R"({"a": "sub.safetensors"})");
     },
     [](const std::string& f) { return f + "/sub.safetensors: not a regular file"; }},
    {"tensor_not_in_its_shard",
     [](const TempDir& d) {
       d.write("m/model-1.safetensors", shard({{"a", {1}}}));
       write_index(d, R"({"a": "model-1.safetensors", "b": "model-1.safetensors"})");
     },
     [](const std::string& f) {
       return f + "/model.safetensors.index.json: tensor 'b' is not in its shard "
                  "'model-1.safetensors'";
     }},
    {"shard_corrupt",
     [](const TempDir& d) {
       d.write("m/model-1.safetensors", Bytes{1, 2});
       write_index(d, R"({"a": "model-1.safetensors"})");
     },
     [](const std::string& f) {
       return f + "/model-1.safetensors: truncated: 2 bytes, too short for the 8-byte header "
                  "length";
     }},
};

BOOST_DATA_TEST_CASE(rejects_each_malformed_folder_with_its_message, data::make(folder_cases), c) {
  TempDir dir;
  const std::string folder = model_folder(dir);
  c.populate(dir);
  const std::string e = error_of([&] { SafetensorsModel::open(folder); });
  const std::string want = c.message(folder);
  if (c.prefix) {
    BOOST_TEST(e.substr(0, want.size()) == want);
  } else {
    BOOST_TEST(e == want);
  }
}

BOOST_AUTO_TEST_CASE(open_tensor_source_picks_the_reader_by_what_the_path_is) {
  TempDir dir;
  GgufBuilder g;
  g.tensor("w", {4}, F32, f32s({1, 2, 3, 4}));
  const auto gguf = open_tensor_source(dir.write("a.gguf", g.build()));
  BOOST_TEST(dynamic_cast<const GgufFile*>(gguf.get()) != nullptr);
  BOOST_TEST(gguf->read_f32("w") == std::vector<float>({1, 2, 3, 4}),
             boost::test_tools::per_element());

  const auto st = open_tensor_source(dir.write("b.safetensors", three_dtypes()));
  BOOST_TEST(dynamic_cast<const SafetensorsFile*>(st.get()) != nullptr);
  BOOST_TEST(st->tensors().size() == 3u);

  const std::string folder = model_folder(dir);
  dir.write("m/model.safetensors", shard({{"x", {7}}}));
  const auto m = open_tensor_source(folder);
  BOOST_TEST(dynamic_cast<const SafetensorsModel*>(m.get()) != nullptr);
  BOOST_TEST(m->read_f32("x") == std::vector<float>({7}), boost::test_tools::per_element());

  const std::string missing = (dir.path() / "nothing.gguf").string();
  BOOST_TEST(error_of([&] { open_tensor_source(missing); }) ==
             missing + ": no such file or directory");
  const std::string bin = dir.write("weights.bin", Bytes{1});
  BOOST_TEST(error_of([&] { open_tensor_source(bin); }) ==
             bin + ": unknown kind of model file (expected a .gguf or .safetensors file, or a "
                   "model folder with config.json)");
  // The extension decides; a safetensors file named .gguf is a GGUF error.
  const std::string wrong = dir.write("c.gguf", three_dtypes());
  BOOST_TEST(error_of([&] { open_tensor_source(wrong); }).find(wrong + ": not a GGUF file") == 0u);
}
