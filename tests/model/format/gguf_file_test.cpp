// GGUF round trips: metadata of every value type and tensors of every supported dtype written by
// the test builder (and by the gguf Python package: fixtures/reference.gguf) read back as written.
#define BOOST_TEST_MODULE model_format_gguf_file
#include "model/format/gguf_file.hpp"

#include "model/format/dequantize.hpp"
#include "tests/model/format/dequant_fixture.hpp"
#include "tests/model/format/format_builder.hpp"
#include "tests/model/format/test_printing.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <limits>

using namespace actorlm::model;
using namespace actorlm::model::test;
namespace data = boost::unit_test::data;

namespace {

using VT = GgufValue::Type;

GgufValue uint_value(VT t, std::uint64_t v) { return {t, v}; }
GgufValue int_value(VT t, std::int64_t v) { return {t, v}; }
GgufValue array_value(std::vector<GgufValue> items) { return {VT::array, std::move(items)}; }

bool same(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.value.index() != b.value.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        const X& y = std::get<X>(b.value);
        if constexpr (std::is_same_v<X, std::vector<GgufValue>>) {
          return std::equal(x.begin(), x.end(), y.begin(), y.end(), same);
        } else {
          return x == y;
        }
      },
      a.value);
}

struct MetadataRow {
  const char* name;
  std::uint32_t type;
  Bytes encoded;    // the value as stored after its type
  GgufValue expected;
};
std::ostream& operator<<(std::ostream& o, const MetadataRow& r) { return o << r.name; }

Bytes u16s(std::initializer_list<std::uint16_t> v) {
  Bytes b;
  for (auto x : v) put(b, x);
  return b;
}

const std::vector<MetadataRow> metadata_rows = {
    {"u8", U8, le<std::uint8_t>(200), uint_value(VT::u8, 200)},
    {"i8", I8, le<std::int8_t>(-100), int_value(VT::i8, -100)},
    {"u16", U16, le<std::uint16_t>(60000), uint_value(VT::u16, 60000)},
    {"i16", I16, le<std::int16_t>(-30000), int_value(VT::i16, -30000)},
    {"u32", U32, le<std::uint32_t>(4000000000u), uint_value(VT::u32, 4000000000u)},
    {"i32", I32, le<std::int32_t>(-2000000000), int_value(VT::i32, -2000000000)},
    {"u64_max", U64, le(std::numeric_limits<std::uint64_t>::max()),
     uint_value(VT::u64, std::numeric_limits<std::uint64_t>::max())},
    {"i64_min", I64, le(std::numeric_limits<std::int64_t>::min()),
     int_value(VT::i64, std::numeric_limits<std::int64_t>::min())},
    {"f32", F32V, le(0.15625f), {VT::f32, 0.15625}},
    {"f32_subnormal", F32V, le(1e-45f), {VT::f32, static_cast<double>(1e-45f)}},
    {"f64", F64, le(3.141592653589793), {VT::f64, 3.141592653589793}},
    {"bool_true", BOOL, le<std::uint8_t>(1), {VT::boolean, true}},
    {"bool_false", BOOL, le<std::uint8_t>(0), {VT::boolean, false}},
    {"string_utf8", STRING, str_bytes("h\xc3\xa9llo"), {VT::string, std::string("h\xc3\xa9llo")}},
    {"string_empty", STRING, str_bytes(""), {VT::string, std::string()}},
    {"string_with_nul",
     STRING,
     str_bytes(std::string("a\0b", 3)),
     {VT::string, std::string("a\0b", 3)}},
    {"array_u16", ARRAY,
     concat({le<std::uint32_t>(U16), le<std::uint64_t>(3), u16s({1, 2, 65535})}),
     array_value({uint_value(VT::u16, 1), uint_value(VT::u16, 2), uint_value(VT::u16, 65535)})},
    {"array_strings", ARRAY,
     concat({le<std::uint32_t>(STRING), le<std::uint64_t>(3), str_bytes("a"), str_bytes(""),
             str_bytes("bc")}),
     array_value({{VT::string, std::string("a")},
                  {VT::string, std::string()},
                  {VT::string, std::string("bc")}})},
    {"array_empty", ARRAY, concat({le<std::uint32_t>(I32), le<std::uint64_t>(0)}), array_value({})},
    {"array_bool", ARRAY, concat({le<std::uint32_t>(BOOL), le<std::uint64_t>(2), Bytes{0, 1}}),
     array_value({{VT::boolean, false}, {VT::boolean, true}})},
    {"array_nested", ARRAY,
     concat({le<std::uint32_t>(ARRAY), le<std::uint64_t>(2), le<std::uint32_t>(I8),
             le<std::uint64_t>(1), Bytes{0xff}, le<std::uint32_t>(I8), le<std::uint64_t>(0)}),
     array_value({array_value({int_value(VT::i8, -1)}), array_value({})})},
};

