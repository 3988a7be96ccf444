// Trace replay: the Azure CSV and Mooncake JSONL fixtures parsed exactly, options, and errors
// that name file, line, column and field.
#define BOOST_TEST_MODULE sim_trace
#include "sim/trace.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace actorlm::sim;

namespace {

const std::string fixtures = ACTORLM_SIM_FIXTURES;

std::string error_of(const TraceLoad& load) {
  return load.error ? load.error->to_string() : std::string("no error");
}

}  // namespace

BOOST_AUTO_TEST_CASE(azure_csv_fixture_is_parsed_exactly) {
  const TraceLoad load = load_trace(fixtures + "/azure_conv_small.csv");
  BOOST_TEST_REQUIRE(load.ok(), error_of(load));
  const std::vector<WorkloadRequest> expected = {
      {0, 374, 44},
      {4'314'579'000, 396, 109},
      {4'319'410'000, 879, 1},  // GeneratedTokens 0: raised to 1
      {14'442'866'700, 2, 1},
  };
  BOOST_TEST((load.requests == expected));
  BOOST_TEST(load.raised_to_one == 1u);
}

BOOST_AUTO_TEST_CASE(mooncake_jsonl_fixture_is_parsed_exactly) {
  const TraceLoad load = load_trace(fixtures + "/mooncake_small.jsonl");
  BOOST_TEST_REQUIRE(load.ok(), error_of(load));
  const std::vector<WorkloadRequest> expected = {
      {0, 6955, 52}, {27'482'000'000, 6472, 26}, {30'535'000'000, 6593, 27}};
  BOOST_TEST((load.requests == expected));
}

BOOST_AUTO_TEST_CASE(columns_in_any_order_seconds_and_unsorted_rows) {
  const TraceLoad load = parse_trace(
      "GeneratedTokens,Extra,TIMESTAMP,ContextTokens\n"
      "5,x,10.5,100\n"
      "6,y,10.0,200\n"
      "7,z,12,300\n",
      TraceFormat::azure_csv, "t.csv");
  BOOST_TEST_REQUIRE(load.ok(), error_of(load));
  const std::vector<WorkloadRequest> expected = {
      {0, 200, 6}, {500'000'000, 100, 5}, {2'000'000'000, 300, 7}};
  BOOST_TEST((load.requests == expected));
}

BOOST_AUTO_TEST_CASE(limit_keeps_the_earliest_rows_and_speedup_compresses_time) {
  TraceOptions options;
  options.limit = 2;
  options.speedup = 4;
  const TraceLoad load = load_trace(fixtures + "/mooncake_small.jsonl", std::nullopt, options);
  BOOST_TEST_REQUIRE(load.ok(), error_of(load));
  const std::vector<WorkloadRequest> expected = {{0, 6955, 52}, {6'870'500'000, 6472, 26}};
  BOOST_TEST((load.requests == expected));
}

BOOST_AUTO_TEST_CASE(formats_follow_names_and_extensions) {
  BOOST_TEST((trace_format_from_path("a/b.CSV") == TraceFormat::azure_csv));
  BOOST_TEST((trace_format_from_path("x.jsonl") == TraceFormat::mooncake_jsonl));
  BOOST_TEST(!trace_format_from_path("x.txt").has_value());
  BOOST_TEST((trace_format_from_name(to_string(TraceFormat::mooncake_jsonl)) ==
              TraceFormat::mooncake_jsonl));
}

BOOST_AUTO_TEST_CASE(a_missing_column_is_named) {
  const TraceLoad load = parse_trace("TIMESTAMP,ContextTokens\n1,2\n", TraceFormat::azure_csv,
                                     "azure.csv");
  BOOST_TEST(error_of(load) ==
             "azure.csv:1:1: GeneratedTokens: missing column (the header needs TIMESTAMP,"
             "ContextTokens,GeneratedTokens; found \"TIMESTAMP,ContextTokens\")");
}

BOOST_AUTO_TEST_CASE(a_bad_number_names_line_column_and_field) {
  const TraceLoad load = parse_trace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.6805900,374,44\n"
      "2023-11-16 18:15:50.9951690,39x6,109\n",
      TraceFormat::azure_csv, "azure.csv");
  BOOST_TEST(error_of(load) ==
             "azure.csv:3:29: ContextTokens: expected an integer, found \"39x6\"");
  const TraceLoad bad_time = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                         "2023-13-16 18:15:46,1,1\n",
                                         TraceFormat::azure_csv, "azure.csv");
  BOOST_TEST(error_of(bad_time) ==
             "azure.csv:2:1: TIMESTAMP: expected a date-time (2023-11-16 18:15:46.6805900) or "
             "seconds, found \"2023-13-16 18:15:46\"");
}

BOOST_AUTO_TEST_CASE(a_negative_length_in_a_file_names_file_line_and_field) {
  const std::string file = fixtures + "/azure_negative_length.csv";
  BOOST_TEST(error_of(load_trace(file)) ==
             file + ":3:8: GeneratedTokens: expected a token count >= 0, found -4");
}

BOOST_AUTO_TEST_CASE(a_short_row_is_an_error) {
  const TraceLoad load = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\n",
                                     TraceFormat::azure_csv, "azure.csv");
  BOOST_TEST(error_of(load) == "azure.csv:2:1: expected at least 3 fields, found 2");
}

BOOST_AUTO_TEST_CASE(mooncake_errors_name_the_field_and_its_column) {
  const std::string good = R"({"timestamp": 0, "input_length": 1, "output_length": 1})";
  auto error = [&](const std::string& line) {
    return error_of(parse_trace(good + "\n" + line + "\n", TraceFormat::mooncake_jsonl, "m.jsonl"));
  };
  BOOST_TEST(error(R"({"timestamp": 5, "input_length": 3})") ==
             "m.jsonl:2:1: output_length: missing field");
  BOOST_TEST(error(R"({"timestamp": 5, "input_length": -3, "output_length": 1})") ==
             "m.jsonl:2:18: input_length: expected a token count >= 0, found -3");
  BOOST_TEST(error(R"({"timestamp": "5", "input_length": 3, "output_length": 1})") ==
             "m.jsonl:2:2: timestamp: expected a number of ms, found \"5\"");
  BOOST_TEST(error(R"({"timestamp": 5, "input_length": 3.5, "output_length": 1})") ==
             "m.jsonl:2:18: input_length: expected an integer, found 3.5");
  BOOST_TEST(error(R"({"timestamp": 5, "input_length": 3,)") == "m.jsonl:2:36: invalid JSON");
}

BOOST_AUTO_TEST_CASE(empty_traces_and_missing_files_are_errors) {
  BOOST_TEST(error_of(parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n",
                                  TraceFormat::azure_csv, "e.csv")) ==
             "e.csv: the trace has no requests");
  BOOST_TEST(error_of(load_trace("/nonexistent/trace.csv")) ==
             "/nonexistent/trace.csv: cannot open the trace file");
  BOOST_TEST(error_of(load_trace("trace.txt")) ==
             "trace.txt: unknown trace format: expected a .csv (Azure) or .jsonl (Mooncake) "
             "file, or a format");
}
