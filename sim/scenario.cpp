// parse_scenario: splits a scenario file into the daemon config (checked by
// config::parse_config, on the base and on each regime's merged tables), the workloads
// (sim::parse_workload) and the scenario's own tables, and locates every error in the file.
#include "sim/scenario.hpp"

#include "sim/model/catalogue.hpp"
#include "sim/backend/sim_backend.hpp"

#include "actors/config/table_reader.hpp"
#include "actors/config/toml_parse.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace actorlm::sim {

namespace {

constexpr std::string_view config_sections[] = {"server", "engine", "cache", "scheduler",
                                                "model",  "sim",    "cluster"};
bool is_config_section(std::string_view k) {
  return std::find(std::begin(config_sections), std::end(config_sections), k) !=
         std::end(config_sections);
}

// config's TableReader checks the scenario's own tables, so their errors read like the config's.
using config::detail::ErrorList;
using config::detail::IntRange;
using config::detail::NumberRange;
using config::detail::Position;
using config::detail::TableReader;

constexpr NumberRange positive{0, std::numeric_limits<double>::infinity(), /*lo_open=*/true};

// An error at `n` (nowhere in the file when null).
void add_at(ErrorList& errors, const toml::node* n, std::string key, std::string message) {
  errors.add(n ? config::detail::position_of(*n) : Position{}, std::move(key), std::move(message));
}

// A parse_config error on tables merged from `layers` (the last wins): located at the node
// of the layer that supplied the key, named with that layer's prefix.
struct Layer {
  const toml::table* table;
  std::string prefix;  // "" for the base, "regimes[1]." for a regime
};
config::ConfigError locate(config::ConfigError e, const std::vector<Layer>& layers,
                           const std::string& file) {
  e.file = file;
  e.line = e.column = 0;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    // The key, or its section when the key itself is not written (a missing table entry).
    for (std::string path = e.key; !path.empty();) {
      if (const toml::node* n = it->table->at_path(path).node()) {
        e.line = n->source().begin.line;
        e.column = n->source().begin.column;
        e.key = it->prefix + e.key;
        return e;
      }
      const auto dot = path.find_last_of(".[");
      path = dot == std::string::npos ? std::string() : path.substr(0, dot);
    }
  }
  return e;
}

// parse_config on the config sections of `merged`, errors located through `layers`.
std::optional<config::Config> check_config(const toml::table& merged,
                                           const std::vector<Layer>& layers, ErrorList& errors) {
  std::ostringstream text;
  text << merged;
  auto parsed = config::parse_config(text.str(), errors.file());
  for (auto& e : parsed.errors) errors.add(locate(std::move(e), layers, errors.file()));
  if (!parsed.ok()) return std::nullopt;
  parsed.config.engine.backend = config::Backend::sim;
  return parsed.config;
}

