#pragma once
// Prometheus text exposition format (version 0.0.4) for the few metric kinds the server
// exports. Debian has no Prometheus client library for C++; this is the format's small core:
// HELP/TYPE lines, counters, gauges, cumulative histograms with +Inf, _sum and _count.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::http {

// Not thread-safe: the owner serialises observe() and render().
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size(), 0) {}
  void observe(double v);
  void render(std::string& out, std::string_view name, std::string_view help) const;
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

void render_counter(std::string& out, std::string_view name, std::string_view help, double value);
void render_gauge(std::string& out, std::string_view name, std::string_view help, double value);
// A number as Prometheus expects it: integers without a fraction, +Inf, NaN.
std::string prom_number(double v);

}  // namespace actorlm::http
