// parse_scenario: splits a scenario file into the daemon config (checked by
// config::parse_config, on the base and on each regime's merged tables), the workloads
// (sim::parse_workload) and the scenario's own tables, and locates every error in the file.
#include "sim/scenario.hpp"

#include "sim/model/catalogue.hpp"
#include "sim/backend/sim_backend.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace actorlm::sim {

namespace {

constexpr std::string_view config_sections[] = {"server", "engine", "cache", "scheduler",
                                                "model",  "sim",    "cluster"};
bool is_config_section(std::string_view k) {
  return std::find(std::begin(config_sections), std::end(config_sections), k) !=
         std::end(config_sections);
}

struct Errors {
  std::string file;
  std::vector<config::ConfigError> list;
  void at(const toml::node* n, std::string key, std::string message) {
    config::ConfigError e{file, 0, 0, std::move(key), std::move(message)};
    if (n) {
      e.line = n->source().begin.line;
      e.column = n->source().begin.column;
    }
    list.push_back(std::move(e));
  }
};

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
                                           const std::vector<Layer>& layers, Errors& errors) {
  std::ostringstream text;
  text << merged;
  auto parsed = config::parse_config(text.str(), errors.file);
  for (auto& e : parsed.errors) errors.list.push_back(locate(std::move(e), layers, errors.file));
  if (!parsed.ok()) return std::nullopt;
  parsed.config.engine.backend = config::Backend::sim;
  return parsed.config;
}

std::optional<double> positive(const toml::table& t, std::string_view key,
                               const std::string& prefix, Errors& errors) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  auto x = n->value<double>();
  if (n->is_boolean() || n->is_string() || !x || !std::isfinite(*x) || *x <= 0) {
    errors.at(n, prefix + std::string(key), "expected a number > 0");
    return std::nullopt;
  }
  return x;
}

std::optional<std::string> string_of(const toml::table& t, std::string_view key,
                                     const std::string& prefix, Errors& errors) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  if (auto s = n->value_exact<std::string>(); s && !s->empty()) return s;
  errors.at(n, prefix + std::string(key), "expected a non-empty string");
  return std::nullopt;
}

void unknown_keys(const toml::table& t, std::initializer_list<std::string_view> known,
                  const std::string& prefix, Errors& errors) {
  for (const auto& [k, v] : t)
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      errors.at(&v, prefix + std::string(k.str()), "unknown key");
}

template <class T>
std::vector<T> list_of(const toml::table& t, std::string_view key, const std::string& prefix,
                       Errors& errors, std::int64_t lo = 1, std::int64_t hi = 1 << 24) {
  std::vector<T> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a || a->empty()) {
    errors.at(n, prefix + std::string(key), "expected a non-empty array");
    return out;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    const std::string where = prefix + std::string(key) + "[" + std::to_string(i) + "]";
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto s = e.value_exact<std::string>()) out.push_back(*s);
      else errors.at(&e, where, "expected a string");
    } else if constexpr (std::is_same_v<T, double>) {
      auto x = e.value<double>();
      if (e.is_boolean() || e.is_string() || !x || !std::isfinite(*x) || *x <= 0)
        errors.at(&e, where, "expected a number > 0");
      else out.push_back(*x);
    } else {
      auto x = e.value_exact<std::int64_t>();
      if (!x || *x < lo || *x > hi)
        errors.at(&e, where, "expected an integer in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
      else out.push_back(static_cast<T>(*x));
    }
  }
  return out;
}

void parse_header(const toml::table& t, Scenario& s, Errors& errors) {
  unknown_keys(t, {"name", "description", "seed"}, "scenario.", errors);
  if (auto v = string_of(t, "name", "scenario.", errors)) s.name = *v;
  if (auto v = string_of(t, "description", "scenario.", errors)) s.description = *v;
  if (const toml::node* n = t.get("seed")) {
    auto x = n->value_exact<std::int64_t>();
    if (!x || *x < 0) errors.at(n, "scenario.seed", "expected an integer >= 0");
    else s.seed = static_cast<std::uint64_t>(*x);
  }
}

void parse_slo(const toml::table& t, Slo& slo, Errors& errors) {
  unknown_keys(t, {"ttft_s", "tpot_s", "e2e_s"}, "slo.", errors);
  slo.ttft_s = positive(t, "ttft_s", "slo.", errors);
  slo.tpot_s = positive(t, "tpot_s", "slo.", errors);
  slo.e2e_s = positive(t, "e2e_s", "slo.", errors);
}

// `table` is the parsed file's own (so its nodes keep their positions): `name` and
// `load_sweep` are taken out before parse_workload sees it.
void parse_one_workload(toml::table& table, const std::string& key, bool needs_name,
                        Scenario& s, Errors& errors) {
  ScenarioWorkload w;
  if (auto n = string_of(table, "name", key + ".", errors)) w.name = *n;
  else if (needs_name && !table.get("name")) errors.at(&table, key + ".name", "missing");
  if (w.name.empty()) w.name = "workload";
  w.load_sweep = list_of<double>(table, "load_sweep", key + ".", errors);
  // Where load_sweep was written, kept before the erase below frees its node.
  const toml::source_region sweep_at = table.get("load_sweep") ? table.get("load_sweep")->source() : table.source();
  table.erase("name");
  table.erase("load_sweep");
  auto parsed = parse_workload(table, key);
  for (auto& e : parsed.errors) errors.list.push_back(std::move(e));
  if (!parsed.ok()) return;
  w.spec = parsed.spec;
  const bool rated = std::holds_alternative<PoissonArrivals>(w.spec.arrival) ||
                     std::holds_alternative<GammaArrivals>(w.spec.arrival);
  if (!w.load_sweep.empty() && !rated)
    errors.list.push_back({errors.file, sweep_at.begin.line, sweep_at.begin.column, key + ".load_sweep",
                           "needs a poisson or gamma arrival process (its rate is what is swept)"});
  for (const auto& other : s.workloads)
    if (other.name == w.name) errors.at(&table, key + ".name", "duplicate workload \"" + w.name + "\"");
  s.workloads.push_back(std::move(w));
}