std::optional<double> positive_number(TableReader& r, std::string_view key) {
  double v = std::numeric_limits<double>::quiet_NaN();  // a valid read is finite
  r.number(key, v, positive);
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

// An array that must not be empty (the reads accept `[]`); `size` is what the read returned.
void non_empty(TableReader& r, std::string_view key, std::size_t size, std::string_view of) {
  if (size == 0 && r.has(key) && r.valid(key))
    r.error(key, "expected a non-empty array of " + std::string(of) + ", found []");
}

std::vector<std::string> name_list(TableReader& r, std::string_view key, std::string_view what) {
  std::vector<std::string> out;
  r.string_array(key, out, [](std::string_view v) { return !v.empty(); }, what);
  non_empty(r, key, out.size(), "strings");
  return out;
}

std::vector<std::uint32_t> counts(TableReader& r, std::string_view key, std::int64_t hi) {
  std::vector<std::int64_t> out;
  r.integer_array(key, out, IntRange{1, hi});
  non_empty(r, key, out.size(), "integers");
  return {out.begin(), out.end()};
}

void parse_header(const toml::table& t, Scenario& s, ErrorList& errors) {
  TableReader r("scenario", &t, errors);
  r.non_empty_string("name", s.name, "a scenario name");
  r.non_empty_string("description", s.description, "a description");
  std::int64_t seed = -1;
  r.integer("seed", seed, IntRange{0, std::numeric_limits<std::int64_t>::max()});
  if (seed >= 0) s.seed = static_cast<std::uint64_t>(seed);
  r.report_unknown_keys();
}

void parse_slo(const toml::table& t, Slo& slo, ErrorList& errors) {
  TableReader r("slo", &t, errors);
  slo.ttft_s = positive_number(r, "ttft_s");
  slo.tpot_s = positive_number(r, "tpot_s");
  slo.e2e_s = positive_number(r, "e2e_s");
  r.report_unknown_keys();
}

// `table` is the parsed file's own (so its nodes keep their positions): `name` and
// `load_sweep` are taken out before parse_workload sees it.
void parse_one_workload(toml::table& table, const std::string& key, bool needs_name,
                        Scenario& s, ErrorList& errors) {
  ScenarioWorkload w;
  {
    // Only the two keys taken out here: parse_workload reports the table's unknown keys.
    TableReader r(key, &table, errors);
    if (needs_name) r.require("name");
    r.non_empty_string("name", w.name, "a workload name");
    r.number_array("load_sweep", w.load_sweep, positive);
    non_empty(r, "load_sweep", w.load_sweep.size(), "numbers");
  }
  if (w.name.empty()) w.name = "workload";
  // Where load_sweep was written, kept before the erase below frees its node.
  const toml::source_region sweep_at = table.get("load_sweep") ? table.get("load_sweep")->source() : table.source();
  table.erase("name");
  table.erase("load_sweep");
  auto parsed = parse_workload(table, key);
  for (auto& e : parsed.errors) errors.add(std::move(e));
  if (!parsed.ok()) return;
  w.spec = parsed.spec;
  const bool rated = std::holds_alternative<PoissonArrivals>(w.spec.arrival) ||
                     std::holds_alternative<GammaArrivals>(w.spec.arrival);
  if (!w.load_sweep.empty() && !rated)
    errors.add({sweep_at.begin.line, sweep_at.begin.column}, key + ".load_sweep",
               "needs a poisson or gamma arrival process (its rate is what is swept)");
  for (const auto& other : s.workloads)
    if (other.name == w.name) add_at(errors, &table, key + ".name", "duplicate workload \"" + w.name + "\"");
  s.workloads.push_back(std::move(w));
}

void parse_plan(const toml::table& t, Scenario& s, const Catalogue* cat, ErrorList& errors) {
  TableReader r("plan", &t, errors);
  PlanSpec plan;
  r.require("instances", "the instances to compare");
  plan.instances = name_list(r, "instances", "an instance name");
  if (cat)
    for (std::size_t i = 0; i < plan.instances.size(); ++i) try {
        cat->instance(plan.instances[i]);
      } catch (const std::exception& e) {
        const std::string at = "instances[" + std::to_string(i) + "]";
        add_at(errors, t.at_path(at).node(), r.path(at), e.what());
      }
  plan.tensor_parallel_degrees = counts(r, "tensor_parallel_degrees", 64);
  plan.nodes = counts(r, "nodes", 64);
  plan.regimes = name_list(r, "regimes", "a regime name");
  for (std::size_t i = 0; i < plan.regimes.size(); ++i)
    if (std::none_of(s.regimes.begin(), s.regimes.end(),
                     [&](const Regime& x) { return x.name == plan.regimes[i]; })) {
      const std::string at = "regimes[" + std::to_string(i) + "]";
      add_at(errors, t.at_path(at).node(), r.path(at), "no regime of that name");
    }
  plan.max_num_seqs = counts(r, "max_num_seqs", 65536);
  plan.max_num_batched_tokens = counts(r, "max_num_batched_tokens", 1 << 24);
  plan.batch_size = counts(r, "batch_size", 4096);
  r.non_empty_string("workload", plan.workload, "a workload name");
  if (!plan.workload.empty() &&
      std::none_of(s.workloads.begin(), s.workloads.end(),
                   [&](const ScenarioWorkload& x) { return x.name == plan.workload; }))
    r.error("workload", "no workload of that name");
  std::int64_t requests = 0;
  r.integer("requests", requests, IntRange{1, 1 << 24});
  if (requests > 0) plan.requests = static_cast<std::uint32_t>(requests);
  constexpr std::string_view latencies[] = {"e2e_p90", "ttft_p90", "tpot_p90"};
  if (auto i = r.choice_index("latency", latencies)) plan.latency = latencies[*i];
  r.report_unknown_keys();
  s.plan = std::move(plan);
}

}  // namespace

WorkloadSpec at_rate(const WorkloadSpec& spec, double rate) {
  WorkloadSpec out = spec;
  if (auto* p = std::get_if<PoissonArrivals>(&out.arrival)) p->rate = rate;
  if (auto* g = std::get_if<GammaArrivals>(&out.arrival)) g->rate = rate;
  return out;
}

