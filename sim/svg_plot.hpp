#pragma once
// SVG charts with no dependency: a line chart (several named series, ticked axes, legend) for
// latency against load and KV usage / batch size over time, and a stacked horizontal bar chart
// for the per-GPU memory breakdown. Output is standalone XML and deterministic (fixed palette,
// coordinates with 2 decimals via std::to_chars); text is XML-escaped.

#include "sim/report.hpp"  // RegimeResult

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::sim {

struct LineSeries {
  std::string name;
  std::vector<double> x;  // same length as y; non-finite points are skipped
  std::vector<double> y;
};

struct LineChart {
  std::string title;
  std::string x_label;  // with its unit: "offered load (req/s)"
  std::string y_label;  // "p90 end-to-end latency (s)"
  std::vector<LineSeries> series;
  bool markers = true;  // a dot on every point: for a few points (load sweeps), not time series
  bool y_from_zero = true;  // the y axis starts at 0 when every value is >= 0
  double width = 760;   // px
  double height = 420;  // px
};

std::string render_line_chart(const LineChart& chart);

struct BarSegment {
  std::string name;  // the legend's entry; one colour per name across all rows
  double value = 0;  // >= 0, in the chart's unit
};

struct BarRow {
  std::string label;  // "GPU 0"
  std::vector<BarSegment> segments;  // stacked left to right
  std::optional<double> limit;       // a dashed marker (e.g. the GPU's memory), same unit
};

struct StackedBarChart {
  std::string title;
  std::string x_label;  // "GB"
  std::vector<BarRow> rows;
  double width = 760;   // px; the height follows from the number of rows
};

std::string render_stacked_bar_chart(const StackedBarChart& chart);

// ---- the simulator's charts, from its results ----

// One GPU's memory: components in bytes (weights, activations, overhead, KV blocks, ...).
struct MemoryBar {
  std::string label;  // "GPU 0" or "TP 4 rank 0"
  std::vector<std::pair<std::string, std::uint64_t>> components;  // name, bytes
  std::uint64_t capacity_bytes = 0;  // 0: no marker
};
// A stacked bar chart in GB (1e9 bytes), one row per GPU.
StackedBarChart memory_breakdown_chart(std::string title, std::span<const MemoryBar> gpus);

// Each regime's Summary::series as a line over time (s): batch size, and KV used in %.
LineChart batch_size_over_time(std::span<const RegimeResult> regimes);
LineChart kv_usage_over_time(std::span<const RegimeResult> regimes);

}  // namespace actorlm::sim
