#include "actors/http/prometheus.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace actorlm::http {

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (std::floor(v) == v && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void Histogram::observe(double v) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);  // le: v <= bound
  if (it != bounds_.end()) ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += v;
}

namespace {
void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ")
      .append(type).append("\n");
}
}  // namespace

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  header(out, name, help, "histogram");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out.append(name).append("_bucket{le=\"").append(prom_number(bounds_[i])).append("\"} ")
        .append(std::to_string(cumulative)).append("\n");
  }
  out.append(name).append("_bucket{le=\"+Inf\"} ").append(std::to_string(count_)).append("\n");
  out.append(name).append("_sum ").append(prom_number(sum_)).append("\n");
  out.append(name).append("_count ").append(std::to_string(count_)).append("\n");
}

void render_counter(std::string& out, std::string_view name, std::string_view help, double value) {
  header(out, name, help, "counter");
  out.append(name).append(" ").append(prom_number(value)).append("\n");
}

void render_gauge(std::string& out, std::string_view name, std::string_view help, double value) {
  header(out, name, help, "gauge");
  out.append(name).append(" ").append(prom_number(value)).append("\n");
}

}  // namespace actorlm::http
