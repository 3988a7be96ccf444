// Workload generation, validation and description (the TOML reader is in workload_toml.cpp).
#include "sim/workload.hpp"

#include "kernels/splitmix64.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>

namespace actorlm::sim {
namespace {

// A std::mt19937_64 with our own distributions, so that the same seed draws the same numbers
// with every standard library (std:: distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  double uniform_open() {  // (0, 1), 53 random bits
    return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53;
  }
  std::uint64_t below(std::uint64_t n) {  // uniform in [0, n), n >= 1; rejection, no modulo bias
    const std::uint64_t threshold = (0 - n) % n;
    std::uint64_t r;
    do r = engine_(); while (r < threshold);
    return r % n;
  }
  double normal() {  // Box–Muller, one of the pair (no cached state to keep in step)
    const double u1 = uniform_open(), u2 = uniform_open();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double exponential() { return -std::log(uniform_open()); }  // mean 1
  // Gamma(shape, scale 1), mean `shape`: Marsaglia & Tsang (2000), "A simple method for
  // generating gamma variables"; shape < 1 by the boost X·U^(1/shape), X ~ Gamma(shape + 1).
  double gamma(double shape) {
    if (shape < 1) return gamma(shape + 1) * std::pow(uniform_open(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
      const double x = normal();
      double v = 1 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      const double u = uniform_open();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
    }
  }

 private:
  std::mt19937_64 engine_;
};

// Independent streams for input lengths, output lengths and gaps: changing the length
// distributions leaves the arrival times of a seed unchanged. Stream k's seed is output k + 1
// of a SplitMix64 generator seeded with `seed`.
std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t stream) {
  return kernels::splitmix64(seed + stream * kernels::splitmix64_gamma);
}

std::uint32_t round_clamp(double x, std::uint32_t lo, std::uint32_t hi) {
  if (!(x >= lo)) return lo;  // NaN too
  if (x >= hi) return hi;
  return static_cast<std::uint32_t>(std::clamp<double>(std::nearbyint(x), lo, hi));
}

std::uint32_t draw(const LengthDistribution& length, Rng& rng) {
  return std::visit(
      [&](const auto& d) -> std::uint32_t {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, FixedLength>) {
          return d.value;
        } else if constexpr (std::is_same_v<D, UniformLength>) {
          return d.min + static_cast<std::uint32_t>(rng.below(std::uint64_t{d.max} - d.min + 1));
        } else if constexpr (std::is_same_v<D, NormalLength>) {
          return round_clamp(d.mean + d.sd * rng.normal(), d.min, d.max);
        } else {
          return round_clamp(std::exp(d.mu + d.sigma * rng.normal()), d.min, d.max);
        }
      },
      length);
}

// Shortest decimal that reads back as the same double: deterministic and locale-free.
std::string num(double x) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, end);
}

std::string bounds(std::uint32_t min, std::uint32_t max) {
  return ", [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

void check_length(const LengthDistribution& length, const std::string& name,
                  std::vector<std::string>& problems) {
  auto bad = [&](const std::string& what) { problems.push_back(name + ": " + what); };
  auto check_bounds = [&](std::uint32_t min, std::uint32_t max) {
    if (min < 1) bad("min must be >= 1");
    if (max < min) bad("max must be >= min");
  };
  std::visit(
      [&](const auto& d) {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, FixedLength>) {
          if (d.value < 1) bad("value must be >= 1");
        } else if constexpr (std::is_same_v<D, UniformLength>) {
          check_bounds(d.min, d.max);
        } else if constexpr (std::is_same_v<D, NormalLength>) {
          if (!(d.mean > 0) || !std::isfinite(d.mean)) bad("mean must be > 0");
          if (!(d.sd >= 0) || !std::isfinite(d.sd)) bad("sd must be >= 0");
          check_bounds(d.min, d.max);
        } else {
          if (!std::isfinite(d.mu)) bad("mu must be finite");
          if (!(d.sigma >= 0) || !std::isfinite(d.sigma)) bad("sigma must be >= 0");
          check_bounds(d.min, d.max);
        }
      },
      length);
}

// A workload's max_tokens on one request: its length cut to the cap, the cap its max_tokens.
void apply_cap(std::uint32_t cap, WorkloadRequest& r) {
  if (cap == 0) return;
  r.output_tokens = std::min(r.output_tokens, cap);
  r.max_tokens = cap;
}

}  // namespace

LogNormalLength lognormal_from_mean_sd(double mean, double sd, std::uint32_t min,
                                       std::uint32_t max) {
  const double sigma2 = std::log1p((sd * sd) / (mean * mean));
  return LogNormalLength{std::log(mean) - sigma2 / 2, std::sqrt(sigma2), min, max};
}

std::optional<std::uint32_t> closed_loop_clients(const WorkloadSpec& spec) {
  if (const auto* closed = std::get_if<ClosedLoopArrivals>(&spec.arrival)) return closed->clients;
  return std::nullopt;
}

