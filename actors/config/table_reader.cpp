// TableReader and its helpers: type and range checks with messages of the form
// "expected X, found Y", and unknown-key detection with a did-you-mean suggestion.
#include "actors/config/table_reader.hpp"

#include "actors/config/format.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace actorlm::config::detail {

Position position_of(const toml::node& node) {
  return {node.source().begin.line, node.source().begin.column};
}

Position position_of(const toml::key& key) {
  return {key.source().begin.line, key.source().begin.column};
}

void ErrorList::add(Position where, std::string key, std::string message) {
  errors_.push_back({file_, where.line, where.column, std::move(key), std::move(message)});
}

void ErrorList::add(ConfigError error) { errors_.push_back(std::move(error)); }

std::vector<ConfigError> ErrorList::take_sorted() {
  std::stable_sort(errors_.begin(), errors_.end(), [&](const ConfigError& a, const ConfigError& b) {
    const bool a_other = a.file != file_, b_other = b.file != file_;
    if (a_other || b_other) return !a_other && b_other;  // another file's: after, as added
    return Position{a.line, a.column} < Position{b.line, b.column};
  });
  return std::move(errors_);
}

std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string (" + quoted(*node.value<std::string>()) + ")";
    case toml::node_type::integer: return "an integer (" + std::to_string(*node.value<std::int64_t>()) + ")";
    case toml::node_type::floating_point: return "a float (" + toml_float(*node.value<double>()) + ")";
    case toml::node_type::boolean: return *node.value<bool>() ? "a boolean (true)" : "a boolean (false)";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);  // row[j]: distance between a[0, i) and b[0, j)
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closest_match(std::string_view word,
                                              std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

namespace {

std::string interval(std::int64_t lo, std::int64_t hi) {
  if (hi == std::numeric_limits<std::int64_t>::max()) return ">= " + std::to_string(lo);
  return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string interval(const NumberRange& r) {
  if (std::isinf(r.lo) && std::isinf(r.hi)) return "that is finite";
  if (std::isinf(r.hi)) return (r.lo_open ? "> " : ">= ") + shortest(r.lo);
  return "in " + std::string(r.lo_open ? "(" : "[") + shortest(r.lo) + ", " + shortest(r.hi) +
         (r.hi_open ? ")" : "]");
}

bool contains(const NumberRange& r, double x) {
  const bool above_lo = r.lo_open ? x > r.lo : x >= r.lo;
  const bool below_hi = r.hi_open ? x < r.hi : x <= r.hi;
  return std::isfinite(x) && above_lo && below_hi;  // NaN fails both comparisons anyway
}

// A number as the user wrote it: "0" for an integer, "0.5" for a float.
std::string spelled(const toml::node& node) {
  if (auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  return toml_float(*node.value<double>());
}

// What is wrong with `node` as an integer in `range`; nullopt when nothing is.
std::optional<std::string> integer_problem(const toml::node& node, IntRange range) {
  const auto value = node.value_exact<std::int64_t>();
  if (!value) return "expected an integer, found " + describe(node);
  const bool in_range = *value >= range.lo && *value <= range.hi;
  if (range.power_of_two && (!in_range || !std::has_single_bit(static_cast<std::uint64_t>(*value))))
    return "expected a power of two " + interval(range.lo, range.hi) + ", found " +
           std::to_string(*value);
  if (!in_range)
    return "expected an integer " + interval(range.lo, range.hi) + ", found " + std::to_string(*value);
  return std::nullopt;
}

std::optional<std::string> number_problem(const toml::node& node, const NumberRange& range) {
  if (!node.is_number()) return "expected a number, found " + describe(node);
  if (!contains(range, *node.value<double>()))
    return "expected a number " + interval(range) + ", found " + spelled(node);
  return std::nullopt;
}

}  // namespace

const toml::node* TableReader::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  return table_ != nullptr ? table_->get(key) : nullptr;
}

void TableReader::fail(const toml::node& at, std::string_view key, std::string message) {
  invalid_.push_back(key);
  errors_.add(position_of(at), path(key), std::move(message));
}

void TableReader::integer(std::string_view key, std::int64_t& out, IntRange range) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  if (auto problem = integer_problem(*node, range)) fail(*node, key, std::move(*problem));
  else out = *node->value_exact<std::int64_t>();
}

void TableReader::number(std::string_view key, double& out, NumberRange range) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  if (auto problem = number_problem(*node, range)) fail(*node, key, std::move(*problem));
  else out = *node->value<double>();
}

void TableReader::boolean(std::string_view key, bool& out) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  if (auto value = node->value_exact<bool>()) {
    out = *value;
  } else {
    fail(*node, key, "expected a boolean (true or false), found " + describe(*node));
  }
}

