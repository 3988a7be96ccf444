// Reading the catalogue files: every key of an entry is required, values are range-checked, and
// every problem is reported with its file, line and dotted key (config's TableReader does the
// per-value checks and unknown-key reports, so messages read like `actorlm config check`'s).
#include "sim/model/catalogue.hpp"

#include <algorithm>

#include "actors/config/table_reader.hpp"
#include "actors/config/toml_parse.hpp"

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace actorlm::sim {

using config::detail::ErrorList;
using config::detail::IntRange;
using config::detail::NumberRange;
using config::detail::Position;
using config::detail::TableReader;
using config::detail::position_of;

namespace {

constexpr double mib = 1024.0 * 1024.0;
constexpr double giga = 1e9;
constexpr double tera = 1e12;
constexpr double micro = 1e-6;
constexpr double unbounded = std::numeric_limits<double>::infinity();

// One catalogue entry: a table whose keys are all required.
class EntryReader {
 public:
  EntryReader(std::string path, const toml::table& table, ErrorList& errors)
      : path_(std::move(path)), table_(table), errors_(errors), reader_(path_, &table, errors) {}

  std::uint32_t count(std::string_view key, std::int64_t lo, std::int64_t hi) {
    std::int64_t v = 0;
    if (require(key)) reader_.integer(key, v, IntRange{lo, hi});
    return static_cast<std::uint32_t>(v);
  }
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) {
    std::int64_t v = 0;
    if (require(key)) reader_.integer(key, v, IntRange{lo, hi});
    return v;
  }
  double positive(std::string_view key, double scale) {
    double v = 0;
    if (require(key)) reader_.number(key, v, NumberRange{0, unbounded, /*lo_open=*/true});
    return v * scale;
  }
  double non_negative(std::string_view key, double scale) {
    double v = 0;
    if (require(key)) reader_.number(key, v, NumberRange{0, unbounded});
    return v * scale;
  }
  bool has(std::string_view key) const { return reader_.has(key); }
  // Keys that may be left out: `absent` then.
  double optional_positive(std::string_view key, double scale, double absent) {
    if (!reader_.has(key)) return absent;
    return positive(key, scale);
  }
  std::uint32_t optional_count(std::string_view key, std::int64_t lo, std::int64_t hi, std::uint32_t absent) {
    if (!reader_.has(key)) return absent;
    return count(key, lo, hi);
  }
  bool optional_bool(std::string_view key, bool absent) {
    bool v = absent;
    reader_.boolean(key, v);  // keeps `absent` when the key is not written
    return v;
  }
  float positive_float(std::string_view key) {
    double v = 0;
    if (require(key)) reader_.number(key, v, NumberRange{0, unbounded, /*lo_open=*/true});
    return static_cast<float>(v);
  }
  // A required number in [0, 1] (fraction() excludes 0).
  double unit_interval(std::string_view key) {
    double v = 0;
    if (require(key)) reader_.number(key, v, NumberRange{0, 1});
    return v;
  }
  double fraction(std::string_view key) {
    double v = 1;
    if (require(key)) reader_.number(key, v, NumberRange{0, 1, /*lo_open=*/true});
    return v;
  }
  std::string text(std::string_view key) {
    std::string v;
    if (require(key)) reader_.non_empty_string(key, v, "a non-empty string");
    return v;
  }
  bool flag(std::string_view key) {
    bool v = false;
    if (require(key)) reader_.boolean(key, v);
    return v;
  }
  template <class Enum>
  Enum choice(std::string_view key, std::initializer_list<Enum> values) {
    Enum v = *values.begin();
    if (require(key)) reader_.choice(key, v, values);
    return v;
  }
  Position where(std::string_view key) const {
    const toml::node* n = table_.get(key);
    return n != nullptr ? position_of(*n) : position_of(table_);
  }
  void fail(std::string_view key, std::string message) {
    errors_.add(where(key), path_ + '.' + std::string(key), std::move(message));
  }
  void finish() { reader_.report_unknown_keys(); }

 private:
  bool require(std::string_view key) { return reader_.require(key); }
  std::string path_;
  const toml::table& table_;
  ErrorList& errors_;
  TableReader reader_;
};

// Calls `each(name, table)` for every entry of the section `name` (a table of tables).
template <class Each>
void for_each_entry(const toml::table& root, std::string_view name, ErrorList& errors, Each each) {
  const toml::node* node = root.get(name);
  if (node == nullptr) return;
  const toml::table* section = node->as_table();
  if (section == nullptr) {
    errors.add(position_of(*node), std::string(name), "expected a table of entries");
    return;
  }
  for (const auto& [key, value] : *section) {
    const std::string path = std::string(name) + '.' + std::string(key.str());
    if (const toml::table* t = value.as_table()) each(std::string(key.str()), path, *t);
    else errors.add(position_of(key), path, "expected a table, found " + config::detail::describe(value));
  }
}

void check_sections(const toml::table& root, std::initializer_list<std::string_view> known,
                    ErrorList& errors) {
  for (const auto& [key, node] : root) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key.str() == k;
    if (ok) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "[" : ", [") + std::string(k) + "]";
    errors.add(position_of(key), std::string(key.str()), "unknown section; known sections are: " + list);
  }
}

