// Text, CSV and JSON reports (see report.hpp).
#include "sim/report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace actorlm::sim {
namespace {

// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string pair(double a, double b, int decimals) {
  return format_fixed(a, decimals) + "/" + format_fixed(b, decimals);
}

// Every scalar column of the summary CSV, name and value, in one place so header and rows agree.
std::vector<std::pair<std::string, std::string>> summary_columns(const Summary& s) {
  std::vector<std::pair<std::string, std::string>> c;
  auto add = [&](std::string name, std::string value) { c.emplace_back(std::move(name), std::move(value)); };
  auto count = [](std::uint64_t n) { return std::to_string(n); };
  add("requests", count(s.requests));
  add("completed", count(s.completed));
  add("failed", count(s.failed));
  add("duration_s", format_fixed(s.duration_s, 6));
  add("input_tokens", count(s.input_tokens));
  add("output_tokens", count(s.output_tokens));
  add("output_tokens_per_s", format_fixed(s.output_tokens_per_s, 3));
  add("requests_per_s", format_fixed(s.requests_per_s, 3));
  const std::array<std::pair<const char*, const Stats*>, 5> stats = {
      {{"ttft_s", &s.ttft_s}, {"tpot_s", &s.tpot_s}, {"itl_s", &s.itl_s}, {"e2e_s", &s.e2e_s},
       {"queue_s", &s.queue_s}}};
  for (const auto& [prefix, st] : stats) {
    const std::string p = prefix;
    add(p + "_count", count(st->count));
    add(p + "_mean", format_fixed(st->mean, 6));
    add(p + "_p50", format_fixed(st->p50, 6));
    add(p + "_p90", format_fixed(st->p90, 6));
    add(p + "_p99", format_fixed(st->p99, 6));
    add(p + "_max", format_fixed(st->max, 6));
  }
  auto threshold = [](const std::optional<double>& t) { return t ? format_fixed(*t, 6) : ""; };
  add("slo_ttft_s", threshold(s.slo.ttft_s));
  add("slo_tpot_s", threshold(s.slo.tpot_s));
  add("slo_e2e_s", threshold(s.slo.e2e_s));
  add("slo_met", count(s.slo_met));
  add("goodput_requests_per_s", format_fixed(s.goodput_requests_per_s, 3));
  add("slo_attainment", format_fixed(s.slo_attainment, 4));
  add("mean_concurrency", format_fixed(s.mean_concurrency, 3));
  add("steps", count(s.steps));
  add("kv_used_mean", format_fixed(s.kv_used_mean, 4));
  add("kv_used_max", format_fixed(s.kv_used_max, 4));
  add("batch_size_mean", format_fixed(s.batch_size_mean, 3));
  add("batch_size_max", count(s.batch_size_max));
  add("preemptions", count(s.preemptions));
  return c;
}

nlohmann::json stats_json(const Stats& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50},
          {"p90", s.p90},     {"p99", s.p99},   {"max", s.max}};
}

nlohmann::json optional_json(const std::optional<double>& x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

}  // namespace

std::string format_fixed(double value, int decimals) {
  char buffer[400];  // %.Nf of the largest double has 309 integer digits
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed,
                                 decimals);
  std::string out(buffer, ec == std::errc{} ? end : buffer);
  if (out.size() > 1 && out[0] == '-' &&
      out.find_first_not_of("0.", 1) == std::string::npos)
    out.erase(0, 1);  // -0.000: a rounding artefact, not a sign a reader should see
  return out;
}

std::string summary_table(std::span<const RegimeResult> regimes) {
  const std::vector<std::string> header = {
      "regime", "throughput tok/s", "req/s", "p50/p90 latency s", "TTFT p50/p90 s",
      "TPOT p50/p90 ms", "max batch", "KV used max"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, s] : regimes) {
    rows.push_back({name, format_fixed(s.output_tokens_per_s, 1), format_fixed(s.requests_per_s, 3),
                    pair(s.e2e_s.p50, s.e2e_s.p90, 3), pair(s.ttft_s.p50, s.ttft_s.p90, 3),
                    pair(s.tpot_s.p50 * 1e3, s.tpot_s.p90 * 1e3, 1),
                    std::to_string(s.batch_size_max), format_fixed(s.kv_used_max * 100, 1) + "%"});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c > 0) out += " | ";
      out += c == 0 ? cells[c] + pad : pad + cells[c];
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + '\n';
  };
  std::string out = line(header);
  for (std::size_t c = 0; c < width.size(); ++c) {
    if (c > 0) out += "-|-";
    out += std::string(width[c], '-');
  }
  out += '\n';
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string summary_csv(std::span<const RegimeResult> regimes) {
  std::string out = "regime";
  for (const auto& [name, value] : summary_columns(Summary{})) out += ',' + name;
  out += '\n';
  for (const auto& [name, s] : regimes) {
    out += csv_field(name);
    for (const auto& [column, value] : summary_columns(s)) out += ',' + value;
    out += '\n';
  }
  return out;
}

