// parse_workload: a [workload] TOML table into a WorkloadSpec, every problem reported with its
// position and dotted key. The schema (tokens, req/s, s):
//   requests = 1000                       # >= 1; with a trace optional: at most this many rows
//   input = 32                            # an integer: a fixed length; or a table:
//   [workload.output]
//   distribution = "normal"               # fixed (value) | uniform (min, max) |
//   mean = 128                            #   normal (mean, sd, min = 1, max = 1048576) |
//   sd = 32                               #   lognormal (mu, sigma or mean, sd; min, max)
//   [workload.arrival]
//   process = "gamma"                     # poisson (rate) | gamma (rate, burstiness) |
//   rate = 2.0                            #   closed_loop (clients, think_time_s = 0) |
//   burstiness = 4.0                      #   trace (path, format = from extension, speedup = 1)
#include "sim/trace.hpp"
#include "sim/workload.hpp"

#include <charconv>
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <limits>

namespace actorlm::sim {
namespace {

std::string shortest(double x) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, end);
}

// What a value is, for "found ...".
std::string found(const toml::node& node) {
  if (auto s = node.value_exact<std::string>()) return "\"" + *s + "\"";
  if (auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  if (auto d = node.value_exact<double>()) return shortest(*d);
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (node.is_array()) return "an array";
  if (node.is_table()) return "a table";
  return "a date or time";
}

// Reads one table's keys, remembers which it asked for, and records errors with positions.
class Reader {
 public:
  Reader(const toml::table& table, std::string prefix, std::vector<config::ConfigError>& errors)
      : table_(table), prefix_(std::move(prefix)), errors_(errors) {}

  std::string path(std::string_view key) const { return prefix_ + "." + std::string(key); }
  const toml::node* node(std::string_view key) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
    return table_.get(key);
  }
  void error_at(const toml::node* at, std::string key, std::string message) {
    error_at((at ? *at : static_cast<const toml::node&>(table_)).source(), std::move(key),
             std::move(message));
  }
  void error_at(const toml::source_region& where, std::string key, std::string message) {
    errors_.push_back({where.path ? *where.path : std::string("<toml>"), where.begin.line,
                       where.begin.column, std::move(key), std::move(message)});
  }
  void missing(std::string_view key, std::string_view why) {
    error_at(nullptr, path(key), "missing (" + std::string(why) + ")");
  }

  // A number (integers accepted) with x > lo (or >= lo when `closed`); nullopt if absent or bad.
  std::optional<double> number(std::string_view key, double lo, bool closed) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    std::optional<double> x = n->value<double>();
    if (n->is_boolean() || n->is_string()) x.reset();  // value<double> would not, but be sure
    if (!x || !std::isfinite(*x) || (closed ? *x < lo : *x <= lo)) {
      error_at(n, path(key), "expected a number " + std::string(closed ? ">= " : "> ") +
                                 shortest(lo) + ", found " + found(*n));
      return std::nullopt;
    }
    return x;
  }
  std::optional<std::uint32_t> count(std::string_view key, std::int64_t lo) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    const auto i = n->value_exact<std::int64_t>();
    constexpr std::int64_t hi = std::numeric_limits<std::uint32_t>::max();
    if (!i || *i < lo || *i > hi) {
      error_at(n, path(key), "expected an integer in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "], found " + found(*n));
      return std::nullopt;
    }
    return static_cast<std::uint32_t>(*i);
  }
  std::optional<std::string> string(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (auto s = n->value_exact<std::string>()) return s;
    error_at(n, path(key), "expected a string, found " + found(*n));
    return std::nullopt;
  }
  // `key` must be one of `names`; returns its index.
  std::optional<std::size_t> choice(std::string_view key, std::initializer_list<std::string_view> names) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    std::string list;
    for (auto name : names) list += (list.empty() ? "\"" : ", \"") + std::string(name) + "\"";
    if (auto s = n->value_exact<std::string>()) {
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names.begin()[i] == *s) return i;
    }
    error_at(n, path(key), "expected one of " + list + ", found " + found(*n));
    return std::nullopt;
  }
  void report_unknown_keys(std::string_view context) {
    for (const auto& [key, value] : table_) {
      if (std::find(known_.begin(), known_.end(), key.str()) != known_.end()) continue;
      std::string known;
      for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
      error_at(key.source(), path(key.str()), "unknown key (" + std::string(context) +
                                            " the keys are: " + known + ")");
    }
  }
  bool has(std::string_view key) const { return table_.contains(key); }
  const toml::table& table() const { return table_; }
  std::vector<config::ConfigError>& errors() { return errors_; }
  // A required value: reports it missing when the key is absent (a bad value is already reported).
  template <class T>
  std::optional<T> required(std::optional<T> value, std::string_view key, std::string_view why) {
    if (!value && !has(key)) missing(key, why);
    return value;
  }

 private:
  const toml::table& table_;
  std::string prefix_;
  std::vector<config::ConfigError>& errors_;
  std::vector<std::string> known_;
};

