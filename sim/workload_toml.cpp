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
//   max_tokens = 512 (optional, at the top level, traces too): every request asks for this many
//   and stops early at its drawn (traced) length; longer lengths are cut to it
#include "sim/trace.hpp"
#include "sim/workload.hpp"

#include "actors/config/table_reader.hpp"

#include <cmath>
#include <filesystem>
#include <limits>

namespace actorlm::sim {
namespace {

// config's TableReader checks every value, so workload errors read like `actorlm config check`'s.
using config::detail::ErrorList;
using config::detail::IntRange;
using config::detail::NumberRange;
using config::detail::TableReader;

constexpr double unbounded = std::numeric_limits<double>::infinity();
constexpr NumberRange positive{0, unbounded, /*lo_open=*/true};
constexpr NumberRange non_negative{0, unbounded};

// Optional-returning reads over TableReader's: nullopt when the key is absent or its value bad
// (the error is then recorded).
std::optional<std::uint32_t> count(TableReader& r, std::string_view key, std::int64_t lo) {
  constexpr std::int64_t none = -1;
  std::int64_t v = none;
  r.integer(key, v, IntRange{lo, std::numeric_limits<std::uint32_t>::max()});
  return v == none ? std::nullopt : std::optional<std::uint32_t>(static_cast<std::uint32_t>(v));
}

std::optional<double> number(TableReader& r, std::string_view key, NumberRange range) {
  double v = std::numeric_limits<double>::quiet_NaN();  // a valid read is finite
  r.number(key, v, range);
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

std::optional<std::string> text(TableReader& r, std::string_view key) {
  std::string v;
  const bool had = r.has(key);
  r.string(key, v);
  return had && r.valid(key) ? std::optional<std::string>(std::move(v)) : std::nullopt;
}

std::optional<LengthDistribution> parse_length(TableReader& parent, std::string_view key,
                                              ErrorList& errors) {
  const toml::node* n = parent.node(key);
  if (!n) {
    parent.require(key, "a token count, or a table with a distribution");
    return std::nullopt;
  }
  if (n->is_integer()) {
    const auto v = count(parent, key, 1);
    return v ? std::optional<LengthDistribution>(FixedLength{*v}) : std::nullopt;
  }
  if (!n->is_table()) {
    parent.error(key, "expected a token count or a table, found " + config::detail::describe(*n));
    return std::nullopt;
  }
  TableReader r(parent.path(key), n->as_table(), errors);
  const std::size_t errors_before = errors.size();
  constexpr std::string_view kinds[] = {"fixed", "uniform", "normal", "lognormal"};
  r.require("distribution", "one of fixed, uniform, normal or lognormal");
  const auto kind = r.choice_index("distribution", kinds);
  if (!kind) return std::nullopt;
  const std::string context = "for distribution = \"" + std::string(kinds[*kind]) + "\"";
  LengthDistribution out;
  // Clamp bounds of the continuous distributions, checked together with the uniform's.
  auto read_bounds = [&](bool required, std::uint32_t& min, std::uint32_t& max) {
    if (required) {
      r.require("min", context);
      r.require("max", context);
    }
    const auto lo = count(r, "min", 1), hi = count(r, "max", 1);
    min = lo.value_or(1);
    max = hi.value_or(default_max_length);
    if (lo && hi && *hi < *lo)
      r.error("max", "expected max >= min (" + std::to_string(*lo) + "), found " + std::to_string(*hi));
  };
  switch (*kind) {
    case 0:
      r.require("value", context);
      out = FixedLength{count(r, "value", 1).value_or(1)};
      break;
    case 1: {
      UniformLength u;
      read_bounds(true, u.min, u.max);
      out = u;
      break;
    }
    case 2: {
      NormalLength d;
      r.require("mean", context);
      r.require("sd", context);
      d.mean = number(r, "mean", positive).value_or(1);
      d.sd = number(r, "sd", non_negative).value_or(0);
      read_bounds(false, d.min, d.max);
      out = d;
      break;
    }
    default: {
      // Either (mu, sigma) of ln(tokens), or (mean, sd) of tokens; not a mix.
      const bool by_moments = r.has("mean") || r.has("sd");
      std::optional<double> a, b;
      if (by_moments) {
        r.require("mean", context + " given by mean and sd");
        r.require("sd", context + " given by mean and sd");
        a = number(r, "mean", positive);
        b = number(r, "sd", non_negative);
        for (std::string_view other : {"mu", "sigma"})
          if (r.node(other)) r.error(other, "give either mu and sigma, or mean and sd");
      } else {
        r.require("mu", context + " (or mean and sd)");
        r.require("sigma", context + " (or mean and sd)");
        a = number(r, "mu", NumberRange{-unbounded, unbounded});
        b = number(r, "sigma", non_negative);
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
  if (errors.size() != errors_before) return std::nullopt;
  return out;
}

std::optional<ArrivalProcess> parse_arrival(const toml::table& table, TableReader& r,
                                            ErrorList& errors) {
  constexpr std::string_view kinds[] = {"poisson", "gamma", "closed_loop", "trace"};
  r.require("process", "one of poisson, gamma, closed_loop or trace");
  const auto kind = r.choice_index("process", kinds);
  if (!kind) return std::nullopt;
  const std::string context = "for process = \"" + std::string(kinds[*kind]) + "\"";
  const std::size_t errors_before = errors.size();
  ArrivalProcess out;
  switch (*kind) {
    case 0:
      r.require("rate", context);
      out = PoissonArrivals{number(r, "rate", positive).value_or(1)};
      break;
    case 1: {
      GammaArrivals g;
      r.require("rate", context);
      r.require("burstiness", context);
      g.rate = number(r, "rate", positive).value_or(1);
      g.burstiness = number(r, "burstiness", positive).value_or(1);
      out = g;
      break;
    }
    case 2: {
      ClosedLoopArrivals c;
      r.require("clients", context);
      c.clients = count(r, "clients", 1).value_or(1);
      c.think_time_s = number(r, "think_time_s", non_negative).value_or(0);
      out = c;
      break;
    }
    default: {
      TraceReplay t;
      r.require("path", "the trace file");
      const auto path = text(r, "path");
      constexpr std::string_view formats[] = {"azure_csv", "mooncake_jsonl"};
      std::optional<TraceFormat> format;
      if (auto index = r.choice_index("format", formats)) format = static_cast<TraceFormat>(*index);
      t.speedup = number(r, "speedup", positive).value_or(1);
      if (!path || errors.size() != errors_before) break;
      // Relative to the TOML file, so that a scenario and its trace can move together.
      std::filesystem::path file(*path);
      if (const auto& source = table.source().path; file.is_relative() && source)
        file = std::filesystem::path(*source).parent_path() / file;
      t.path = file.lexically_normal().string();
      if (!format) format = trace_format_from_path(t.path);
      if (!format) {
        r.error("path", "cannot tell the trace format from the extension (.csv or .jsonl); set format");
        break;
      }
      TraceLoad load = load_trace(t.path, format);
      if (!load.ok()) {
        errors.add(*load.error);  // located in the trace file
        break;
      }
      t.rows = std::move(load.requests);
      out = std::move(t);
      break;
    }
  }
  r.report_unknown_keys(context);
  if (errors.size() != errors_before) return std::nullopt;
  return out;
}

}  // namespace

WorkloadParse parse_workload(const toml::table& table, std::string_view key) {
  WorkloadParse result;
  const auto& source = table.source().path;
  ErrorList errors(source ? std::string_view(*source) : std::string_view("<toml>"));
  TableReader w(std::string(key), &table, errors);
  std::optional<ArrivalProcess> arrival;
  const toml::table* arrival_table = nullptr;
  if (w.require("arrival", "a table with a process")) arrival_table = w.table("arrival");
  if (arrival_table) {
    TableReader r(w.path("arrival"), arrival_table, errors);
    arrival = parse_arrival(*arrival_table, r, errors);
  }
  const bool trace = arrival && std::holds_alternative<TraceReplay>(*arrival);
  const bool maybe_trace =
      trace || (!arrival && arrival_table && arrival_table->get("process") &&
                arrival_table->get("process")->value_or(std::string_view{}) == "trace");
  if (maybe_trace) {
    result.spec.requests = count(w, "requests", 1).value_or(0);
    for (std::string_view unused : {"input", "output"})
      if (w.node(unused)) w.error(unused, "not used with process = \"trace\" (the trace gives lengths)");
  } else {
    w.require("requests", "a count");
    result.spec.requests = count(w, "requests", 1).value_or(1);
    if (auto input = parse_length(w, "input", errors)) result.spec.input = *input;
    if (auto output = parse_length(w, "output", errors)) result.spec.output = *output;
  }
  result.spec.max_tokens = count(w, "max_tokens", 1).value_or(0);
  w.report_unknown_keys("in a workload");
  if (arrival) result.spec.arrival = std::move(*arrival);
  result.errors = errors.take_sorted();
  return result;
}

}  // namespace actorlm::sim
