// SVG line and stacked bar charts (see svg_plot.hpp).
#include "sim/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace actorlm::sim {
namespace {

// Tableau 10: distinguishable, and fixed so that output is deterministic.
constexpr const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
const char* colour(std::size_t i) { return palette[i % std::size(palette)]; }

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string px(double v) { return format_fixed(v, 2); }

// A linear axis with 1-2-5 ticks covering [min, max].
struct Axis {
  double lo = 0, hi = 1, step = 0.2;
  int decimals = 1;  // of the tick labels
  double to_px(double v, double px_lo, double px_hi) const {
    return px_lo + (v - lo) / (hi - lo) * (px_hi - px_lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    const auto n = static_cast<long>(std::lround((hi - lo) / step));
    for (long i = 0; i <= n; ++i) out.push_back(lo + static_cast<double>(i) * step);
    return out;
  }
};

Axis nice_axis(double min, double max, bool from_zero) {
  if (!std::isfinite(min) || !std::isfinite(max)) min = 0, max = 1;
  if (from_zero && min >= 0) min = 0;
  if (max <= min) {  // one value: give it room
    const double pad = max == 0 ? 1 : std::abs(max) * 0.1;
    if (!(from_zero && min == 0)) min -= pad;
    max += pad;
  }
  const double raw = (max - min) / 5;  // about five intervals
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  Axis a;
  a.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  a.lo = std::floor(min / a.step) * a.step;
  a.hi = std::ceil(max / a.step) * a.step;
  a.decimals = a.step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(a.step) - 1e-9));
  return a;
}

std::string header(double width, double height, std::string_view title) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" +
         px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n"
         "<rect x=\"0\" y=\"0\" width=\"" + px(width) + "\" height=\"" + px(height) +
         "\" fill=\"white\"/>\n"
         "<text x=\"" + px(width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
         escape(title) + "</text>\n";
}

std::string text(double x, double y, std::string_view anchor, std::string_view content,
                 std::string_view extra = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" text-anchor=\"" + std::string(anchor) +
         "\"" + std::string(extra) + ">" + escape(content) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, std::string_view style) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
         px(y2) + "\" " + std::string(style) + "/>\n";
}

std::string legend_entry(double x, double y, const char* fill, std::string_view name) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
         fill + "\"/>\n" + text(x + 18, y + 1, "start", name);
}

}  // namespace

std::string render_line_chart(const LineChart& chart) {
  const double left = 70, right = chart.width - 180, top = 40, bottom = chart.height - 55;  // px
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min,
         y_max = -x_min;
  for (const LineSeries& s : chart.series) {
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_min = std::min(x_min, s.x[i]), x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]), y_max = std::max(y_max, s.y[i]);
    }
  }
  const Axis xa = nice_axis(x_min, x_max, false);
  const Axis ya = nice_axis(y_min, y_max, chart.y_from_zero);

  std::string out = header(chart.width, chart.height, chart.title);
  for (double t : xa.ticks()) {
    const double x = xa.to_px(t, left, right);
    out += line(x, top, x, bottom, "stroke=\"#e6e6e6\"");
    out += text(x, bottom + 16, "middle", format_fixed(t, xa.decimals));
  }
  for (double t : ya.ticks()) {
    const double y = ya.to_px(t, bottom, top);
    out += line(left, y, right, y, "stroke=\"#e6e6e6\"");
    out += text(left - 6, y + 4, "end", format_fixed(t, ya.decimals));
  }
  out += line(left, bottom, right, bottom, "stroke=\"#333333\"");
  out += line(left, top, left, bottom, "stroke=\"#333333\"");
  out += text((left + right) / 2, chart.height - 15, "middle", chart.x_label);
  out += text(18, (top + bottom) / 2, "middle", chart.y_label,
              " transform=\"rotate(-90 18 " + px((top + bottom) / 2) + ")\"");

  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const LineSeries& s = chart.series[k];
    std::string points, dots;
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      const std::string x = px(xa.to_px(s.x[i], left, right)), y = px(ya.to_px(s.y[i], bottom, top));
      points += (points.empty() ? "" : " ") + x + "," + y;
      if (chart.markers)
        dots += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"3\" fill=\"" + colour(k) + "\"/>\n";
    }
    out += "<g>\n<title>" + escape(s.name) + "</title>\n";
    if (!points.empty())
      out += "<polyline fill=\"none\" stroke=\"" + std::string(colour(k)) +
             "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    out += dots + "</g>\n";
    out += legend_entry(right + 20, top + 10 + 20 * static_cast<double>(k), colour(k), s.name);
  }
  return out + "</svg>\n";
}