struct TempGguf {
  TempDir dir;
  std::string path;
  std::unique_ptr<GgufFile> file;
  explicit TempGguf(GgufBuilder& b)
      : path(dir.write("t.gguf", b.build())), file(GgufFile::open(path)) {}
};

// Stored bytes for `n` values of `t` that are not all alike (quantized scales kept finite).
Bytes sample_bytes(DType t, std::int64_t n) {
  Bytes b(*storage_bytes(t, n));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 37 + 11);
  if (t == DType::f16 || t == DType::bf16) {
    for (std::size_t i = 1; i < b.size(); i += 2) b[i] &= 0x3f;  // no inf / nan
  }
  if (t == DType::f32) {
    for (std::size_t i = 3; i < b.size(); i += 4) b[i] &= 0x3f;
  }
  const std::size_t block = t == DType::q8_0 ? 34 : t == DType::q4_0 ? 18 : 20;
  if (t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1) {
    for (std::size_t i = 0; i < b.size(); i += block) {
      b[i + 1] = 0x2c;  // f16 scale 0.0625.. (exponent well inside the finite range)
      if (t == DType::q4_1) b[i + 3] = 0xb0;
    }
  }
  return b;
}

struct DtypeRow {
  DType dtype;
  std::uint32_t ggml;
};
std::ostream& operator<<(std::ostream& o, const DtypeRow& r) { return o << dtype_name(r.dtype); }
const std::vector<DtypeRow> dtype_rows = {{DType::f32, F32},   {DType::f16, F16},
                                          {DType::bf16, BF16}, {DType::q8_0, Q8_0},
                                          {DType::q4_0, Q4_0}, {DType::q4_1, Q4_1}};

}  // namespace

BOOST_DATA_TEST_CASE(round_trips_metadata_of_every_value_type, data::make(metadata_rows), row) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama").kv(std::string("test.") + row.name, row.type,
                                                 row.encoded);
  b.kv_u32("after", 7);  // the reader lands exactly on the next entry
  TempGguf t(b);
  const auto& md = t.file->metadata();
  BOOST_TEST(md.size() == 3u);
  const auto it = md.find(std::string("test.") + row.name);
  BOOST_REQUIRE(it != md.end());
  BOOST_TEST(same(it->second, row.expected));
  BOOST_TEST(t.file->get_int("after") == std::optional<std::int64_t>(7));
  BOOST_TEST(t.file->tensors().empty());
}

BOOST_AUTO_TEST_CASE(typed_getters_convert_what_fits_and_name_the_key_otherwise) {
  GgufBuilder b;
  b.kv("u8", U8, le<std::uint8_t>(200))
      .kv("i16", I16, le<std::int16_t>(-5))
      .kv("u64_big", U64, le<std::uint64_t>(1ull << 63))
      .kv("f32", F32V, le(2.5f))
      .kv("yes", BOOL, le<std::uint8_t>(1))
      .kv_string("name", "tiny")
      .kv_array("ints", I32, 2, concat({le<std::int32_t>(-1), le<std::int32_t>(9)}))
      .kv_array("floats", F32V, 2, concat({le(0.5f), le(-1.0f)}))
      .kv_array("words", STRING, 2, concat({str_bytes("x"), str_bytes("yz")}));
  TempGguf t(b);
  const GgufFile& f = *t.file;
  BOOST_TEST(f.get_int("u8") == std::optional<std::int64_t>(200));
  BOOST_TEST(f.get_int("i16") == std::optional<std::int64_t>(-5));
  BOOST_TEST(f.get_float("i16") == std::optional<double>(-5.0));
  BOOST_TEST(f.get_float("u64_big") == std::optional<double>(9223372036854775808.0));
  BOOST_TEST(f.get_float("f32") == std::optional<double>(2.5));
  BOOST_TEST(f.get_bool("yes") == std::optional<bool>(true));
  BOOST_TEST(f.get_string("name") == std::optional<std::string>("tiny"));
  BOOST_TEST(f.get_int_array("ints") == std::optional<std::vector<std::int64_t>>({-1, 9}));
  BOOST_TEST(f.get_float_array("floats") == std::optional<std::vector<double>>({0.5, -1.0}));
  BOOST_TEST(f.get_float_array("ints") == std::optional<std::vector<double>>({-1.0, 9.0}));
  BOOST_TEST(f.get_string_array("words") ==
             std::optional<std::vector<std::string>>({"x", "yz"}));
  BOOST_TEST(!f.get_int("absent").has_value());
  BOOST_TEST(!f.get_string_array("absent").has_value());

  const auto fails_with = [&](auto call, const std::string& text) {
    try {
      call();
      BOOST_ERROR("no error; expected: " << text);
    } catch (const ModelFileError& e) {
      BOOST_TEST(std::string(e.what()) == t.path + ": " + text);
    }
  };
  fails_with(
      [&] { f.get_int("u64_big"); },
      "metadata 'u64_big' value 9223372036854775808 does not fit in a signed 64-bit integer");
  fails_with([&] { f.get_int("f32"); }, "metadata 'f32' is an f32, expected an integer");
  fails_with([&] { f.get_string("u8"); }, "metadata 'u8' is a u8, expected a string");
  fails_with([&] { f.get_bool("name"); }, "metadata 'name' is a string, expected a bool");
  fails_with([&] { f.get_float("words"); },
             "metadata 'words' is an array of string, expected a number");
  fails_with([&] { f.get_string_array("ints"); },
             "metadata 'ints' is an array of i32, expected an array of strings");
  fails_with([&] { f.get_int_array("floats"); },
             "metadata 'floats' is an array of f32, expected an array of integers");
  fails_with([&] { f.get_int_array("name"); },
             "metadata 'name' is a string, expected an array of integers");
}

