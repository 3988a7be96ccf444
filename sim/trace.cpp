// Trace parsing: the Azure CSV and the Mooncake JSONL formats (see trace.hpp).
#include "sim/trace.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace actorlm::sim {
namespace {

struct Row {
  std::int64_t time_ns;  // ns on the trace's own clock
  std::int64_t input;    // tokens
  std::int64_t output;   // tokens
};

// A failed read: where, which field, what.
struct Failure {
  std::uint32_t line;
  std::uint32_t column;
  std::string field;
  std::string message;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string quoted(std::string_view s) { return '"' + std::string(s) + '"'; }

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool parse_uint(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size() && out >= 0;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" (or with a 'T') to ns since the epoch.
std::optional<std::int64_t> parse_date_time(std::string_view s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':')
    return std::nullopt;
  std::int64_t y, mo, d, h, mi, sec;
  if (!parse_uint(s.substr(0, 4), y) || !parse_uint(s.substr(5, 2), mo) ||
      !parse_uint(s.substr(8, 2), d) || !parse_uint(s.substr(11, 2), h) ||
      !parse_uint(s.substr(14, 2), mi) || !parse_uint(s.substr(17, 2), sec))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  std::int64_t frac_ns = 0;
  std::string_view rest = s.substr(19);
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
    std::int64_t digits;
    if (!parse_uint(rest.substr(1), digits)) return std::nullopt;
    frac_ns = digits;
    for (std::size_t i = rest.size() - 1; i < 9; ++i) frac_ns *= 10;  // pad to 9 digits
  }
  const std::int64_t seconds =
      days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
      h * 3600 + mi * 60 + sec;
  return seconds * 1'000'000'000 + frac_ns;
}

// A date-time, or a plain number of seconds.
std::optional<std::int64_t> parse_timestamp(std::string_view s) {
  if (auto t = parse_date_time(s)) return t;
  double seconds = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), seconds);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(seconds) ||
      std::abs(seconds) > 9e9)  // beyond int64 ns
    return std::nullopt;
  return std::llround(seconds * 1e9);
}

std::optional<Failure> check_length(std::int64_t value, std::uint32_t line, std::uint32_t column,
                                    std::string_view field) {
  if (value < 0)
    return Failure{line, column, std::string(field),
                   "expected a token count >= 0, found " + std::to_string(value)};
  if (value > std::numeric_limits<std::uint32_t>::max())
    return Failure{line, column, std::string(field),
                   "token count " + std::to_string(value) + " is too large"};
  return std::nullopt;
}

// Fields of one CSV line with their 1-based columns; surrounding spaces and quotes removed.
std::vector<std::pair<std::string_view, std::uint32_t>> split_csv(std::string_view line) {
  std::vector<std::pair<std::string_view, std::uint32_t>> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    std::string_view field = trim(line.substr(start, comma - start));
    if (field.size() >= 2 && field.front() == '"' && field.back() == '"')
      field = field.substr(1, field.size() - 2);
    fields.emplace_back(field, static_cast<std::uint32_t>(start + 1));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

// Calls `on_line(text, number)` for every line that is not blank.
template <class F>
std::optional<Failure> for_each_line(std::string_view text, F&& on_line) {
  std::uint32_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    if (auto failure = on_line(line, number)) return failure;
  }
  return std::nullopt;
}

std::optional<Failure> parse_azure(std::string_view text, std::vector<Row>& rows) {
  constexpr std::string_view names[3] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  std::size_t index[3] = {0, 0, 0};
  bool header_seen = false;
  auto failure = for_each_line(text, [&](std::string_view line, std::uint32_t number)
                                         -> std::optional<Failure> {
    const auto fields = split_csv(line);
    if (!header_seen) {
      header_seen = true;
      for (int c = 0; c < 3; ++c) {
        auto it = std::find_if(fields.begin(), fields.end(),
                               [&](const auto& f) { return iequals(f.first, names[c]); });
        if (it == fields.end())
          return Failure{number, 1, std::string(names[c]),
                         "missing column (the header needs TIMESTAMP,ContextTokens,"
                         "GeneratedTokens; found " + quoted(trim(line)) + ")"};
        index[c] = static_cast<std::size_t>(it - fields.begin());
      }
      return std::nullopt;
    }
    const std::size_t needed = *std::max_element(index, index + 3) + 1;
    if (fields.size() < needed)
      return Failure{number, 1, "", "expected at least " + std::to_string(needed) +
                                        " fields, found " + std::to_string(fields.size())};
    Row row{};
    const auto& [ts, ts_col] = fields[index[0]];
    auto time = parse_timestamp(ts);
    if (!time)
      return Failure{number, ts_col, std::string(names[0]),
                     "expected a date-time (2023-11-16 18:15:46.6805900) or seconds, found " +
                         quoted(ts)};
    row.time_ns = *time;
    std::int64_t* out[2] = {&row.input, &row.output};
    for (int c = 1; c < 3; ++c) {
      const auto& [value, col] = fields[index[c]];
      std::int64_t parsed = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (value.empty() || ec != std::errc{} || end != value.data() + value.size())
        return Failure{number, col, std::string(names[c]),
                       "expected an integer, found " + quoted(value)};
      if (auto bad = check_length(parsed, number, col, names[c])) return bad;
      *out[c - 1] = parsed;
    }
    rows.push_back(row);
    return std::nullopt;
  });
  if (failure) return failure;
  if (!header_seen) return Failure{0, 0, "", "empty trace: expected a header line"};
  return std::nullopt;
}