std::string render_stacked_bar_chart(const StackedBarChart& chart) {
  const double left = 110, right = chart.width - 200, top = 45;  // px
  const double bar = 26, gap = 14;                                // px
  const double bottom = top + static_cast<double>(chart.rows.size()) * (bar + gap);
  const double height = bottom + 55;

  std::vector<std::string> names;  // legend order: first appearance
  double max_total = 0;
  for (const BarRow& row : chart.rows) {
    double total = 0;
    for (const BarSegment& s : row.segments) {
      total += std::max(s.value, 0.0);
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
    }
    max_total = std::max({max_total, total, row.limit.value_or(0)});
  }
  const Axis xa = nice_axis(0, max_total, true);
  auto colour_of = [&](const std::string& name) {
    return colour(static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin()));
  };

  std::string out = header(chart.width, height, chart.title);
  for (double t : xa.ticks()) {
    const double x = xa.to_px(t, left, right);
    out += line(x, top - 5, x, bottom, "stroke=\"#e6e6e6\"");
    out += text(x, bottom + 16, "middle", format_fixed(t, xa.decimals));
  }
  out += line(left, bottom, right, bottom, "stroke=\"#333333\"");
  out += text((left + right) / 2, height - 15, "middle", chart.x_label);
  for (std::size_t r = 0; r < chart.rows.size(); ++r) {
    const BarRow& row = chart.rows[r];
    const double y = top + static_cast<double>(r) * (bar + gap);
    out += text(left - 8, y + bar / 2 + 4, "end", row.label);
    double at = 0;  // chart unit
    for (const BarSegment& s : row.segments) {
      const double v = std::max(s.value, 0.0);
      const double x0 = xa.to_px(at, left, right), x1 = xa.to_px(at + v, left, right);
      out += "<rect x=\"" + px(x0) + "\" y=\"" + px(y) + "\" width=\"" + px(x1 - x0) +
             "\" height=\"" + px(bar) + "\" fill=\"" + colour_of(s.name) + "\"><title>" +
             escape(s.name) + " " + format_fixed(v, 2) + "</title></rect>\n";
      at += v;
    }
    out += text(xa.to_px(at, left, right) + 4, y + bar / 2 + 4, "start", format_fixed(at, 1));
    if (row.limit) {
      const double x = xa.to_px(*row.limit, left, right);
      out += line(x, y - 4, x, y + bar + 4, "stroke=\"#000000\" stroke-dasharray=\"4 3\"");
    }
  }
  for (std::size_t k = 0; k < names.size(); ++k)
    out += legend_entry(right + 20, top + 10 + 20 * static_cast<double>(k), colour(k), names[k]);
  return out + "</svg>\n";
}

StackedBarChart memory_breakdown_chart(std::string title, std::span<const MemoryBar> gpus) {
  constexpr double bytes_per_gb = 1e9;
  StackedBarChart chart;
  chart.title = std::move(title);
  chart.x_label = "memory per GPU (GB)";
  for (const MemoryBar& gpu : gpus) {
    BarRow row;
    row.label = gpu.label;
    for (const auto& [name, bytes] : gpu.components)
      row.segments.push_back({name, static_cast<double>(bytes) / bytes_per_gb});
    if (gpu.capacity_bytes > 0) row.limit = static_cast<double>(gpu.capacity_bytes) / bytes_per_gb;
    chart.rows.push_back(std::move(row));
  }
  return chart;
}

namespace {

LineChart over_time(std::span<const RegimeResult> regimes, std::string title, std::string y_label,
                    double (*value)(const SeriesPoint&)) {
  LineChart chart;
  chart.title = std::move(title);
  chart.x_label = "time (s)";
  chart.y_label = std::move(y_label);
  chart.markers = false;
  for (const auto& [name, summary] : regimes) {
    LineSeries s;
    s.name = name;
    for (const SeriesPoint& p : summary.series) {
      s.x.push_back(p.t_s);
      s.y.push_back(value(p));
    }
    chart.series.push_back(std::move(s));
  }
  return chart;
}

}  // namespace

LineChart batch_size_over_time(std::span<const RegimeResult> regimes) {
  return over_time(regimes, "Batch size over time", "batch size (sequences)",
                   [](const SeriesPoint& p) { return p.batch_size; });
}

LineChart kv_usage_over_time(std::span<const RegimeResult> regimes) {
  return over_time(regimes, "KV cache used over time", "KV blocks used (%)",
                   [](const SeriesPoint& p) { return p.kv_used_fraction * 100; });
}

}  // namespace actorlm::sim