std::optional<toml::table> parse_toml(std::string_view text, std::string_view file, ErrorList& errors) {
  try {
    return config::detail::parse_toml(text, file);  // toml::parse, without toml++ 3.3.0's UB
  } catch (const toml::parse_error& e) {
    errors.add({e.source().begin.line, e.source().begin.column}, "", std::string(e.description()));
    return std::nullopt;
  }
}

Hardware read_gpu(std::string key, EntryReader& r) {
  Hardware h;
  h.key = std::move(key);
  h.name = r.text("name");
  h.memory_bytes = r.positive("memory_mib", mib);
  h.bandwidth = r.positive("bandwidth_gbps", giga);
  h.flops = r.positive("fp16_tflops", tera);
  h.link = r.text("link");
  h.link_bandwidth = r.positive("link_bandwidth_gbps", giga);
  h.link_latency = r.non_negative("link_latency_us", micro);
  h.host_bandwidth = r.positive("host_bandwidth_gbps", giga);
  h.compute_efficiency = r.fraction("compute_efficiency");
  h.memory_efficiency = r.fraction("memory_efficiency");
  h.link_efficiency = r.fraction("link_efficiency");
  h.kernel_launch = r.non_negative("kernel_launch_us", micro);
  h.cuda_context_bytes = r.non_negative("cuda_context_mib", mib);
  h.small_gemm_rows = r.optional_count("small_gemm_rows", 1, 1 << 20, 0);
  h.small_gemm_flops = r.optional_positive("small_gemm_tflops", tera, 0);
  if (r.has("small_gemm_rows") != r.has("small_gemm_tflops"))  // a bad value of either is reported once, above
    r.fail(r.has("small_gemm_rows") ? "small_gemm_rows" : "small_gemm_tflops",
           "small_gemm_rows and small_gemm_tflops go together: give both or neither");
  h.gemm_weight_rate = r.optional_positive("gemm_dequant_gweights_per_s", giga, 0);
  h.large_batch_rows = r.optional_count("large_batch_gemm_rows", 1, 1 << 20, 0);
  h.large_batch_flops = r.optional_positive("large_batch_gemm_tflops", tera, 0);
  if (r.has("large_batch_gemm_rows") != r.has("large_batch_gemm_tflops"))
    r.fail(r.has("large_batch_gemm_rows") ? "large_batch_gemm_rows" : "large_batch_gemm_tflops",
           "large_batch_gemm_rows and large_batch_gemm_tflops go together: give both or neither");
  h.attention_flops = r.optional_positive("attention_tflops", tera, 0);
  h.prefill_attention_flops = r.optional_positive("prefill_attention_tflops", tera, 0);
  h.step_overhead = r.optional_positive("step_overhead_us", micro, 0);
  // The overlap as a fraction, or as the boolean that catalogues written before 2026-12-07 hold
  // (true: the roofline, 1; false: the sum, 0).
  const bool overlaps = r.optional_bool("memory_overlaps_compute", true);
  h.memory_overlap = r.has("memory_compute_overlap") ? r.unit_interval("memory_compute_overlap") : overlaps ? 1.0 : 0.0;
  if (r.has("memory_compute_overlap") && r.has("memory_overlaps_compute"))
    r.fail("memory_overlaps_compute", "memory_overlaps_compute and memory_compute_overlap say the same: give one");
  r.finish();
  return h;
}