std::optional<Failure> parse_mooncake(std::string_view text, std::vector<Row>& rows) {
  return for_each_line(text, [&](std::string_view line, std::uint32_t number)
                                 -> std::optional<Failure> {
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      return Failure{number, static_cast<std::uint32_t>(std::max<std::size_t>(e.byte, 1)), "",
                     "invalid JSON"};
    }
    if (!object.is_object()) return Failure{number, 1, "", "expected a JSON object"};
    // The column of a field is where its key is written (1 when it is missing).
    auto column_of = [&](std::string_view field) {
      const std::size_t at = line.find('"' + std::string(field) + '"');
      return static_cast<std::uint32_t>(at == std::string_view::npos ? 1 : at + 1);
    };
    Row row{};
    for (std::string_view field : {"timestamp", "input_length", "output_length"}) {
      const auto it = object.find(field);
      const std::uint32_t col = column_of(field);
      if (it == object.end()) return Failure{number, col, std::string(field), "missing field"};
      if (field == "timestamp") {
        if (!it->is_number())
          return Failure{number, col, "timestamp", "expected a number of ms, found " + it->dump()};
        const double ms = it->get<double>();
        if (!std::isfinite(ms) || std::abs(ms) > 9e12)
          return Failure{number, col, "timestamp", "out of range: " + it->dump()};
        row.time_ns = it->is_number_integer() ? it->get<std::int64_t>() * 1'000'000
                                              : std::llround(ms * 1e6);
        continue;
      }
      if (!it->is_number_integer())
        return Failure{number, col, std::string(field), "expected an integer, found " + it->dump()};
      const std::int64_t value = it->is_number_unsigned()
          ? static_cast<std::int64_t>(std::min<std::uint64_t>(it->get<std::uint64_t>(),
                                                               std::uint64_t{1} << 62))
          : it->get<std::int64_t>();
      if (auto bad = check_length(value, number, col, field)) return bad;
      (field == "input_length" ? row.input : row.output) = value;
    }
    rows.push_back(row);
    return std::nullopt;
  });
}

}  // namespace

std::string_view to_string(TraceFormat format) {
  return format == TraceFormat::azure_csv ? "azure_csv" : "mooncake_jsonl";
}

std::optional<TraceFormat> trace_format_from_name(std::string_view name) {
  if (name == "azure_csv") return TraceFormat::azure_csv;
  if (name == "mooncake_jsonl") return TraceFormat::mooncake_jsonl;
  return std::nullopt;
}

std::optional<TraceFormat> trace_format_from_path(std::string_view path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && iequals(path.substr(path.size() - suffix.size()), suffix);
  };
  if (ends_with(".csv")) return TraceFormat::azure_csv;
  if (ends_with(".jsonl") || ends_with(".json")) return TraceFormat::mooncake_jsonl;
  return std::nullopt;
}

TraceLoad parse_trace(std::string_view text, TraceFormat format, std::string_view file,
                      const TraceOptions& options) {
  TraceLoad load;
  auto fail = [&](const Failure& f) {
    load.error = config::ConfigError{std::string(file), f.line, f.column, f.field, f.message};
    return load;
  };
  if (!(options.speedup > 0) || !std::isfinite(options.speedup))
    return fail({0, 0, "speedup", "expected a number > 0"});
  std::vector<Row> rows;
  const auto failure = format == TraceFormat::azure_csv ? parse_azure(text, rows)
                                                        : parse_mooncake(text, rows);
  if (failure) return fail(*failure);
  if (rows.empty()) return fail({0, 0, "", "the trace has no requests"});

  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.time_ns < b.time_ns; });
  if (options.limit != 0 && rows.size() > options.limit) rows.resize(options.limit);
  const std::int64_t origin = rows.front().time_ns;
  load.requests.reserve(rows.size());
  for (const Row& row : rows) {
    const std::int64_t since = row.time_ns - origin;  // ns
    WorkloadRequest request;
    request.arrival_ns = options.speedup == 1
        ? since : std::llround(static_cast<double>(since) / options.speedup);
    load.raised_to_one += (row.input == 0) + (row.output == 0);
    request.input_tokens = static_cast<std::uint32_t>(std::max<std::int64_t>(row.input, 1));
    request.output_tokens = static_cast<std::uint32_t>(std::max<std::int64_t>(row.output, 1));
    load.requests.push_back(request);
  }
  return load;
}

TraceLoad load_trace(const std::string& path, std::optional<TraceFormat> format,
                     const TraceOptions& options) {
  TraceLoad load;
  if (!format) format = trace_format_from_path(path);
  if (!format) {
    load.error = config::ConfigError{path, 0, 0, "",
                                     "unknown trace format: expected a .csv (Azure) or .jsonl "
                                     "(Mooncake) file, or a format"};
    return load;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    load.error = config::ConfigError{path, 0, 0, "", "cannot open the trace file"};
    return load;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_trace(text.str(), *format, path, options);
}

}  // namespace actorlm::sim