std::optional<LengthDistribution> parse_length(Reader& parent, std::string_view key) {
  const toml::node* n = parent.node(key);
  if (!n) {
    parent.missing(key, "a token count, or a table with a distribution");
    return std::nullopt;
  }
  if (n->is_integer()) {
    const auto v = parent.count(key, 1);
    return v ? std::optional<LengthDistribution>(FixedLength{*v}) : std::nullopt;
  }
  if (!n->is_table()) {
    parent.error_at(n, parent.path(key), "expected a token count or a table, found " + found(*n));
    return std::nullopt;
  }
  Reader r(*n->as_table(), parent.path(key), parent.errors());
  const std::size_t errors_before = r.errors().size();
  constexpr std::string_view kinds[] = {"fixed", "uniform", "normal", "lognormal"};
  const auto kind = r.required(r.choice("distribution", {kinds[0], kinds[1], kinds[2], kinds[3]}),
                               "distribution", "fixed, uniform, normal or lognormal");
  if (!kind) return std::nullopt;
  const std::string context = "for distribution = \"" + std::string(kinds[*kind]) + "\"";
  LengthDistribution out;
  // Clamp bounds of the continuous distributions, checked together with the uniform's.
  auto read_bounds = [&](bool required, std::uint32_t& min, std::uint32_t& max) {
    auto lo = r.count("min", 1), hi = r.count("max", 1);
    if (required) {
      r.required(lo, "min", context);
      r.required(hi, "max", context);
    }
    min = lo.value_or(1);
    max = hi.value_or(default_max_length);
    if (lo && hi && *hi < *lo)
      r.error_at(r.node("max"), r.path("max"),
                 "expected max >= min (" + std::to_string(*lo) + "), found " + std::to_string(*hi));
  };
  switch (*kind) {
    case 0:
      out = FixedLength{r.required(r.count("value", 1), "value", context).value_or(1)};
      break;
    case 1: {
      UniformLength u;
      read_bounds(true, u.min, u.max);
      out = u;
      break;
    }
    case 2: {
      NormalLength d;
      d.mean = r.required(r.number("mean", 0, false), "mean", context).value_or(1);
      d.sd = r.required(r.number("sd", 0, true), "sd", context).value_or(0);
      read_bounds(false, d.min, d.max);
      out = d;
      break;
    }
    default: {
      // Either (mu, sigma) of ln(tokens), or (mean, sd) of tokens; not a mix.
      const bool by_moments = r.has("mean") || r.has("sd");
      std::optional<double> a, b;
      if (by_moments) {
        a = r.required(r.number("mean", 0, false), "mean", context + " given by mean and sd");
        b = r.required(r.number("sd", 0, true), "sd", context + " given by mean and sd");
        for (std::string_view other : {"mu", "sigma"})
          if (r.has(other))
            r.error_at(r.node(other), r.path(other), "give either mu and sigma, or mean and sd");
      } else {
        a = r.required(r.number("mu", -std::numeric_limits<double>::infinity(), false), "mu",
                       context + " (or mean and sd)");
        b = r.required(r.number("sigma", 0, true), "sigma", context + " (or mean and sd)");
      }
      LogNormalLength d;
      read_bounds(false, d.min, d.max);
      if (a && b) {
        if (by_moments) d = lognormal_from_mean_sd(*a, *b, d.min, d.max);
        else d.mu = *a, d.sigma = *b;
      }
      out = d;
      break;
    }
  }
  r.report_unknown_keys(context);
  if (r.errors().size() != errors_before) return std::nullopt;
  return out;
}