// Every field of model::Architecture, under its own name; model::problems() then checks the
// entry as a whole (heads a multiple of kv_heads, the family's block design).
ModelPreset read_model(std::string key, EntryReader& r, const ErrorList& errors) {
  constexpr std::int64_t big = 1 << 24;
  const std::size_t errors_before = errors.size();
  ModelPreset m;
  m.key = std::move(key);
  m.name = r.text("name");
  m.family = r.choice("family", {model::Family::llama, model::Family::falcon});
  m.layers = r.count("layers", 1, 4096);
  m.hidden = r.count("hidden", 1, big);
  m.heads = r.count("heads", 1, 65536);
  m.kv_heads = r.count("kv_heads", 1, 65536);
  m.head_dim = r.count("head_dim", 1, 65536);
  m.ffn = r.count("ffn", 1, big);
  m.ffn_kind = r.choice("ffn_kind", {FfnKind::gelu, FfnKind::swiglu});
  m.vocab = r.count("vocab", 1, big);
  m.tied_embeddings = r.flag("tied_embeddings");
  m.parallel_attention = r.flag("parallel_attention");
  m.norm = r.choice("norm", {NormKind::layernorm, NormKind::rmsnorm});
  m.norm_eps = r.positive_float("norm_eps");
  m.norms_per_layer = r.count("norms_per_layer", 0, 8);
  m.rope_theta = r.positive_float("rope_theta");
  m.rope_linear_factor = r.positive_float("rope_linear_factor");
  m.max_context = r.count("max_context", 1, 1 << 24);
  m.bos_token_id = static_cast<std::int32_t>(r.integer("bos_token_id", -1, big));
  m.eos_token_id = static_cast<std::int32_t>(r.integer("eos_token_id", -1, big));
  m.weight_bytes = r.optional_positive("bytes_per_weight", 1, 2);
  // Whole-entry rules, once every value is readable (a bad value is reported once, above).
  if (errors.size() == errors_before)
    for (const auto& p : model::problems(m)) r.fail(p.field, p.message);
  r.finish();
  return m;
}

[[noreturn]] void throw_errors(std::vector<config::ConfigError> errors) {
  std::string text;
  for (const auto& e : errors) text += (text.empty() ? "" : "\n") + e.to_string();
  throw CatalogueError(text);
}

std::string read_file(const std::string& path, std::string_view embedded) {
  if (path.empty()) return std::string(embedded);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw CatalogueError(path + ": cannot read catalogue file");
  return text.str();
}

template <class T>
const T& find_entry(const std::vector<T>& list, std::string_view key, std::string_view what) {
  for (const T& x : list)
    if (x.key == key) return x;
  std::string known;
  for (const T& x : list) known += (known.empty() ? "" : ", ") + x.key;
  throw std::invalid_argument("unknown " + std::string(what) + " \"" + std::string(key) +
                              "\"; known: " + known);
}

}  // namespace

