#pragma once
// Reads one TOML table into struct fields, checking each value's type and range, and records what
// is wrong (with its position) instead of stopping at the first problem, so that one `actorlm
// config check` run lists everything. The one validator of every TOML file actorlm reads: the
// daemon config, the sim catalogue, workloads and scenarios, so their errors read alike
// (FILE:LINE:COL: key.path: message).

#include "actors/config/config.hpp"

#include <toml++/toml.h>

#include <compare>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace actorlm::config::detail {

struct Position {
  std::uint32_t line = 0;  // 0: nowhere in the file
  std::uint32_t column = 0;
  auto operator<=>(const Position&) const = default;
};

Position position_of(const toml::node& node);
Position position_of(const toml::key& key);

// Every error found in one file, reported in file order whatever order they were found in.
class ErrorList {
 public:
  explicit ErrorList(std::string_view file) : file_(file) {}
  void add(Position where, std::string key, std::string message);
  // An error found already located (another parser's, or another file's: a trace a workload
  // names). Errors of other files come after this file's, in the order added.
  void add(ConfigError error);
  std::size_t size() const { return errors_.size(); }
  const std::string& file() const { return file_; }
  std::vector<ConfigError> take_sorted();

 private:
  std::string file_;
  std::vector<ConfigError> errors_;
};

// What a value is, for "found ...": `a string ("16")`, `an integer (3)`, `an array`.
std::string describe(const toml::node& node);

// Levenshtein distance (insertions, deletions, substitutions each cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a typo of it:
// distance <= max(2, word.size() / 3).
std::optional<std::string_view> closest_match(std::string_view word,
                                              std::span<const std::string_view> candidates);

struct IntRange {
  std::int64_t lo;
  std::int64_t hi;
  bool power_of_two = false;
};

struct NumberRange {
  double lo;
  double hi;  // infinity: no upper bound
  bool lo_open = false;
  bool hi_open = false;
};

class TableReader {
 public:
  // `table` is null when the section is absent: every read then keeps its default.
  TableReader(std::string section, const toml::table* table, ErrorList& errors)
      : section_(std::move(section)), table_(table), errors_(errors) {}

  void integer(std::string_view key, std::int64_t& out, IntRange range);
  void number(std::string_view key, double& out, NumberRange range);  // integers accepted
  void boolean(std::string_view key, bool& out);
  void string(std::string_view key, std::string& out);
  void non_empty_string(std::string_view key, std::string& out, std::string_view what);
  template <class Enum>
  void choice(std::string_view key, Enum& out, std::initializer_list<Enum> values);
  // Arrays whose elements are each checked like the reads above (an error per bad element, at
  // `key[i]`); `out` is set only when every element is valid. `expected` describes an element.
  void string_array(std::string_view key, std::vector<std::string>& out,
                    bool (*valid)(std::string_view), std::string_view expected);
  void integer_array(std::string_view key, std::vector<std::int64_t>& out, IntRange range);
  void number_array(std::string_view key, std::vector<double>& out, NumberRange range);
  // `key` must be one of `names`: its index, or nullopt when absent or not one of them.
  std::optional<std::size_t> choice_index(std::string_view key,
                                          std::span<const std::string_view> names);

  // For a value of more than one shape (a count or a table): the node, recorded as known; null
  // when absent.
  const toml::node* node(std::string_view key) { return find(key); }
  // A sub-table; null when absent, or (with an error) when `key` is not a table.
  const toml::table* table(std::string_view key);
  // Reports `key` as a required key that is missing unless it is written; `why` (may be empty)
  // says what needs it, e.g. `for process = "gamma"`. True when present.
  bool require(std::string_view key, std::string_view why = {});
  // An error that no single read finds (a rule across keys), at `key`, or at the section when
  // `key` is absent; `key` then counts as invalid.
  void error(std::string_view key, std::string message);
  bool has(std::string_view key) const { return table_ != nullptr && table_->contains(key); }

  // Reports every key of the table that no read asked for. Call once, after all reads. `context`
  // (may be empty) qualifies the key set, e.g. `for process = "gamma"`.
  void report_unknown_keys(std::string_view context = {});

  std::string path(std::string_view key) const { return section_ + '.' + std::string(key); }
  // Where `key` is written, if it is (for anchoring cross-field errors).
  std::optional<Position> position(std::string_view key) const;
  std::optional<Position> section_position() const;
  // True when `key` is absent or was read without error: cross-field rules skip bad values.
  bool valid(std::string_view key) const;

 private:
  const toml::node* find(std::string_view key);  // also records `key` as known
  void fail(const toml::node& at, std::string_view key, std::string message);
  // The array reads: `problem(element)` says what is wrong with an element (nullopt: nothing),
  // `get(element)` its value. Defined in the .cpp, its only user.
  template <class T, class Problem, class Get>
  void array_of(std::string_view key, std::string_view expected, std::vector<T>& out,
                Problem problem, Get get);

  std::string section_;
  const toml::table* table_;
  ErrorList& errors_;
  std::vector<std::string_view> known_;   // schema order, for "known keys are: ..."
  std::vector<std::string_view> invalid_;
};

template <class Enum>
void TableReader::choice(std::string_view key, Enum& out, std::initializer_list<Enum> values) {
  std::vector<std::string_view> names;
  for (Enum value : values) names.push_back(to_string(value));
  if (auto index = choice_index(key, names)) out = values.begin()[*index];
}

}  // namespace actorlm::config::detail