BOOST_DATA_TEST_CASE(round_trips_tensors_of_every_dtype_at_every_alignment,
                     data::make(dtype_rows) * data::make({1u, 32u, 64u}), row, alignment) {
  // Two tensors: a [3, 64] matrix and a [64] vector after it, ne innermost first.
  const Bytes matrix = sample_bytes(row.dtype, 3 * 64);
  const Bytes vec = sample_bytes(row.dtype, 64);
  GgufBuilder b;
  b.alignment(alignment);
  if (alignment != 32) b.kv_u32("general.alignment", alignment);
  b.tensor("blk.0.w", {64, 3}, row.ggml, matrix).tensor("norm", {64}, row.ggml, vec);
  TempGguf t(b);
  const auto& ts = t.file->tensors();
  BOOST_REQUIRE(ts.size() == 2u);
  BOOST_TEST(ts[0].name == "blk.0.w");
  BOOST_TEST(ts[0].dtype == row.dtype);
  BOOST_TEST(ts[0].shape == std::vector<std::int64_t>({3, 64}));
  BOOST_TEST(ts[0].numel() == 192);
  BOOST_TEST(ts[0].nbytes == matrix.size());
  BOOST_TEST(ts[0].offset == b.data_start());
  BOOST_TEST(ts[1].shape == std::vector<std::int64_t>({64}));
  BOOST_TEST(ts[1].offset % alignment == 0u);
  BOOST_TEST(ts[1].offset >= ts[0].offset + ts[0].nbytes);

  for (const auto& [name, bytes] : {std::pair{"blk.0.w", matrix}, std::pair{"norm", vec}}) {
    const TensorInfo& info = *t.file->find(name);
    std::vector<float> want(static_cast<std::size_t>(info.numel()));
    dequantize(row.dtype, reinterpret_cast<const std::byte*>(bytes.data()), want);
    const std::vector<float> got = t.file->read_f32(name, info.shape);
    BOOST_TEST(got == want, boost::test_tools::per_element());
    for (const float x : got) BOOST_TEST_REQUIRE(std::isfinite(x));
  }
  if (row.dtype == DType::f32) {
    std::vector<float> raw(64);
    std::memcpy(raw.data(), vec.data(), vec.size());
    BOOST_TEST(t.file->read_f32("norm") == raw, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(reads_version_2_files_and_empty_tensors) {
  GgufBuilder b;
  b.version(2).tensor("empty", {0, 4}, F32, {}).tensor("one", {1}, F32, le(1.5f));
  TempGguf t(b);
  BOOST_TEST(t.file->find("empty")->numel() == 0);
  BOOST_TEST(t.file->read_f32("empty").empty());
  BOOST_TEST(t.file->read_f32("one") == std::vector<float>({1.5f}));
}

BOOST_AUTO_TEST_CASE(read_f32_names_the_file_the_tensor_and_both_shapes) {
  GgufBuilder b;
  b.tensor("w", {4, 2}, F32, Bytes(32, 0));
  TempGguf t(b);
  const std::vector<std::int64_t> wrong{4, 2};
  BOOST_CHECK_EXCEPTION(t.file->read_f32("w", wrong), ModelFileError, [&](const ModelFileError& e) {
    return std::string(e.what()) == t.path + ": tensor 'w' has shape [2, 4], expected [4, 2]";
  });
  BOOST_CHECK_EXCEPTION(t.file->read_f32("v"), ModelFileError, [&](const ModelFileError& e) {
    return std::string(e.what()) == t.path + ": no tensor named 'v'";
  });
  BOOST_TEST(t.file->find("v") == nullptr);
  const std::vector<std::int64_t> right{2, 4};
  BOOST_TEST(t.file->read_f32("w", right).size() == 8u);
}

BOOST_AUTO_TEST_CASE(read_stored_gives_the_bytes_in_the_file_and_checks_like_read_f32) {
  GgufBuilder b;
  const Bytes data = sample_bytes(DType::q4_1, 64);  // [2, 32]: two Q4_1 blocks
  b.tensor("q", {32, 2}, Q4_1, data);
  TempGguf t(b);
  const std::vector<std::int64_t> right{2, 32}, wrong{32, 2};
  const auto stored = t.file->read_stored("q", right);
  BOOST_TEST((stored.info->dtype == DType::q4_1));
  BOOST_TEST_REQUIRE(stored.bytes.size() == data.size());
  BOOST_TEST(std::equal(data.begin(), data.end(), stored.bytes.begin(),
                        [](std::uint8_t a, std::byte c) { return a == static_cast<std::uint8_t>(c); }));
  BOOST_CHECK_EXCEPTION(t.file->read_stored("q", wrong), ModelFileError, [&](const ModelFileError& e) {
    return std::string(e.what()) == t.path + ": tensor 'q' has shape [2, 32], expected [32, 2]";
  });
  BOOST_CHECK_THROW(t.file->read_stored("r"), ModelFileError);
}

BOOST_AUTO_TEST_CASE(reads_the_reference_file_written_by_the_gguf_python_package) {
  const auto f = GgufFile::open(ACTORLM_FORMAT_FIXTURES "/reference.gguf");
  BOOST_TEST(f->get_string("general.architecture") == std::optional<std::string>("llama"));
  BOOST_TEST(f->get_int("test.u8") == std::optional<std::int64_t>(200));
  BOOST_TEST(f->get_int("test.i8") == std::optional<std::int64_t>(-100));
  BOOST_TEST(f->get_int("test.u16") == std::optional<std::int64_t>(60000));
  BOOST_TEST(f->get_int("test.i16") == std::optional<std::int64_t>(-30000));
  BOOST_TEST(f->get_int("test.u32") == std::optional<std::int64_t>(4000000000));
  BOOST_TEST(f->get_int("test.i32") == std::optional<std::int64_t>(-2000000000));
  BOOST_TEST(f->get_float("test.f32") == std::optional<double>(0.15625));
  BOOST_TEST(f->get_bool("test.bool") == std::optional<bool>(true));
  BOOST_TEST(f->get_string("test.string") ==
             std::optional<std::string>("h\xc3\xa9llo w\xc3\xb6rld"));
  BOOST_TEST(same(f->metadata().at("test.u64"), uint_value(VT::u64, (1ull << 63) + 5)));
  BOOST_TEST(f->get_int("test.i64") == std::optional<std::int64_t>(-(std::int64_t{1} << 62)));
  BOOST_TEST(f->get_float("test.f64") == std::optional<double>(3.141592653589793));
  BOOST_TEST(f->get_string_array("test.array.str") ==
             std::optional<std::vector<std::string>>({"a", "", "\xc3\x9f\xc3\xa7"}));
  BOOST_TEST(f->get_int_array("test.array.i32") ==
             std::optional<std::vector<std::int64_t>>({1, -2, 3}));
  BOOST_TEST(f->get_float_array("test.array.f32") ==
             std::optional<std::vector<double>>({0.5, -1.25}));
  BOOST_TEST(same(f->metadata().at("test.array.nested"),
                  array_value({array_value({int_value(VT::i32, 1), int_value(VT::i32, 2)}),
                               array_value({int_value(VT::i32, 3)})})));

  // Tensors: the named cases of dequant.json, as written by the script.
  const auto golden = load_dequant_fixture();
  const std::vector<std::tuple<const char*, const char*, std::int64_t>> tensors = {
      {"f32", "values", 2},  {"f16", "random", 2},           {"bf16", "random", 2},
      {"q8_0", "quantized_normal", 1}, {"q4_0", "quantized_normal", 1},
      {"q4_1", "quantized_normal", 1}};
  BOOST_TEST(f->tensors().size() == tensors.size());
  for (const auto& [dtype, case_name, rows] : tensors) {
    BOOST_TEST_CONTEXT(dtype) {
      const auto& cases = golden.at(dtype);
      const auto c = std::find_if(cases.begin(), cases.end(),
                                  [&](const DequantCase& x) { return x.name == case_name; });
      BOOST_REQUIRE(c != cases.end());
      const auto n = static_cast<std::int64_t>(c->expected.size());
      const std::vector<std::int64_t> shape{rows, n / rows};
      const std::vector<float> got = f->read_f32(std::string("t.") + dtype, shape);
      BOOST_REQUIRE(got.size() == c->expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        BOOST_TEST_REQUIRE(same_float(got[i], c->expected[i]), "value " << i);
      }
    }
  }
}