ScenarioParse parse_scenario(std::string_view text, std::string_view file) {
  ScenarioParse out;
  ErrorList errors(file);
  Scenario& s = out.scenario;
  s.file = std::string(file);
  toml::table root;
  try {
    root = config::detail::parse_toml(text, file);  // toml::parse, without toml++ 3.3.0's UB
  } catch (const toml::parse_error& e) {
    out.errors.push_back({std::string(file), e.source().begin.line, e.source().begin.column, "",
                          std::string(e.description())});
    return out;
  }

  toml::table config_part;  // the daemon's sections, as written
  for (const auto& [k, v] : root) {
    const std::string_view key = k.str();
    if (is_config_section(key)) {
      config_part.insert(key, v);
    } else if (key != "scenario" && key != "regimes" && key != "workload" && key != "workloads" &&
               key != "slo" && key != "plan") {
      add_at(errors, &v, std::string(key), "unknown section; a scenario has [scenario], [[regimes]], "
             "[workload] or [[workloads]], [slo], [plan] and the daemon's config sections");
    } else if (key == "regimes" || key == "workloads" ? !v.is_array_of_tables() : !v.is_table()) {
      add_at(errors, &v, std::string(key), key == "regimes" || key == "workloads"
                                          ? "expected an array of tables ([[" + std::string(key) + "]])"
                                          : "expected a table ([" + std::string(key) + "])");
    }
  }
  if (const toml::table* t = root["scenario"].as_table()) parse_header(*t, s, errors);
  if (const toml::table* t = root["slo"].as_table()) parse_slo(*t, s.slo, errors);

  const std::vector<Layer> base_layers{{&root, ""}};
  const auto base = check_config(config_part, base_layers, errors);
  if (base) s.base = *base;

  // Regimes: the base's sections with the regime's keys laid over them.
  if (const toml::array* regimes = root["regimes"].as_array(); regimes && base) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < regimes->size(); ++i) {
      const toml::table* r = regimes->get(i)->as_table();
      if (!r) continue;
      const std::string prefix = "regimes[" + std::to_string(i) + "].";
      Regime regime;
      TableReader reader(prefix.substr(0, prefix.size() - 1), r, errors);  // name only
      reader.require("name");
      reader.non_empty_string("name", regime.name, "a regime name");
      if (!regime.name.empty() && !names.insert(regime.name).second)
        reader.error("name", "duplicate regime \"" + regime.name + "\"");
      toml::table merged = config_part;
      for (const auto& [k, v] : *r) {
        if (k.str() == "name") continue;
        const toml::table* over = v.as_table();
        if (!is_config_section(k.str()) || !over) {
          add_at(errors, &v, prefix + std::string(k.str()),
                 "expected a config section's keys (engine., cache., scheduler., model., sim.)");
          continue;
        }
        if (!merged.contains(k.str())) merged.insert(k.str(), toml::table{});
        toml::table& section = *merged[k.str()].as_table();
        for (const auto& [kk, vv] : *over) section.insert_or_assign(kk.str(), vv);
      }
      if (auto c = check_config(merged, {{&root, ""}, {r, prefix}}, errors)) {
        regime.config = *c;
        s.regimes.push_back(std::move(regime));
      }
    }
  }
  if (!root.contains("regimes") && base) s.regimes.push_back({"default", s.base});

  if (toml::table* w = root["workload"].as_table()) parse_one_workload(*w, "workload", false, s, errors);
  if (toml::array* ws = root["workloads"].as_array())
    for (std::size_t i = 0; i < ws->size(); ++i)
      if (toml::table* w = ws->get(i)->as_table())
        parse_one_workload(*w, "workloads[" + std::to_string(i) + "]", true, s, errors);
  if (!root.contains("workload") && !root.contains("workloads"))
    add_at(errors, nullptr, "workload", "missing: a scenario needs [workload] or [[workloads]]");

  if (const toml::table* t = root["plan"].as_table()) {
    std::optional<Catalogue> cat;
    if (base) try {
        cat = catalogue_for(s.base);
      } catch (const std::exception& e) {
        add_at(errors, nullptr, "sim", e.what());
      }
    parse_plan(*t, s, cat ? &*cat : nullptr, errors);
  }

  out.errors = errors.take_sorted();
  return out;
}

ScenarioParse load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ScenarioParse out;
    out.errors.push_back({path, 0, 0, "", "cannot read the file"});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path);
}

}  // namespace actorlm::sim