Catalogue Catalogue::parse(std::string_view hardware_toml, std::string_view hardware_file,
                           std::string_view models_toml, std::string_view models_file) {
  Catalogue c;
  std::vector<config::ConfigError> all;

  ErrorList hw_errors{hardware_file};
  if (auto root = parse_toml(hardware_toml, hardware_file, hw_errors)) {
    check_sections(*root, {"runtime", "gpu", "instance"}, hw_errors);
    if (const toml::table* rt = root->get_as<toml::table>("runtime")) {
      EntryReader r{"runtime", *rt, hw_errors};
      c.runtime_.framework_bytes = r.non_negative("framework_overhead_mib", mib);
      c.runtime_.comm_buffer_bytes = r.non_negative("comm_buffer_mib", mib);
      r.finish();
    } else {
      hw_errors.add({}, "runtime", "required section [runtime] is missing");
    }
    for_each_entry(*root, "gpu", hw_errors, [&](std::string key, const std::string& path, const toml::table& t) {
      EntryReader r{path, t, hw_errors};
      c.hardware_.push_back(read_gpu(std::move(key), r));
    });
    for_each_entry(*root, "instance", hw_errors, [&](std::string key, const std::string& path, const toml::table& t) {
      EntryReader r{path, t, hw_errors};
      Instance i;
      i.key = std::move(key);
      i.gpu = r.text("gpu");
      i.gpus = r.count("gpus", 1, 64);
      i.price_per_hour = r.positive("price_per_hour", 1);
      i.price_note = r.text("price_note");
      if (r.has("network_gbps") || r.has("network_latency_us") || r.has("network_efficiency") ||
          r.has("network_note")) {
        i.network_bandwidth = r.positive("network_gbps", 1e9 / 8);  // Gbit/s, as AWS lists NICs
        i.network_latency = r.positive("network_latency_us", 1e-6);
        i.network_efficiency = r.fraction("network_efficiency");
        i.network_note = r.text("network_note");
      }
      r.finish();
      bool known = i.gpu.empty();
      for (const auto& h : c.hardware_) known = known || h.key == i.gpu;
      if (!known) hw_errors.add(r.where("gpu"), path + ".gpu", "no [gpu." + i.gpu + "] in this file");
      c.instances_.push_back(std::move(i));
    });
  }
  for (auto& e : hw_errors.take_sorted()) all.push_back(std::move(e));

  ErrorList model_errors{models_file};
  if (auto root = parse_toml(models_toml, models_file, model_errors)) {
    check_sections(*root, {"model"}, model_errors);
    for_each_entry(*root, "model", model_errors, [&](std::string key, const std::string& path, const toml::table& t) {
      EntryReader r{path, t, model_errors};
      c.models_.push_back(read_model(std::move(key), r, model_errors));
    });
  }
  for (auto& e : model_errors.take_sorted()) all.push_back(std::move(e));
  if (!all.empty()) throw_errors(std::move(all));
  return c;
}

Catalogue Catalogue::load(const std::string& hardware_path, const std::string& models_path) {
  const std::string hw = read_file(hardware_path, embedded_hardware_catalogue);
  const std::string models = read_file(models_path, embedded_model_catalogue);
  return parse(hw, hardware_path.empty() ? "configs/catalogue/hardware.toml (built in)" : hardware_path,
               models, models_path.empty() ? "configs/catalogue/models.toml (built in)" : models_path);
}

const Catalogue& Catalogue::builtin() {
  static const Catalogue c = load("", "");
  return c;
}

Catalogue Catalogue::with(const Hardware& h) const {
  Catalogue out = *this;
  const auto it = std::find_if(out.hardware_.begin(), out.hardware_.end(), [&](const Hardware& x) { return x.key == h.key; });
  if (it != out.hardware_.end()) *it = h;
  else out.hardware_.push_back(h);
  return out;
}

const Hardware& Catalogue::hardware(std::string_view key) const {
  return find_entry(hardware_, key, "hardware");
}
const Instance& Catalogue::instance(std::string_view key) const {
  return find_entry(instances_, key, "instance");
}
const ModelPreset& Catalogue::model(std::string_view key) const {
  return find_entry(models_, key, "model preset");
}

}  // namespace actorlm::sim
