// The Prometheus text format of histograms and counters, byte for byte.
#define BOOST_TEST_MODULE prometheus
#include <boost/test/unit_test.hpp>

#include "actors/http/prometheus.hpp"

using namespace actorlm::http;

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative_with_inf_sum_and_count) {
  Histogram h({0.1, 1});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.observe(v);
  std::string out;
  h.render(out, "x_seconds", "A latency");
  BOOST_TEST(out ==
             "# HELP x_seconds A latency\n# TYPE x_seconds histogram\n"
             "x_seconds_bucket{le=\"0.1\"} 2\nx_seconds_bucket{le=\"1\"} 3\nx_seconds_bucket{le=\"+Inf\"} 4\n"
             "x_seconds_sum 3.65\nx_seconds_count 4\n");
}

BOOST_AUTO_TEST_CASE(counters_and_gauges_have_help_and_type_lines) {
  std::string out;
  render_counter(out, "a_total", "Things", 12);
  render_gauge(out, "b_ratio", "Share", 0.25);
  BOOST_TEST(out == "# HELP a_total Things\n# TYPE a_total counter\na_total 12\n"
                    "# HELP b_ratio Share\n# TYPE b_ratio gauge\nb_ratio 0.25\n");
}