std::string requests_csv(std::string_view regime, std::span<const RequestTiming> requests,
                         const Slo& slo, bool header) {
  std::string out;
  if (header)
    out = "regime,id,arrival_s,input_tokens,output_tokens,completed,ttft_s,tpot_s,e2e_s,queue_s,"
          "meets_slo\n";
  const std::string name = csv_field(regime);
  auto latency = [](double s) { return s < 0 ? std::string() : format_fixed(s, 6); };
  for (const RequestTiming& r : requests) {
    const RequestMetrics m = request_metrics(r, slo);
    out += name + ',' + std::to_string(r.id) + ',' +
           format_fixed(static_cast<double>(r.arrival_ns) / 1e9, 6) + ',' +
           std::to_string(r.input_tokens) + ',' + std::to_string(r.output_tokens) + ',' +
           (r.completed ? "1," : "0,") + latency(m.ttft_s) + ',' + latency(m.tpot_s) + ',' +
           latency(m.e2e_s) + ',' + latency(m.queue_s) + ',' + (m.meets_slo ? "1" : "0") + '\n';
  }
  return out;
}

std::string series_csv(std::span<const RegimeResult> regimes) {
  std::string out = "regime,t_s,batch_size,kv_used_fraction\n";
  for (const auto& [name, s] : regimes) {
    const std::string regime = csv_field(name);
    for (const SeriesPoint& p : s.series)
      out += regime + ',' + format_fixed(p.t_s, 6) + ',' + format_fixed(p.batch_size, 3) + ',' +
             format_fixed(p.kv_used_fraction, 4) + '\n';
  }
  return out;
}

nlohmann::json summary_to_json(const Summary& s) {
  nlohmann::json series = nlohmann::json::array();
  for (const SeriesPoint& p : s.series) series.push_back({p.t_s, p.batch_size, p.kv_used_fraction});
  return {
      {"requests", s.requests},
      {"completed", s.completed},
      {"failed", s.failed},
      {"duration_s", s.duration_s},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"output_tokens_per_s", s.output_tokens_per_s},
      {"requests_per_s", s.requests_per_s},
      {"ttft_s", stats_json(s.ttft_s)},
      {"tpot_s", stats_json(s.tpot_s)},
      {"itl_s", stats_json(s.itl_s)},
      {"e2e_s", stats_json(s.e2e_s)},
      {"queue_s", stats_json(s.queue_s)},
      {"slo", {{"ttft_s", optional_json(s.slo.ttft_s)},
               {"tpot_s", optional_json(s.slo.tpot_s)},
               {"e2e_s", optional_json(s.slo.e2e_s)}}},
      {"slo_met", s.slo_met},
      {"goodput_requests_per_s", s.goodput_requests_per_s},
      {"slo_attainment", s.slo_attainment},
      {"mean_concurrency", s.mean_concurrency},
      {"steps", s.steps},
      {"kv_used_mean", s.kv_used_mean},
      {"kv_used_max", s.kv_used_max},
      {"batch_size_mean", s.batch_size_mean},
      {"batch_size_max", s.batch_size_max},
      {"preemptions", s.preemptions},
      {"series", std::move(series)},
  };
}

nlohmann::json report_to_json(std::span<const RegimeResult> regimes) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, s] : regimes) list.push_back({{"name", name}, {"summary", summary_to_json(s)}});
  return {{"regimes", std::move(list)}};
}

std::string report_json(std::span<const RegimeResult> regimes) {
  return report_to_json(regimes).dump(2) + '\n';
}

}  // namespace actorlm::sim
