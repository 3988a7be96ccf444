// SVG charts: well-formed XML (balanced tags, quoted attributes, escaped text), every series and
// component named, deterministic output.
#define BOOST_TEST_MODULE sim_svg_plot
#include "sim/svg_plot.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace actorlm::sim;

namespace {

// A minimal XML check: every tag closes in order, attributes are quoted, text has no stray '<'
// or '&' outside entities. Returns "" when well formed, else what is wrong.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  std::size_t i = 0;
  if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
  bool root_seen = false;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const std::size_t semi = xml.find(';', i);
      const std::string entity = xml.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;")
        return "bad entity at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (xml[i] == '>') return "stray '>' at " + std::to_string(i);
    if (xml[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i])))
        return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    const std::size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "unbalanced quotes in <" + tag + ">";
    if (tag.find('<') != std::string::npos) return "'<' inside a tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "unexpected </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (open.empty()) {
      if (root_seen) return "a second root <" + name + ">";
      root_seen = true;
    }
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> not closed";
  return root_seen ? "" : "no root element";
}

LineChart latency_chart() {
  LineChart chart;
  chart.title = "p90 latency against load";
  chart.x_label = "offered load (req/s)";
  chart.y_label = "p90 end-to-end latency (s)";
  chart.series = {{"dynamic", {0.5, 1, 2, 4}, {1.2, 1.5, 3.1, 9.7}},
                  {"continuous", {0.5, 1, 2, 4}, {0.8, 0.9, 1.1, 2.5}},
                  {"paged <PA> & co", {0.5, 1, 2, 4},
                   {0.7, 0.8, std::numeric_limits<double>::quiet_NaN(), 1.9}}};
  return chart;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_checker_rejects_malformed_xml) {
  BOOST_TEST(xml_problem("<svg><g></svg>") != "");
  BOOST_TEST(xml_problem("<svg><text>a & b</text></svg>") != "");
  BOOST_TEST(xml_problem("<svg><rect x=\"1/></svg>") != "");
  BOOST_TEST(xml_problem("<svg><g/><text>a &amp; b</text></svg>") == "");
}

BOOST_AUTO_TEST_CASE(a_line_chart_is_well_formed_and_names_every_series) {
  const std::string svg = render_line_chart(latency_chart());
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(svg.find(">dynamic</text>") != std::string::npos);
  BOOST_TEST(svg.find(">continuous</text>") != std::string::npos);
  BOOST_TEST(svg.find(">paged &lt;PA&gt; &amp; co</text>") != std::string::npos);
  BOOST_TEST(svg.find(">offered load (req/s)</text>") != std::string::npos);
  BOOST_TEST(std::count(svg.begin(), svg.end(), '\n') > 20);
  // Three polylines, and 11 markers: the NaN point is skipped.
  std::size_t polylines = 0, circles = 0;
  for (std::size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++polylines;
  for (std::size_t at = 0; (at = svg.find("<circle", at)) != std::string::npos; ++at) ++circles;
  BOOST_TEST(polylines == 3u);
  BOOST_TEST(circles == 11u);
}

BOOST_AUTO_TEST_CASE(axes_get_round_ticks_covering_the_data) {
  const std::string svg = render_line_chart(latency_chart());
  // y from 0 to 9.7: ticks 0, 2, ..., 10; x from 0.5 to 4: ticks 0, 1, ..., 4.
  for (const char* tick : {">0</text>", ">2</text>", ">10</text>", ">3</text>"})
    BOOST_TEST(svg.find(tick) != std::string::npos, tick);
  BOOST_TEST(svg.find(">12</text>") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(charts_are_deterministic) {
  BOOST_TEST(render_line_chart(latency_chart()) == render_line_chart(latency_chart()));
}

BOOST_AUTO_TEST_CASE(empty_and_flat_charts_are_still_valid) {
  LineChart empty;
  empty.title = "nothing";
  BOOST_TEST(xml_problem(render_line_chart(empty)) == "");
  LineChart flat;
  flat.series = {{"one point", {3}, {5}}};
  const std::string svg = render_line_chart(flat);
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(svg.find("nan") == std::string::npos);
  BOOST_TEST(svg.find("inf") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(memory_breakdown_stacks_components_per_gpu_in_gb) {
  const std::vector<MemoryBar> gpus = {
      {"TP 4 rank 0", {{"weights", 20'600'000'000}, {"activations", 500'000'000},
                       {"overhead", 1'000'000'000}, {"KV blocks", 1'500'000'000}},
       24'000'000'000},
      {"TP 4 rank 1", {{"weights", 20'600'000'000}, {"KV blocks", 2'000'000'000}},
       24'000'000'000}};
  const StackedBarChart chart = memory_breakdown_chart("Falcon-40B on g5.12xlarge", gpus);
  BOOST_TEST_REQUIRE(chart.rows.size() == 2u);
  BOOST_TEST(chart.rows[0].segments[0].value == 20.6);
  BOOST_TEST(chart.rows[0].limit.value_or(0) == 24.0);
  const std::string svg = render_stacked_bar_chart(chart);
  BOOST_TEST(xml_problem(svg) == "");
  for (const char* name : {">weights</text>", ">activations</text>", ">overhead</text>",
                           ">KV blocks</text>", ">TP 4 rank 0</text>", ">TP 4 rank 1</text>",
                           ">23.6</text>", ">22.6</text>"})
    BOOST_TEST(svg.find(name) != std::string::npos, name);
  // One colour per component: the legend lists "KV blocks" once although both GPUs have it.
  BOOST_TEST(svg.find(">KV blocks</text>") == svg.rfind(">KV blocks</text>"));
  BOOST_TEST(svg.find("stroke-dasharray") != std::string::npos);  // the 24 GB marker
}

BOOST_AUTO_TEST_CASE(time_series_charts_come_from_the_summaries) {
  Summary a;
  a.series = {{0, 2, 0.25}, {1, 4, 0.5}};
  const std::vector<RegimeResult> regimes = {{"paged", a}, {"continuous", a}};
  const LineChart kv = kv_usage_over_time(regimes);
  BOOST_TEST_REQUIRE(kv.series.size() == 2u);
  BOOST_TEST(kv.series[0].y[1] == 50.0);
  BOOST_TEST(batch_size_over_time(regimes).series[1].y[0] == 2.0);
  BOOST_TEST(xml_problem(render_line_chart(kv)) == "");
}