std::optional<ArrivalProcess> parse_arrival(Reader& r) {
  constexpr std::string_view kinds[] = {"poisson", "gamma", "closed_loop", "trace"};
  const auto kind = r.required(r.choice("process", {kinds[0], kinds[1], kinds[2], kinds[3]}),
                               "process", "poisson, gamma, closed_loop or trace");
  if (!kind) return std::nullopt;
  const std::string context = "for process = \"" + std::string(kinds[*kind]) + "\"";
  const std::size_t errors_before = r.errors().size();
  ArrivalProcess out;
  switch (*kind) {
    case 0:
      out = PoissonArrivals{r.required(r.number("rate", 0, false), "rate", context).value_or(1)};
      break;
    case 1: {
      GammaArrivals g;
      g.rate = r.required(r.number("rate", 0, false), "rate", context).value_or(1);
      g.burstiness = r.required(r.number("burstiness", 0, false), "burstiness", context).value_or(1);
      out = g;
      break;
    }
    case 2: {
      ClosedLoopArrivals c;
      c.clients = r.required(r.count("clients", 1), "clients", context).value_or(1);
      c.think_time_s = r.number("think_time_s", 0, true).value_or(0);
      out = c;
      break;
    }
    default: {
      TraceReplay t;
      const auto path = r.required(r.string("path"), "path", "the trace file");
      std::optional<TraceFormat> format;
      if (auto name = r.choice("format", {"azure_csv", "mooncake_jsonl"}))
        format = static_cast<TraceFormat>(*name);
      t.speedup = r.number("speedup", 0, false).value_or(1);
      if (!path || r.errors().size() != errors_before) break;
      // Relative to the TOML file, so that a scenario and its trace can move together.
      std::filesystem::path file(*path);
      if (const auto& source = r.table().source().path; file.is_relative() && source)
        file = std::filesystem::path(*source).parent_path() / file;
      t.path = file.lexically_normal().string();
      if (!format) format = trace_format_from_path(t.path);
      if (!format) {
        r.error_at(r.node("path"), r.path("path"),
                   "cannot tell the trace format from the extension (.csv or .jsonl); set format");
        break;
      }
      TraceLoad load = load_trace(t.path, format);
      if (!load.ok()) {
        r.errors().push_back(*load.error);
        break;
      }
      t.rows = std::move(load.requests);
      out = std::move(t);
      break;
    }
  }
  r.report_unknown_keys(context);
  if (r.errors().size() != errors_before) return std::nullopt;
  return out;
}

}  // namespace

WorkloadParse parse_workload(const toml::table& table, std::string_view key) {
  WorkloadParse result;
  Reader w(table, std::string(key), result.errors);
  std::optional<ArrivalProcess> arrival;
  const toml::node* arrival_node = w.node("arrival");
  if (!arrival_node) {
    w.missing("arrival", "a table with a process");
  } else if (!arrival_node->is_table()) {
    w.error_at(arrival_node, w.path("arrival"), "expected a table, found " + found(*arrival_node));
  } else {
    Reader r(*arrival_node->as_table(), w.path("arrival"), result.errors);
    arrival = parse_arrival(r);
  }
  const bool trace = arrival && std::holds_alternative<TraceReplay>(*arrival);
  const bool maybe_trace = trace || (!arrival && arrival_node && arrival_node->is_table() &&
                                     arrival_node->as_table()->get("process") &&
                                     arrival_node->as_table()->get("process")->value_or(
                                         std::string_view{}) == "trace");
  if (maybe_trace) {
    result.spec.requests = w.count("requests", 1).value_or(0);
    for (std::string_view unused : {"input", "output"})
      if (const toml::node* n = w.node(unused))
        w.error_at(n, w.path(unused), "not used with process = \"trace\" (the trace gives lengths)");
  } else {
    result.spec.requests = w.required(w.count("requests", 1), "requests", "a count").value_or(1);
    if (auto input = parse_length(w, "input")) result.spec.input = *input;
    if (auto output = parse_length(w, "output")) result.spec.output = *output;
  }
  w.report_unknown_keys("in a workload");
  if (arrival) result.spec.arrival = std::move(*arrival);
  return result;
}

}  // namespace actorlm::sim
