// One row per way a GGUF file can be wrong; each must be a ModelFileError whose whole message is
// the expected one (the path, then what is wrong and where). Plus truncation of a valid file at
// every byte: an error until the last tensor's data is complete, a good file from there on.
#define BOOST_TEST_MODULE model_format_gguf_malformed
#include "model/format/gguf_file.hpp"

#include "tests/model/format/format_builder.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>

using namespace actorlm::model;
using namespace actorlm::model::test;
namespace data = boost::unit_test::data;

namespace {

struct Made {
  Bytes bytes;
  std::string message;  // after "<path>: "
};

struct Case {
  const char* name;
  std::function<Made()> make;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

void overwrite(Bytes& b, std::size_t at, const Bytes& with) {
  std::copy(with.begin(), with.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
}

std::string n(std::uint64_t v) { return std::to_string(v); }

// A file with one metadata entry and one Q8_0 tensor, to be spoiled.
GgufBuilder base() {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama").tensor("w", {32, 2}, Q8_0, Bytes(68, 1));
  return b;
}

// One F32 tensor named `name` of `ne` at `offset`, written or not.
Made one_tensor(std::vector<std::uint64_t> ne, std::uint32_t type, std::string message,
                Bytes bytes = {}, std::optional<std::uint64_t> offset = std::nullopt) {
  GgufBuilder b;
  b.tensor("w", std::move(ne), type, std::move(bytes), offset);
  return {b.build(), std::move(message)};
}

const std::vector<Case> cases = {
    // Header.
    {"empty_file",
     [] {
       return Made{{},
                   "truncated at offset 0 reading the magic of the header "
                   "(4 bytes needed, file size 0)"};
     }},
    {"bad_magic",
     [] {
       GgufBuilder b = base();
       return Made{b.magic("GGML").build(), "not a GGUF file (magic 'GGML', expected 'GGUF')"};
     }},
    {"unprintable_magic",
     [] {
       return Made{Bytes{0x7f, 'E', 'L', 'F', 2, 1, 1, 0},
                   "not a GGUF file (magic '?ELF', expected 'GGUF')"};
     }},
    {"version_0",
     [] {
       GgufBuilder b = base();
       return Made{b.version(0).build(), "GGUF version 0 is not supported (only 2 and 3)"};
     }},
    {"version_1",
     [] {
       GgufBuilder b = base();
       return Made{b.version(1).build(),
                   "GGUF version 1 is not supported (only 2 and 3); version 1 files need "
                   "converting with a current llama.cpp"};
     }},
    {"version_4",
     [] {
       GgufBuilder b = base();
       return Made{b.version(4).build(), "GGUF version 4 is not supported (only 2 and 3)"};
     }},
    {"big_endian_version_3",
     [] {
       GgufBuilder b = base();
       return Made{b.version(0x03000000).build(),
                   "GGUF version 50331648 is not supported (only 2 and 3); this looks like a "
                   "big-endian file"};
     }},
    {"metadata_count_2_to_the_60",
     [] {
       GgufBuilder b = base();
       Bytes f = b.kv_count(1ull << 60).build();
       return Made{f, "metadata count 1152921504606846976 of the header is more than the file "
                      "can hold (" + n(f.size() - 24) + " bytes left)"};
     }},
    {"tensor_count_2_to_the_60",
     [] {
       GgufBuilder b = base();
       Bytes f = b.tensor_count(1ull << 60).build();
       return Made{f, "tensor count 1152921504606846976 of the header is more than the file "
                      "can hold (" + n(f.size() - 24) + " bytes left)"};
     }},

    // Metadata.
    {"key_length_2_to_the_63",
     [] {
       GgufBuilder b = base();
       Bytes f = b.build();
       overwrite(f, 24, le<std::uint64_t>(1ull << 63));
       return Made{f, "key of metadata #0 has length 9223372036854775808 at offset 24, more "
                      "than the " + n(f.size() - 32) + " bytes left in the file"};
     }},
    {"empty_key",
     [] {
       GgufBuilder b;
       return Made{b.kv_u32("", 1).build(), "metadata #0 has an empty key"};
     }},
    {"duplicate_key",
     [] {
       GgufBuilder b;
       return Made{b.kv_u32("a", 1).kv_u32("a", 2).build(), "duplicate metadata 'a'"};
     }},
    {"unknown_value_type",
     [] {
       GgufBuilder b;
       return Made{b.kv("a", 13, le(1u)).build(), "metadata 'a' has unknown value type 13"};
     }},
    {"bool_neither_0_nor_1",
     [] {
       GgufBuilder b;
       return Made{b.kv("a", BOOL, Bytes{2}).build(),
                   "metadata 'a': bool value 2 is neither 0 nor 1"};
     }},
    {"string_length_2_to_the_62",
     [] {
       GgufBuilder b;
       b.kv("a", STRING, le<std::uint64_t>(1ull << 62)).kv_u32("b", 1);
       Bytes f = b.build();
       const std::size_t at = b.at("value of a").offset;
       return Made{f, "string of metadata 'a' has length 4611686018427387904 at offset " + n(at) +
                          ", more than the " + n(f.size() - at - 8) + " bytes left in the file"};
     }},
    {"array_length_2_to_the_60",
     [] {
       GgufBuilder b;
       b.kv_array("a", U32, 1ull << 60, {});
       Bytes f = b.build();
       const std::size_t at = b.at("value of a").offset;
       return Made{f, "array length 1152921504606846976 of metadata 'a' is more than the file "
                      "can hold (" + n(f.size() - at - 12) + " bytes left)"};
     }},
    {"array_of_strings_longer_than_the_file",
     [] {
       GgufBuilder b;
       b.kv_array("a", STRING, 1000, str_bytes("x"));
       Bytes f = b.build();
       const std::size_t at = b.at("value of a").offset;
       return Made{f, "array length 1000 of metadata 'a' is more than the file can hold (" +
                          n(f.size() - at - 12) + " bytes left)"};
     }},
    {"array_of_unknown_type",
     [] {
       GgufBuilder b;
       return Made{b.kv_array("a", 99, 0, {}).build(), "metadata 'a' has unknown value type 99"};
     }},
    {"arrays_nested_9_deep",
     [] {
       Bytes v;
       for (int i = 0; i < 8; ++i) v = concat({v, le<std::uint32_t>(ARRAY), le<std::uint64_t>(1)});
       v = concat({v, le<std::uint32_t>(U8), le<std::uint64_t>(0)});
       GgufBuilder b;
       return Made{b.kv("a", ARRAY, v).build(), "metadata 'a': arrays nested more than 8 deep"};
     }},
    {"alignment_not_a_power_of_two",
     [] {
       GgufBuilder b;
       return Made{b.kv_u32("general.alignment", 24).build(),
                   "metadata 'general.alignment': 24 is not a power of two"};
     }},
    {"alignment_zero",
     [] {
       GgufBuilder b;
       return Made{b.kv_u32("general.alignment", 0).build(),
                   "metadata 'general.alignment': 0 is not a power of two"};
     }},
    {"alignment_2_to_the_40",
     [] {
       GgufBuilder b;
       return Made{b.kv("general.alignment", U64, le<std::uint64_t>(1ull << 40)).build(),
                   "metadata 'general.alignment': 1099511627776 is larger than 2^32"};
     }},
    {"alignment_a_string",
     [] {
       GgufBuilder b;
       return Made{b.kv_string("general.alignment", "32").build(),
                   "metadata 'general.alignment' is a string, expected an integer"};
     }},

    // Tensor directory.
    {"tensor_name_length_2_to_the_63",
     [] {
       GgufBuilder b = base();
       Bytes f = b.build();
       const std::size_t at = b.at("name of w").offset;
       overwrite(f, at, le<std::uint64_t>(1ull << 63));
       return Made{f, "name of tensor info #0 has length 9223372036854775808 at offset " + n(at) +
                          ", more than the " + n(f.size() - at - 8) + " bytes left in the file"};
     }},
    {"empty_tensor_name",
     [] {
       GgufBuilder b;
       return Made{b.tensor("", {4}, F32, Bytes(16)).build(), "tensor info #0 has an empty name"};
     }},
    {"duplicate_tensor",
     [] {
       GgufBuilder b;
       b.tensor("w", {4}, F32, Bytes(16)).tensor("w", {4}, F32, Bytes(16));
       return Made{b.build(), "duplicate tensor 'w'"};
     }},
    {"five_dimensions",
     [] {
       return one_tensor({32, 1, 1, 1, 1}, F32, "tensor 'w': 5 dimensions (at most 4)");
     }},
    {"elements_overflow_int64",
     [] {
       return one_tensor({1ull << 32, 1ull << 31}, F32,
                         "tensor 'w': ne [4294967296, 2147483648] has more than 2^63 elements");
     }},
    {"dimension_beyond_int64",
     [] {
       return one_tensor({1ull << 63}, F32,
                         "tensor 'w': ne [9223372036854775808] has more than 2^63 elements");
     }},
    {"f32_bytes_past_2_to_the_64",
     [] {
       return one_tensor({1ull << 62}, F32,
                         "tensor 'w': 4611686018427387904 F32 values need more than 2^64 bytes");
     }},
    {"type_q4_k",
     [] { return one_tensor({256}, 12, "unsupported tensor type 12 (Q4_K) for tensor 'w'"); }},
    {"type_i32",
     [] { return one_tensor({4}, 26, "unsupported tensor type 26 (I32) for tensor 'w'"); }},
    {"type_removed_from_ggml",
     [] { return one_tensor({32}, 4, "unsupported tensor type 4 for tensor 'w'"); }},
    {"type_unknown",
     [] { return one_tensor({32}, 1000, "unsupported tensor type 1000 for tensor 'w'"); }},
    {"row_not_whole_blocks",
     [] {
       return one_tensor({33, 2}, Q8_0,
                         "tensor 'w': row length 33 is not a multiple of the Q8_0 block size 32");
     }},
    {"scalar_of_a_block_type",
     [] {
       return one_tensor({}, Q4_1,
                         "tensor 'w': row length 1 is not a multiple of the Q4_1 block size 32");
     }},
    {"misaligned_offset",
     [] {
       return one_tensor({8}, F32,
                         "tensor 'w': data offset 16 is not a multiple of the alignment 32",
                         Bytes(32), 16);
     }},
    {"data_past_end_of_file",
     [] {
       GgufBuilder b;
       b.tensor("w", {8}, F32, Bytes(32, 1));
       Bytes f = b.build();
       const std::size_t d = b.data_start();
       f.resize(d + 16);
       return Made{f, "tensor 'w': data [" + n(d) + ", " + n(d + 32) + ") past end of file (size " +
                          n(d + 16) + ")"};
     }},
    {"offset_2_to_the_40",
     [] {
       GgufBuilder b;
       b.tensor("w", {8}, F32, {}, 1ull << 40);
       Bytes f = b.build();
       const std::uint64_t at = b.data_start() + (1ull << 40);
       return Made{f, "tensor 'w': data [" + n(at) + ", " + n(at + 32) +
                          ") past end of file (size " + n(f.size()) + ")"};
     }},
    {"offset_wraps_around",
     [] {
       GgufBuilder b;
       b.tensor("w", {8}, F32, {}, ~std::uint64_t{31});
       Bytes f = b.build();
       return Made{f, "tensor 'w': data offset 18446744073709551584 is past end of file (size " +
                          n(f.size()) + ")"};
     }},
    {"end_wraps_around",
     [] {
       // 2^61 f32 values need 2^63 bytes; at offset 2^63 the end passes 2^64.
       GgufBuilder b;
       b.tensor("w", {1ull << 61}, F32, {}, 1ull << 63);
       Bytes f = b.build();
       const std::uint64_t at = b.data_start() + (1ull << 63);
       return Made{f, "tensor 'w': data [" + n(at) + ", " + n(at) + "+9223372036854775808) past "
                      "end of file (size " + n(f.size()) + ")"};
     }},
    {"overlapping_tensors",
     [] {
       GgufBuilder b;
       b.tensor("a", {16}, F32, Bytes(64, 1), 0).tensor("b", {8}, F32, {}, 32);
       Bytes f = b.build();
       const std::size_t d = b.data_start();
       return Made{f, "tensors 'a' [" + n(d) + ", " + n(d + 64) + ") and 'b' [" + n(d + 32) + ", " +
                          n(d + 64) + ") overlap"};
     }},
};

// A file with slack before its later fields, so cutting inside them is the first problem seen
// (earlier, counts are checked against the bytes left).
GgufBuilder cut_base() {
  GgufBuilder b;
  b.kv_string("general.description", std::string(100, 'd'))
      .kv_string("general.name", "tiny")
      .kv_array("ints", I32, 3, concat({le(1), le(2), le(3)}))
      .tensor("w", {32, 2}, Q8_0, Bytes(68, 1));
  return b;
}

struct Cut {
  const char* field;   // GgufBuilder label
  std::size_t into;    // bytes of the field kept
  std::function<std::string(std::size_t field_offset)> message;
};
std::ostream& operator<<(std::ostream& o, const Cut& c) { return o << c.field << " +" << c.into; }

std::string truncated(std::size_t at, const std::string& what, std::size_t need, std::size_t size) {
  return "truncated at offset " + n(at) + " reading the " + what + " (" + n(need) +
         " bytes needed, file size " + n(size) + ")";
}

const std::vector<Cut> cuts = {
    {"magic", 3, [](std::size_t) { return truncated(0, "magic of the header", 4, 3); }},
    {"version", 2, [](std::size_t) { return truncated(4, "version of the header", 4, 6); }},
    {"tensor count", 2,
     [](std::size_t) { return truncated(8, "tensor count of the header", 8, 10); }},
    {"metadata count", 4,
     [](std::size_t) { return truncated(16, "metadata count of the header", 8, 20); }},
    {"key of general.name", 4,
     [](std::size_t o) { return truncated(o, "key length of metadata #1", 8, o + 4); }},
    {"key of general.name", 13,
     [](std::size_t o) {
       return "key of metadata #1 has length 12 at offset " + n(o) +
              ", more than the 5 bytes left in the file";
     }},
    {"type of general.name", 2,
     [](std::size_t o) { return truncated(o, "value type of metadata 'general.name'", 4, o + 2); }},
    {"value of general.name", 3,
     [](std::size_t o) {
       return truncated(o, "string length of metadata 'general.name'", 8, o + 3);
     }},
    {"value of general.name", 10,
     [](std::size_t o) {
       return "string of metadata 'general.name' has length 4 at offset " + n(o) +
              ", more than the 2 bytes left in the file";
     }},
    {"value of ints", 2,
     [](std::size_t o) { return truncated(o, "array element type of metadata 'ints'", 4, o + 2); }},
    {"value of ints", 6,
     [](std::size_t o) { return truncated(o + 4, "array length of metadata 'ints'", 8, o + 6); }},
    {"value of ints", 17,
     [](std::size_t) {
       return std::string("array length 3 of metadata 'ints' is more than the file can hold "
                          "(5 bytes left)");
     }},
    {"name of w", 3,
     [](std::size_t o) { return truncated(o, "name length of tensor info #0", 8, o + 3); }},
    {"dimension count of w", 1,
     [](std::size_t o) { return truncated(o, "dimension count of tensor 'w'", 4, o + 1); }},
    {"dimensions of w", 12,
     [](std::size_t o) { return truncated(o + 8, "dimensions of tensor 'w'", 8, o + 12); }},
    {"type of w", 3, [](std::size_t o) { return truncated(o, "type of tensor 'w'", 4, o + 3); }},
    {"data offset of w", 7,
     [](std::size_t o) { return truncated(o, "data offset of tensor 'w'", 8, o + 7); }},
};

std::string open_error(const std::string& path) {
  try {
    GgufFile::open(path);
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "(opened)";
}

}  // namespace

BOOST_DATA_TEST_CASE(rejects_each_malformed_file_with_its_message, data::make(cases), c) {
  TempDir dir;
  const Made m = c.make();
  const std::string path = dir.write("bad.gguf", m.bytes);
  BOOST_TEST(open_error(path) == path + ": " + m.message);
}

BOOST_DATA_TEST_CASE(names_the_field_a_truncated_header_ends_in, data::make(cuts), c) {
  TempDir dir;
  GgufBuilder b = cut_base();
  Bytes f = b.build();
  const std::size_t at = b.at(c.field).offset;
  f.resize(at + c.into);
  const std::string path = dir.write("cut.gguf", f);
  BOOST_TEST(open_error(path) == path + ": " + c.message(at));
}

BOOST_AUTO_TEST_CASE(fails_at_every_cut_until_the_last_tensor_is_complete) {
  TempDir dir;
  GgufBuilder b = cut_base();
  const Bytes whole = b.build();
  const std::size_t data_end = b.data_start() + 68;
  BOOST_REQUIRE(whole.size() > data_end);  // padding after the data
  for (std::size_t size = 0; size <= whole.size(); ++size) {
    const std::string path = dir.write(
        "cut.gguf", Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size)));
    const std::string e = open_error(path);
    if (size >= data_end) {
      BOOST_TEST_REQUIRE(e == "(opened)", "cut at " << size);
      continue;
    }
    BOOST_TEST_REQUIRE(e.rfind(path + ": ", 0) == 0, "cut at " << size << ": " << e);
    const bool known = e.find("truncated at offset") != std::string::npos ||
                       e.find("more than the file can hold") != std::string::npos ||
                       e.find("bytes left in the file") != std::string::npos ||
                       e.find("past end of file") != std::string::npos;
    BOOST_TEST_REQUIRE(known, "cut at " << size << ": " << e);
  }
}

BOOST_AUTO_TEST_CASE(accepts_arrays_nested_8_deep) {
  Bytes v;
  for (int i = 0; i < 7; ++i) v = concat({v, le<std::uint32_t>(ARRAY), le<std::uint64_t>(1)});
  v = concat({v, le<std::uint32_t>(U8), le<std::uint64_t>(1), Bytes{42}});
  GgufBuilder b;
  TempDir dir;
  const auto f = GgufFile::open(dir.write("deep.gguf", b.kv("a", ARRAY, v).build()));
  const GgufValue* x = &f->metadata().at("a");
  for (int depth = 0; depth < 8; ++depth) {
    BOOST_REQUIRE(x->type == GgufValue::Type::array);
    x = &std::get<std::vector<GgufValue>>(x->value).at(0);
  }
  BOOST_TEST(std::get<std::uint64_t>(x->value) == 42u);
}