std::vector<std::string> validate(const WorkloadSpec& spec) {
  std::vector<std::string> problems;
  const bool trace = std::holds_alternative<TraceReplay>(spec.arrival);
  if (!trace && spec.requests < 1) problems.push_back("requests must be >= 1");
  if (!trace) {
    check_length(spec.input, "input", problems);
    check_length(spec.output, "output", problems);
  }
  auto positive = [&](double x, const char* what) {
    if (!(x > 0) || !std::isfinite(x)) problems.push_back(std::string(what) + " must be > 0");
  };
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, PoissonArrivals>) {
          positive(a.rate, "arrival.rate");
        } else if constexpr (std::is_same_v<A, GammaArrivals>) {
          positive(a.rate, "arrival.rate");
          positive(a.burstiness, "arrival.burstiness");
        } else if constexpr (std::is_same_v<A, ClosedLoopArrivals>) {
          if (a.clients < 1) problems.push_back("arrival.clients must be >= 1");
          if (!(a.think_time_s >= 0) || !std::isfinite(a.think_time_s))
            problems.push_back("arrival.think_time_s must be >= 0");
        } else {
          positive(a.speedup, "arrival.speedup");
          if (a.rows.empty()) problems.push_back("arrival: the trace has no requests");
        }
      },
      spec.arrival);
  return problems;
}

std::vector<WorkloadRequest> generate(const WorkloadSpec& spec, std::uint64_t seed) {
  if (auto problems = validate(spec); !problems.empty())
    throw std::invalid_argument("invalid workload: " + problems.front());

  if (const auto* trace = std::get_if<TraceReplay>(&spec.arrival)) {
    const std::size_t n = spec.requests == 0
        ? trace->rows.size() : std::min<std::size_t>(spec.requests, trace->rows.size());
    std::vector<WorkloadRequest> out(trace->rows.begin(), trace->rows.begin() + n);
    const std::int64_t origin = out.front().arrival_ns;
    for (WorkloadRequest& r : out) {
      const std::int64_t since = r.arrival_ns - origin;  // ns
      r.arrival_ns = trace->speedup == 1
          ? since : std::llround(static_cast<double>(since) / trace->speedup);
      apply_cap(spec.max_tokens, r);
    }
    return out;
  }

  Rng input_rng(stream_seed(seed, 0)), output_rng(stream_seed(seed, 1)),
      gap_rng(stream_seed(seed, 2));
  std::vector<WorkloadRequest> out(spec.requests);
  double t = 0;  // s; the first request arrives when the run starts
  for (std::uint32_t i = 0; i < spec.requests; ++i) {
    out[i].input_tokens = draw(spec.input, input_rng);
    out[i].output_tokens = draw(spec.output, output_rng);
    apply_cap(spec.max_tokens, out[i]);
    if (i > 0) {
      if (const auto* p = std::get_if<PoissonArrivals>(&spec.arrival)) {
        t += gap_rng.exponential() / p->rate;
      } else if (const auto* g = std::get_if<GammaArrivals>(&spec.arrival)) {
        // shape k = 1/burstiness, scale θ = burstiness/rate: mean kθ = 1/rate, CV² = 1/k.
        t += gap_rng.gamma(1.0 / g->burstiness) * g->burstiness / g->rate;
      }
    }
    out[i].arrival_ns = std::llround(t * 1e9);  // 0 for closed loop: the driver releases them
  }
  return out;
}

std::string to_string(const LengthDistribution& length) {
  return std::visit(
      [](const auto& d) -> std::string {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, FixedLength>) {
          return "fixed " + std::to_string(d.value);
        } else if constexpr (std::is_same_v<D, UniformLength>) {
          return "uniform" + bounds(d.min, d.max).substr(1);
        } else if constexpr (std::is_same_v<D, NormalLength>) {
          return "normal(mean " + num(d.mean) + ", sd " + num(d.sd) + bounds(d.min, d.max) + ")";
        } else {
          return "lognormal(mu " + num(d.mu) + ", sigma " + num(d.sigma) + bounds(d.min, d.max) +
                 ")";
        }
      },
      length);
}

std::string to_string(const ArrivalProcess& arrival) {
  return std::visit(
      [](const auto& a) -> std::string {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, PoissonArrivals>) {
          return "Poisson " + num(a.rate) + " req/s";
        } else if constexpr (std::is_same_v<A, GammaArrivals>) {
          return "gamma " + num(a.rate) + " req/s, burstiness " + num(a.burstiness);
        } else if constexpr (std::is_same_v<A, ClosedLoopArrivals>) {
          return "closed loop, " + std::to_string(a.clients) + " clients, think time " +
                 num(a.think_time_s) + " s";
        } else {
          return "trace " + a.path + " (" + std::to_string(a.rows.size()) + " rows, speedup " +
                 num(a.speedup) + ")";
        }
      },
      arrival);
}

std::string to_string(const WorkloadSpec& spec) {
  const std::string cap = spec.max_tokens == 0 ? "" : ", max_tokens " + std::to_string(spec.max_tokens);
  if (std::holds_alternative<TraceReplay>(spec.arrival)) {
    const std::string count = spec.requests == 0 ? "all" : "at most " + std::to_string(spec.requests);
    return count + " requests; " + to_string(spec.arrival) + cap;
  }
  return std::to_string(spec.requests) + " requests; input " + to_string(spec.input) +
         "; output " + to_string(spec.output) + cap + "; " + to_string(spec.arrival);
}

}  // namespace actorlm::sim
