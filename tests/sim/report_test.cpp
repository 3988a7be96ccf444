// Reports: the aligned table, CSV and JSON, exact for small inputs and byte-identical on reruns.
#define BOOST_TEST_MODULE sim_report
#include "sim/report.hpp"
#include "tests/sim/tiny_run.hpp"

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace actorlm::sim;
using actorlm::scheduler::StepRecord;
using namespace actorlm::sim::testing;

namespace {

std::vector<RegimeResult> two_regimes() {
  const auto requests = tiny_run();
  const std::vector<StepRecord> steps = tiny_steps();
  SummaryOptions options;
  options.slo.ttft_s = 1.0;
  Summary dynamic;
  dynamic.output_tokens_per_s = 1234.56;
  dynamic.requests_per_s = 12.3456;
  dynamic.e2e_s.p50 = 0.5;
  dynamic.e2e_s.p90 = 1.25;
  dynamic.ttft_s.p50 = 0.01;
  dynamic.ttft_s.p90 = 0.02;
  dynamic.tpot_s.p50 = 0.0321;
  dynamic.tpot_s.p90 = 0.0456;
  dynamic.batch_size_max = 32;
  dynamic.kv_used_max = 0.9876;
  return {{"paged", summarize(requests, steps, options)}, {"dynamic, padded", dynamic}};
}

std::size_t count_of(const std::string& text, char c) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), c));
}

}  // namespace

BOOST_AUTO_TEST_CASE(fixed_formatting_rounds_and_drops_negative_zero) {
  BOOST_TEST(format_fixed(1.23456, 3) == "1.235");
  BOOST_TEST(format_fixed(-0.0001, 3) == "0.000");
  BOOST_TEST(format_fixed(-1.5, 1) == "-1.5");
  BOOST_TEST(format_fixed(2, 0) == "2");
  BOOST_TEST(format_fixed(1e6, 2) == "1000000.00");
}

BOOST_AUTO_TEST_CASE(the_table_is_aligned_with_one_row_per_regime) {
  const std::string expected =
      "regime          | throughput tok/s |  req/s | p50/p90 latency s | TTFT p50/p90 s | "
      "TPOT p50/p90 ms | max batch | KV used max\n"
      "----------------|------------------|--------|-------------------|----------------|"
      "-----------------|-----------|------------\n"
      "paged           |              2.0 |  0.667 |       1.000/3.000 |    1.000/1.000 | "
      "    500.0/500.0 |         4 |       50.0%\n"
      "dynamic, padded |           1234.6 | 12.346 |       0.500/1.250 |    0.010/0.020 | "
      "      32.1/45.6 |        32 |       98.8%\n";
  BOOST_TEST(summary_table(two_regimes()) == expected);
}

BOOST_AUTO_TEST_CASE(summary_csv_has_a_header_and_one_quoted_row_per_regime) {
  const std::string csv = summary_csv(two_regimes());
  BOOST_TEST(count_of(csv, '\n') == 3u);
  const std::string header = csv.substr(0, csv.find('\n'));
  BOOST_TEST(header.rfind("regime,requests,completed,failed,duration_s,input_tokens,"
                          "output_tokens,output_tokens_per_s,requests_per_s,ttft_s_count,"
                          "ttft_s_mean,ttft_s_p50,ttft_s_p90,ttft_s_p99,ttft_s_max,", 0) == 0u);
  BOOST_TEST(header.find(",goodput_requests_per_s,slo_attainment,mean_concurrency,steps,"
                         "kv_used_mean,kv_used_max,batch_size_mean,batch_size_max,"
                         "preemptions") != std::string::npos);
  const std::string paged = csv.substr(header.size() + 1, csv.find('\n', header.size() + 1) -
                                                              header.size() - 1);
  BOOST_TEST(paged.rfind("paged,3,2,1,3.000000,30,6,2.000,0.667,2,1.000000,1.000000,", 0) == 0u);
  BOOST_TEST(paged.find(",1.000000,,,2,0.667,0.6667,1.333,2,0.4375,0.5000,3.000,4,1") !=
             std::string::npos);
  BOOST_TEST(count_of(paged, ',') == count_of(header, ','));
  BOOST_TEST(csv.find("\n\"dynamic, padded\",") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(requests_csv_lists_every_request_with_absent_values_empty) {
  const auto requests = tiny_run();
  Slo slo;
  slo.ttft_s = 1.0;
  BOOST_TEST(requests_csv("paged", requests, slo) ==
             "regime,id,arrival_s,input_tokens,output_tokens,completed,ttft_s,tpot_s,e2e_s,"
             "queue_s,meets_slo\n"
             "paged,1,0.000000,10,5,1,1.000000,0.500000,3.000000,0.500000,1\n"
             "paged,2,1.000000,20,1,1,1.000000,,1.000000,0.000000,1\n"
             "paged,3,2.000000,30,0,0,,,,,0\n");
  BOOST_TEST(requests_csv("x", {}, slo, false).empty());
}

BOOST_AUTO_TEST_CASE(series_csv_has_one_row_per_point) {
  BOOST_TEST(series_csv(two_regimes()) ==
             "regime,t_s,batch_size,kv_used_fraction\n"
             "paged,0.000000,2.000,0.2500\n"
             "paged,1.000000,4.000,0.5000\n");
}

BOOST_AUTO_TEST_CASE(json_carries_every_field_and_reads_back) {
  const auto regimes = two_regimes();
  const nlohmann::json doc = nlohmann::json::parse(report_json(regimes));
  BOOST_TEST_REQUIRE(doc["regimes"].size() == 2u);
  const nlohmann::json& paged = doc["regimes"][0];
  BOOST_TEST(paged["name"].get<std::string>() == "paged");
  const nlohmann::json& sum = paged["summary"];
  BOOST_TEST(sum.size() == 25u);  // one key per Summary field
  BOOST_TEST(sum["completed"].get<int>() == 2);
  BOOST_TEST(sum["requests_per_s"].get<double>() == 2.0 / 3.0);  // shortest round-trip form
  BOOST_TEST(sum["e2e_s"]["p90"].get<double>() == 3.0);
  BOOST_TEST(sum["slo"]["ttft_s"].get<double>() == 1.0);
  BOOST_TEST(sum["slo"]["tpot_s"].is_null());
  BOOST_TEST(sum["series"].dump() == "[[0.0,2.0,0.25],[1.0,4.0,0.5]]");
  BOOST_TEST(sum["preemptions"].get<int>() == 1);
}

BOOST_AUTO_TEST_CASE(identical_input_gives_byte_identical_reports) {
  const auto a = two_regimes(), b = two_regimes();
  BOOST_TEST(summary_table(a) == summary_table(b));
  BOOST_TEST(summary_csv(a) == summary_csv(b));
  BOOST_TEST(report_json(a) == report_json(b));
  BOOST_TEST(report_json(a).back() == '\n');
}