void parse_plan(const toml::table& t, Scenario& s, const Catalogue* cat, Errors& errors) {
  const std::string p = "plan.";
  unknown_keys(t, {"instances", "tensor_parallel_degrees", "regimes", "max_num_seqs",
                   "max_num_batched_tokens", "batch_size", "workload", "requests", "latency"},
               p, errors);
  PlanSpec plan;
  plan.instances = list_of<std::string>(t, "instances", p, errors);
  if (!t.get("instances")) errors.at(&t, p + "instances", "missing (the instances to compare)");
  if (cat)
    for (std::size_t i = 0; i < plan.instances.size(); ++i) try {
        cat->instance(plan.instances[i]);
      } catch (const std::exception& e) {
        errors.at(t.at_path("instances[" + std::to_string(i) + "]").node(),
                  p + "instances[" + std::to_string(i) + "]", e.what());
      }
  plan.tensor_parallel_degrees = list_of<std::uint32_t>(t, "tensor_parallel_degrees", p, errors, 1, 64);
  plan.regimes = list_of<std::string>(t, "regimes", p, errors);
  for (std::size_t i = 0; i < plan.regimes.size(); ++i)
    if (std::none_of(s.regimes.begin(), s.regimes.end(),
                     [&](const Regime& r) { return r.name == plan.regimes[i]; }))
      errors.at(t.at_path("regimes[" + std::to_string(i) + "]").node(),
                p + "regimes[" + std::to_string(i) + "]", "no regime of that name");
  plan.max_num_seqs = list_of<std::uint32_t>(t, "max_num_seqs", p, errors, 1, 65536);
  plan.max_num_batched_tokens = list_of<std::uint32_t>(t, "max_num_batched_tokens", p, errors);
  plan.batch_size = list_of<std::uint32_t>(t, "batch_size", p, errors, 1, 4096);
  if (auto w = string_of(t, "workload", p, errors)) {
    plan.workload = *w;
    if (std::none_of(s.workloads.begin(), s.workloads.end(),
                     [&](const ScenarioWorkload& x) { return x.name == *w; }))
      errors.at(t.get("workload"), p + "workload", "no workload of that name");
  }
  if (const toml::node* n = t.get("requests")) {
    auto x = n->value_exact<std::int64_t>();
    if (!x || *x < 1 || *x > (1 << 24)) errors.at(n, p + "requests", "expected an integer in [1, 16777216]");
    else plan.requests = static_cast<std::uint32_t>(*x);
  }
  if (auto l = string_of(t, "latency", p, errors)) {
    if (*l != "e2e_p90" && *l != "ttft_p90" && *l != "tpot_p90")
      errors.at(t.get("latency"), p + "latency", "expected \"e2e_p90\", \"ttft_p90\" or \"tpot_p90\"");
    plan.latency = *l;
  }
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
  Errors errors{std::string(file), {}};
  Scenario& s = out.scenario;
  s.file = std::string(file);
  toml::table root;
  try {
    root = toml::parse(text, std::string(file));
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
      errors.at(&v, std::string(key), "unknown section; a scenario has [scenario], [[regimes]], "
                "[workload] or [[workloads]], [slo], [plan] and the daemon's config sections");
    } else if (key == "regimes" || key == "workloads" ? !v.is_array_of_tables() : !v.is_table()) {
      errors.at(&v, std::string(key), key == "regimes" || key == "workloads"
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
      if (auto n = string_of(*r, "name", prefix, errors)) regime.name = *n;
      else if (!r->get("name")) errors.at(r, prefix + "name", "missing");
      if (!regime.name.empty() && !names.insert(regime.name).second)
        errors.at(r->get("name"), prefix + "name", "duplicate regime \"" + regime.name + "\"");
      toml::table merged = config_part;
      for (const auto& [k, v] : *r) {
        if (k.str() == "name") continue;
        const toml::table* over = v.as_table();
        if (!is_config_section(k.str()) || !over) {
          errors.at(&v, prefix + std::string(k.str()),
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
    errors.at(nullptr, "workload", "missing: a scenario needs [workload] or [[workloads]]");

  if (const toml::table* t = root["plan"].as_table()) {
    std::optional<Catalogue> cat;
    if (base) try {
        cat = catalogue_for(s.base);
      } catch (const std::exception& e) {
        errors.at(nullptr, "sim", e.what());
      }
    parse_plan(*t, s, cat ? &*cat : nullptr, errors);
  }

  out.errors = std::move(errors.list);
  std::stable_sort(out.errors.begin(), out.errors.end(), [](const auto& a, const auto& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
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