void TableReader::string(std::string_view key, std::string& out) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  if (auto value = node->value_exact<std::string>()) {
    out = std::move(*value);
  } else {
    fail(*node, key, "expected a string, found " + describe(*node));
  }
}

void TableReader::non_empty_string(std::string_view key, std::string& out, std::string_view what) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  auto value = node->value_exact<std::string>();
  if (!value || value->empty()) {
    fail(*node, key, "expected " + std::string(what) + " (a non-empty string), found " + describe(*node));
    return;
  }
  out = std::move(*value);
}

std::optional<std::size_t> TableReader::choice_index(std::string_view key,
                                                     std::span<const std::string_view> names) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  const auto value = node->value_exact<std::string>();
  if (value) {
    const auto it = std::find(names.begin(), names.end(), *value);
    if (it != names.end()) return static_cast<std::size_t>(it - names.begin());
  }
  std::string message = "expected one of ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) message += ", ";
    message += quoted(names[i]);
  }
  message += ", found " + (value ? quoted(*value) : describe(*node));
  fail(*node, key, std::move(message));
  return std::nullopt;
}

template <class T, class Problem, class Get>
void TableReader::array_of(std::string_view key, std::string_view expected, std::vector<T>& out,
                           Problem problem, Get get) {
  const toml::node* node = find(key);
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    fail(*node, key, "expected an array of " + std::string(expected) + ", found " + describe(*node));
    return;
  }
  std::vector<T> values;
  bool all_valid = true;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = (*array)[i];
    if (std::optional<std::string> message = problem(element)) {
      all_valid = false;
      invalid_.push_back(key);
      errors_.add(position_of(element), path(key) + '[' + std::to_string(i) + ']', std::move(*message));
    } else {
      values.push_back(get(element));
    }
  }
  if (all_valid) out = std::move(values);
}

void TableReader::string_array(std::string_view key, std::vector<std::string>& out,
                               bool (*valid)(std::string_view), std::string_view expected) {
  array_of(
      key, expected, out,
      [&](const toml::node& element) -> std::optional<std::string> {
        const auto value = element.value_exact<std::string>();
        if (value && valid(*value)) return std::nullopt;
        return "expected " + std::string(expected) + ", found " +
               (value ? quoted(*value) : describe(element));
      },
      [](const toml::node& element) { return *element.value_exact<std::string>(); });
}

void TableReader::integer_array(std::string_view key, std::vector<std::int64_t>& out,
                                IntRange range) {
  array_of(
      key, "integers", out, [&](const toml::node& e) { return integer_problem(e, range); },
      [](const toml::node& e) { return *e.value_exact<std::int64_t>(); });
}

void TableReader::number_array(std::string_view key, std::vector<double>& out, NumberRange range) {
  array_of(
      key, "numbers", out, [&](const toml::node& e) { return number_problem(e, range); },
      [](const toml::node& e) { return *e.value<double>(); });
}

const toml::table* TableReader::table(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return nullptr;
  if (const toml::table* table = node->as_table()) return table;
  fail(*node, key, "expected a table, found " + describe(*node));
  return nullptr;
}

bool TableReader::require(std::string_view key, std::string_view why) {
  if (find(key) != nullptr) return true;
  std::string message = "required key is missing";
  if (!why.empty()) message += " (" + std::string(why) + ")";
  errors_.add(section_position().value_or(Position{}), path(key), std::move(message));
  return false;
}

void TableReader::error(std::string_view key, std::string message) {
  invalid_.push_back(key);
  const Position at = position(key) ? *position(key) : section_position().value_or(Position{});
  errors_.add(at, path(key), std::move(message));
}

void TableReader::report_unknown_keys(std::string_view context) {
  if (table_ == nullptr) return;
  for (const auto& [key, node] : *table_) {
    if (std::find(known_.begin(), known_.end(), key.str()) != known_.end()) continue;
    std::string message = "unknown key";
    if (!context.empty()) message += " " + std::string(context);
    message += "; ";
    if (auto suggestion = closest_match(key.str(), known_)) {
      message += "did you mean '" + std::string(*suggestion) + "'?";
    } else {
      message += "known keys are: ";
      for (std::size_t i = 0; i < known_.size(); ++i) {
        if (i > 0) message += ", ";
        message += known_[i];
      }
    }
    errors_.add(position_of(key), path(key.str()), std::move(message));
  }
}

std::optional<Position> TableReader::position(std::string_view key) const {
  if (table_ == nullptr) return std::nullopt;
  if (const toml::node* node = table_->get(key)) return position_of(*node);
  return std::nullopt;
}

std::optional<Position> TableReader::section_position() const {
  if (table_ == nullptr) return std::nullopt;
  return position_of(*table_);
}

bool TableReader::valid(std::string_view key) const {
  return std::find(invalid_.begin(), invalid_.end(), key) == invalid_.end();
}

}  // namespace actorlm::config::detail
