#include "tools/bench/calibrate.hpp"

#include "actors/engine/completions.hpp"
#include "actors/engine/engine.hpp"
#include "actors/serving/served_model.hpp"
#include "actors/shard/cpu/cpu_backend.hpp"
#include "actors/shard/cpu/cpu_shard.hpp"
#include "kernels/cpu/model/matmul.hpp"
#include "sim/model/memory_model.hpp"
#include "tools/bench/cpu_bench.hpp"
#include "tools/bench/timing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace actorlm::bench {

namespace {

double machine_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 16.0 * (1ull << 30);
}

// Runs one step on every rank at once (ranks meet in their all-reduces); the step's time is the
// slowest rank's. Returns rank 0's result.
shard::StepResult run_step(std::vector<std::unique_ptr<shard::CpuShard>>& shards, const shard::Step& step,
                           double& seconds) {
  std::vector<double> took(shards.size());
  std::vector<shard::StepResult> results(shards.size());
  std::vector<std::exception_ptr> errors(shards.size());
  auto one = [&](std::size_t r) {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      results[r] = shards[r]->execute(step);
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } catch (...) {
      errors[r] = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  for (std::size_t r = 1; r < shards.size(); ++r) others.emplace_back(one, r);
  one(0);
  for (auto& t : others) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  seconds = *std::max_element(took.begin(), took.end());
  return std::move(results[0]);
}

std::uint32_t blocks_for(std::uint32_t tokens, std::uint32_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

// Device blocks one shape needs: its decoding sequences' (with room for the repeats) and its
// prefilling sequences' per repeat.
std::uint32_t blocks_needed(const CalibrationShape& s, std::uint32_t repeats, std::uint32_t block_size) {
  return s.batch * blocks_for(s.context + repeats + 2, block_size) +
         (s.chunk > 0 ? (repeats + 1) * s.prompts * blocks_for(s.offset + s.chunk, block_size) : 0);
}

kv::TokenId token_at(std::uint64_t i) { return static_cast<kv::TokenId>(100 + (i * 7919 + 13) % 40000); }

class ShapeRunner {
 public:
  ShapeRunner(std::vector<std::unique_ptr<shard::CpuShard>>& shards, std::uint32_t block_size)
      : shards_(shards), block_size_(block_size) {}

  // Writes every device block once: block 1 into block 0, block 0 into block 1, then block 1 into
  // every other block.
  void touch_cache(std::uint32_t blocks) {
    shard::Step s = next();
    for (std::uint32_t b = 0; b < blocks; ++b) s.copies.push_back({b == 1 ? 0u : 1u, b});
    double unused = 0;
    run_step(shards_, s, unused);
  }

  // The median of `repeats` timed steps of `shape`, and their spread.
  std::pair<double, double> measure(const CalibrationShape& shape, std::uint32_t repeats) {
    kv::BlockId next_block = 0;
    const auto table = [&](std::uint32_t tokens) {
      std::vector<kv::BlockId> t(blocks_for(tokens, block_size_));
      for (auto& b : t) b = next_block++;
      return t;
    };
    shard::SamplingParams greedy;
    greedy.temperature = 0.0f;
    std::vector<kv::SeqId> decoding;
    std::vector<kv::TokenId> last(shape.batch);
    shard::Step first = next();
    for (std::uint32_t i = 0; i < shape.batch; ++i) {
      const kv::SeqId id = ++seq_;
      decoding.push_back(id);
      first.added.push_back(new_seq(id, shape.context, greedy));
      first.seqs.push_back(work(id, shape.context - 1, shape.context, table(shape.context + repeats + 2)));
    }
    // Each repeat's prefills write blocks of their own, as new requests' would (not the ones the
    // last repeat left in the caches).
    std::vector<std::vector<kv::BlockId>> prefill_tables;
    for (std::uint32_t r = 0; shape.chunk > 0 && r < (repeats + 1) * shape.prompts; ++r)
      prefill_tables.push_back(table(shape.offset + shape.chunk));
    std::vector<kv::SeqId> prefilling;
    std::vector<double> times;
    double seconds = 0;
    if (!first.seqs.empty()) sample(run_step(shards_, first, seconds), decoding, last);
    for (std::uint32_t r = 0; r < repeats + (shape.batch == 0 ? 1 : 0); ++r) {
      shard::Step s = next();
      s.dropped = std::exchange(prefilling, {});
      for (std::uint32_t i = 0; shape.chunk > 0 && i < shape.prompts; ++i) {
        const kv::SeqId id = ++seq_;
        prefilling.push_back(id);
        s.added.push_back(new_seq(id, shape.offset + shape.chunk, greedy));
        s.seqs.push_back(work(id, shape.offset, shape.offset + shape.chunk, prefill_tables[r * shape.prompts + i]));
      }
      for (std::uint32_t i = 0; i < shape.batch; ++i) {
        const std::uint32_t at = shape.context + r;
        shard::SeqWork w = work(decoding[i], at, at + 1, {});
        w.appended = last[i];
        w.table_first = blocks_for(shape.context + repeats + 2, block_size_);  // unchanged
        s.seqs.push_back(std::move(w));
      }
      const shard::StepResult res = run_step(shards_, s, seconds);
      sample(res, decoding, last);
      // A prefill-only shape's first step warms up like a decode shape's untimed one.
      if (!(shape.batch == 0 && r == 0)) times.push_back(seconds);
    }
    shard::Step done = next();
    done.dropped = decoding;
    done.dropped.insert(done.dropped.end(), prefilling.begin(), prefilling.end());
    run_step(shards_, done, seconds);
    const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
    const double med = median(times);
    return {med, med > 0 ? (*hi - *lo) / med : 0};
  }

 private:
  shard::Step next() {
    shard::Step s;
    s.id = ++step_;
    s.block_size = block_size_;
    return s;
  }
  static shard::NewSeq new_seq(kv::SeqId id, std::uint32_t tokens, const shard::SamplingParams& sampling) {
    shard::NewSeq n;
    n.seq = id;
    n.request = id;
    n.prompt_len = tokens;
    n.sampling = sampling;
    for (std::uint32_t p = 0; p < tokens; ++p) n.tokens.push_back(token_at(id * 131 + p));
    return n;
  }
  // Computes [begin, end) and samples one token; `table`: the whole block table (a new sequence).
  static shard::SeqWork work(kv::SeqId id, std::uint32_t begin, std::uint32_t end, std::vector<kv::BlockId> table) {
    shard::SeqWork w;
    w.seq = id;
    w.begin = begin;
    w.end = end;
    w.table_first = 0;
    w.table_blocks = std::move(table);
    w.num_samples = 1;
    return w;
  }
  static void sample(const shard::StepResult& res, const std::vector<kv::SeqId>& decoding,
                     std::vector<kv::TokenId>& last) {
    for (const auto& t : res.tokens)
      for (std::size_t i = 0; i < decoding.size(); ++i)
        if (decoding[i] == t.seq) last[i] = t.token;
  }

  std::vector<std::unique_ptr<shard::CpuShard>>& shards_;
  std::uint32_t block_size_;
  std::uint64_t step_ = 0;
  kv::SeqId seq_ = 0;
};

// The engine's own time per step (planning, the block manager's round trip, the hops to and
// from the shard actor, the delivery): `requests` requests of 32 tokens decoding together through
// an in-process engine on the cpu backend, each step's wall time less the execution its shard
// measured (median over the steps). The simulator charges it once per step (step_overhead_us);
// the grid above times the shards alone.
double measure_engine_overhead(config::Config cfg, std::uint32_t requests) {
  caf::actor_system_config sc;
  serving::configure_actor_system(sc);
  caf::actor_system sys{sc};
  serving::ServedModel m(sys, cfg);
  engine::Completions done(sys, 1, {}, m.engine().actors().scheduler);
  const auto prompt = m.chat_prompt({{"user", "Count from one to twenty, please."}});
  for (std::uint32_t i = 1; i <= requests; ++i) {
    auto spec = m.request(i, prompt, 32);
    spec.stop_token_ids.clear();  // each runs its 32 tokens
    if (m.engine().submit(std::move(spec), done.sink()) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("calibrate: the engine refused a request of the overhead measurement");
  }
  if (!done.wait_finished(requests, std::chrono::minutes(5)))
    throw std::runtime_error("calibrate: the overhead measurement did not finish: " + done.failure());
  std::vector<double> own;
  for (const auto& r : m.engine().take_step_records())
    if (r.batch_size > 0 && r.shard_ns > 0) own.push_back(std::max<double>(0, double(r.end - r.start - r.shard_ns)) * 1e-9);
  if (own.empty()) throw std::runtime_error("calibrate: the overhead measurement recorded no step");
  return median(std::move(own));
}

std::string fixed_g(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::string CalibrationShape::describe() const {
  std::string s;
  if (chunk > 0) s = prompts > 1 ? fmt::format("prefill {} x {} @ {}", prompts, chunk, offset)
                                 : fmt::format("prefill {} @ {}", chunk, offset);
  if (batch > 0) s += fmt::format("{}decode {} x {}", s.empty() ? "" : " + ", batch, context);
  return s;
}

std::vector<CalibrationShape> default_calibration_grid() {
  std::vector<CalibrationShape> g;
  // Both sides of the F16 / BF16 kernels' threshold, where their step time changes regime.
  const auto small = static_cast<std::uint32_t>(kernels::cpu::default_panel_min_rows);
  const std::vector<std::uint32_t> chunks = {8u, 16u, 32u, 64u, small - 1, small, 128u, 256u, 512u};
  for (std::uint32_t c : chunks) g.push_back({.chunk = c});
  for (std::uint32_t o : {1024u, 2048u})
    for (std::uint32_t c : {16u, 128u, 512u}) g.push_back({.chunk = c, .offset = o});
  for (std::uint32_t ctx : {64u, 512u, 2048u})
    for (std::uint32_t b : {1u, 2u, 4u, 8u, 16u, 24u, 32u, 48u, 64u, small - 1, small, 128u})
      if (std::uint64_t{b} * ctx <= 65536) g.push_back({.batch = b, .context = ctx});
  // Several requests' prompts in one step, as a burst of arrivals gives the scheduler.
  // (768 tokens: a size between 512 and 1024, where the large-batch rate may start.)
  for (const auto& [n, c] : {std::pair{2u, 512u}, {4u, 128u}, {4u, 512u}, {6u, 128u}, {8u, 64u}, {8u, 256u}, {16u, 32u},
                             {16u, 128u}})
    g.push_back({.chunk = c, .prompts = n});
  for (std::uint32_t b : {4u, 16u, 48u}) g.push_back({.chunk = 128, .batch = b, .context = 256});
  g.push_back({.chunk = 512, .batch = 8, .context = 512});
  return g;
}

std::vector<CalibrationShape> quick_calibration_grid() {
  return {{.chunk = 16}, {.chunk = 128}, {.chunk = 64, .offset = 512}, {.batch = 1, .context = 32},
          {.batch = 8, .context = 32}, {.batch = 8, .context = 512}, {.batch = 40, .context = 64},
          {.batch = 2, .context = 1024}, {.chunk = 48, .batch = 4, .context = 128}, {.chunk = 32, .prompts = 3}};
}

Calibration run_calibration(const CalibrateOptions& o) {
  // The name becomes a bare TOML key ([gpu.NAME-tp1]).
  if (o.name.empty() || o.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") !=
                            std::string::npos)
    throw std::invalid_argument("calibrate: the name \"" + o.name +
                                "\" must be letters, digits, '-' and '_' (it becomes a catalogue key)");
  if (o.passes == 0) throw std::invalid_argument("calibrate: passes must be at least 1");
  const std::vector<CalibrationShape> grid = o.grid.empty() ? default_calibration_grid() : o.grid;
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  Calibration out;
  out.memory_bytes = machine_memory_bytes();
  const auto cores = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  // The read bandwidth, once per pass (the median is the machine's): over 1 GiB, and over a
  // buffer the size of the model's weights, which a large last-level cache may hold (reported,
  // not fitted).
  std::vector<double> bandwidths, weight_sized_bandwidths;
  const auto measure_bandwidths = [&] {
    bandwidths.push_back(measure_read_bandwidth(cores, std::size_t{1} << 30, 3));
    const auto weights = static_cast<std::size_t>(out.model.weight_bytes * double(out.model.params()));
    weight_sized_bandwidths.push_back(measure_read_bandwidth(cores, weights, 3));
    say(fmt::format("read bandwidth, {} thread(s): {:.1f} GB/s over 1 GiB, {:.1f} GB/s over {:.0f} MiB (the weights' size)",
                    cores, bandwidths.back() / 1e9, weight_sized_bandwidths.back() / 1e9, double(weights) / (1 << 20)));
  };
  // A degree's measured points: each shape's time as `pick` takes it from the passes.
  const auto points_of = [&](const std::vector<std::vector<double>>& per_pass, auto pick) {
    std::vector<CalibrationPoint> points;
    for (std::size_t i = 0; i < grid.size(); ++i) {
      CalibrationPoint p;
      p.shape = grid[i];
      p.measured_s = pick(per_pass[i]);
      p.pass_s = per_pass[i];
      const auto [lo, hi] = std::minmax_element(per_pass[i].begin(), per_pass[i].end());
      p.spread = p.measured_s > 0 ? (*hi - *lo) / p.measured_s : 0;
      points.push_back(std::move(p));
    }
    return points;
  };

  const bool default_degrees = o.tp.empty();
  std::vector<std::uint32_t> degrees = default_degrees ? std::vector<std::uint32_t>{1, 2} : o.tp;
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  if (degrees.front() != 1) degrees.insert(degrees.begin(), 0);  // 0: TP 1 loaded for the weights' bytes only

  // One tensor-parallel degree: its config, and its shards while they are loaded.
  struct Degree {
    std::uint32_t tp = 0;
    config::Config cfg;
    std::uint32_t blocks = 2;
    std::int32_t threads_per_rank = 1;
    std::vector<std::unique_ptr<shard::CpuShard>> shards;
    std::vector<std::vector<double>> per_pass;  // per shape: each pass's median step time
    std::vector<double> overheads;              // the engine's own time per step: one per pass, 3 at least
    bool skipped = false;                       // a default degree the model does not split over
  };
  std::vector<Degree> measured;
  // Loads a degree's shards and writes its KV blocks; false when a default degree does not
  // split the model (skipped, said).
  const auto load = [&](Degree& d) {
    shard::CpuBackend backend;
    try {
      backend = shard::load_cpu_shards(d.cfg, d.shards);
    } catch (const std::invalid_argument& e) {
      if (!default_degrees || d.tp <= 1) throw;
      say(fmt::format("tp {} skipped: {}", d.tp, e.what()));  // the model does not split over it
      return false;
    }
    if (out.model_path.empty()) {  // TP 1 (measured, or loaded for this alone) comes first
      out.model_path = backend.model_path;
      static_cast<model::Architecture&>(out.model) = backend.arch;
      out.model.key = "calibrated";
      out.model.name = backend.arch.describe();
      out.model.weight_bytes = double(backend.weight_bytes) / double(out.model.params());  // as held at TP 1
    }
    d.threads_per_rank = backend.threads_per_rank;
    return true;
  };
  for (std::uint32_t tp : degrees) {
    Degree d;
    d.tp = tp;
    d.cfg = o.config;
    d.cfg.engine.backend = config::Backend::cpu;
    d.cfg.engine.tensor_parallel_degree = std::max(tp, 1u);
    const auto block_size = static_cast<std::uint32_t>(d.cfg.cache.block_size);
    if (tp > 0)
      for (const auto& s : grid) d.blocks = std::max(d.blocks, blocks_needed(s, o.repeats, block_size));
    d.cfg.cache.num_gpu_blocks_override = d.blocks;
    d.cfg.cache.swap_space = 1.0 / 1024;
    d.cfg.model.max_model_len = std::min<std::int64_t>(d.cfg.model.max_model_len, std::int64_t{d.blocks} * block_size);
    if (tp == 0) {  // loaded for the weights' bytes alone
      (void)load(d);
      continue;
    }
    d.per_pass.resize(grid.size());
    measured.push_back(std::move(d));
  }

  // Passes over the whole grid, so that a burst of load elsewhere on the machine spoils one
  // pass of a few shapes rather than every repeat of one shape; each shape's time is the median
  // over passes of each pass's median. With between_passes the caller's own work runs between
  // two passes, while no shard is loaded.
  // Each degree is loaded for its own pass alone (one degree's memory and threads at a time); the
  // first load finds the default degrees the model does not split over (skipped).
  for (std::uint32_t pass = 0; pass < o.passes; ++pass) {
    if (pass > 0 && o.between_passes) o.between_passes(pass);
    for (auto& d : measured) {
      if (!load(d)) {
        if (pass > 0) throw std::logic_error("calibrate: tp " + std::to_string(d.tp) + " loaded once, then not");
        d.skipped = true;  // dropped below
        continue;
      }
      const auto block_size = static_cast<std::uint32_t>(d.cfg.cache.block_size);
      ShapeRunner runner(d.shards, block_size);
      say(fmt::format("tp {}: {} rank(s) of {} thread(s); writing {} KV blocks; pass {} of {} over {} shapes", d.tp,
                      d.tp, d.threads_per_rank, d.blocks, pass + 1, o.passes, grid.size()));
      runner.touch_cache(d.blocks);
      for (std::size_t i = 0; i < grid.size(); ++i) {
        d.per_pass[i].push_back(runner.measure(grid[i], o.repeats).first);
        if (pass + 1 == o.passes)
          say(fmt::format("tp {}: {:<32} {:9.2f} ms", d.tp, grid[i].describe(), median(d.per_pass[i]) * 1e3));
      }
      // The engine's own time per step, at least three measurements in all, spread over the
      // passes: one of 30-odd steps has read 15-25 % low now and then, and a low reading made
      // every simulated case of `bench fidelity` optimistic.
      d.shards.clear();  // their memory and threads, before the engine loads its own
      config::Config engine_cfg = o.config;
      engine_cfg.engine.backend = config::Backend::cpu;
      engine_cfg.engine.tensor_parallel_degree = d.tp;
      const std::uint32_t count = pass + 1 < o.passes ? 1 : std::max<std::uint32_t>(1, 3 - std::min(3u, pass));
      for (std::uint32_t i = 0; i < count; ++i) d.overheads.push_back(measure_engine_overhead(engine_cfg, 8));
    }
    std::erase_if(measured, [](const Degree& d) { return d.skipped; });
    measure_bandwidths();  // after the first load: the weights' size is known
    // Before the caller's work goes between the passes: a grid the fit refuses (a noisy first
    // pass) fails now, not after it.
    if (pass == 0 && o.passes > 1 && o.between_passes)
      for (const auto& d : measured)
        (void)fit_calibration(out.model, d.tp, static_cast<std::uint32_t>(d.cfg.cache.block_size), o.repeats,
                  points_of(d.per_pass, [](const std::vector<double>& v) { return v.front(); }), bandwidths.front(),
                  o.fit_overlap);
  }
  out.read_bytes_per_s = median(bandwidths);
  out.weight_sized_read_bytes_per_s = median(weight_sized_bandwidths);
  if (bandwidths.size() > 1)
    say(fmt::format("read bandwidth: {:.1f} GB/s over 1 GiB, {:.1f} GB/s over the weights' size (medians of {} passes)",
                    out.read_bytes_per_s / 1e9, out.weight_sized_read_bytes_per_s / 1e9, bandwidths.size()));

  for (auto& d : measured) {
    double first = 0, last = 0;
    for (const auto& times : d.per_pass) {
      first += times.front();
      last += times.back();
    }
    CalibrationFit f = fit_calibration(out.model, d.tp, static_cast<std::uint32_t>(d.cfg.cache.block_size), o.repeats,
                           points_of(d.per_pass, [](const std::vector<double>& v) { return median(v); }),
                           out.read_bytes_per_s, o.fit_overlap);
    f.pass_drift = first > 0 ? last / first - 1 : 0;
    if (o.passes > 1) {
      f.median_pass_spread = median_pass_spread(f.points);
    }
    const auto [lo, hi] = std::minmax_element(d.overheads.begin(), d.overheads.end());
    const double lo_us = *lo * 1e6, hi_us = *hi * 1e6;
    const std::size_t n = d.overheads.size();
    f.hardware.step_overhead = median(std::move(d.overheads));
    say(fmt::format("tp {}: the engine's own time per step (8 requests through an in-process engine, median of {}): "
                    "{:.0f} us ({:.0f}-{:.0f})", d.tp, n, f.hardware.step_overhead * 1e6, lo_us, hi_us));
    if (o.passes > 1)
      say(fmt::format("tp {}: the last pass's steps took {:+.1f} % longer than the first's", d.tp, 100 * f.pass_drift));
    if (f.median_pass_spread > noisy_pass_spread)
      say(fmt::format("tp {}: warning: the shapes' passes spread a median of {:.0f} % (max - min over median): the "
                      "machine's speed moved by more than +-5 % while it measured, and the fit's residuals "
                      "describe that as much as the model. More passes (--passes 5) or a quieter moment give steadier "
                      "figures", d.tp, 100 * f.median_pass_spread));
    f.threads_per_rank = d.threads_per_rank;
    f.hardware.key = fmt::format("{}-tp{}", o.name, d.tp);
    f.hardware.name = fmt::format("this machine's CPU, {} thread(s) per rank at TP {} (actorlm calibrate)",
                                  d.threads_per_rank, d.tp);
    f.hardware.link = d.tp > 1 ? "process memory (ranks in one process)" : "none (one rank)";
    f.hardware.memory_bytes = out.memory_bytes / d.tp;
    out.fits.push_back(std::move(f));
  }
  return out;
}

std::string hardware_catalogue_toml(const Calibration& c) {
  std::string t;
  t += "# Written by `actorlm calibrate`: the simulator's cost model fitted to the cpu backend's measured\n";
  t += "# step times on this machine. Use it with [sim] hardware_catalogue = \"THIS FILE\" and\n";
  t += "# sim.hardware = one of the keys below (the entry for the tensor-parallel degree simulated).\n";
  t += fmt::format("# Model: {} ({}), {:.4g} bytes per weight as held.\n", c.model_path, c.model.name,
                   c.model.weight_bytes);
  t += fmt::format("# Memory read bandwidth measured: {:.2f} GB/s (all threads).\n", c.read_bytes_per_s / 1e9);
  t += fmt::format("# The same over a buffer the size of the weights: {:.2f} GB/s (faster where the last-level "
                   "cache holds them; not used by the model).\n\n",
                   c.weight_sized_read_bytes_per_s / 1e9);
  t += "[runtime]\nframework_overhead_mib = 0\ncomm_buffer_mib = 0\n";
  for (const auto& f : c.fits) {
    const sim::Hardware& h = f.hardware;
    t += fmt::format("\n[gpu.{}]\n", h.key);
    t += fmt::format("name = \"{}\"\n", h.name);
    t += fmt::format("memory_mib = {:.0f}\n", h.memory_bytes / (1024.0 * 1024.0));
    t += fmt::format("bandwidth_gbps = {}         # measured read bandwidth / ranks\n", fixed_g(h.bandwidth / 1e9));
    t += fmt::format("fp16_tflops = {}             # fitted: {}\n", fixed_g(h.flops / 1e12),
                     h.small_gemm_rows > 0 ? fmt::format("GEMMs of {} rows or more", h.small_gemm_rows) : "every GEMM");
    t += fmt::format("link = \"{}\"\n", h.link);
    t += fmt::format("link_bandwidth_gbps = {}{}\n", fixed_g(h.link_bandwidth / 1e9), f.tp > 1 ? "    # fitted: all-reduce bytes" : "");
    t += "link_latency_us = 0             # not separable from kernel_launch_us on this grid\n";
    t += fmt::format("host_bandwidth_gbps = {}\n", fixed_g(h.host_bandwidth / 1e9));
    t += "compute_efficiency = 1\nmemory_efficiency = 1\nlink_efficiency = 1\n";
    t += fmt::format("kernel_launch_us = {}        # fitted: per operator\n", fixed_g(h.kernel_launch * 1e6));
    t += "cuda_context_mib = 0\n";
    t += fmt::format("memory_compute_overlap = {}   # {}: the share of the shorter of a kernel's memory and "
                     "arithmetic times hidden under the longer (0: their sum, 1: the longer alone)\n",
                     fixed_g(h.memory_overlap), f.overlap_fitted ? "fitted" : "not fitted (calibrate --fit-overlap)");
    if (h.step_overhead > 0)
      t += fmt::format("step_overhead_us = {}        # measured: the engine's own time per step\n",
                       fixed_g(h.step_overhead * 1e6));
    if (h.small_gemm_rows > 0) {
      t += fmt::format("small_gemm_rows = {}\n", h.small_gemm_rows);
      t += fmt::format("small_gemm_tflops = {}       # fitted\n", fixed_g(h.small_gemm_flops / 1e12));
    }
    if (h.gemm_weight_rate > 0)
      t += fmt::format("gemm_dequant_gweights_per_s = {}  # fitted\n", fixed_g(h.gemm_weight_rate / 1e9));
    if (h.large_batch_rows > 0) {
      t += fmt::format("large_batch_gemm_rows = {}   # the threshold that fitted best\n", h.large_batch_rows);
      t += fmt::format("large_batch_gemm_tflops = {}  # fitted\n", fixed_g(h.large_batch_flops / 1e12));
    }
    if (h.attention_flops > 0)
      t += fmt::format("attention_tflops = {}        # fitted: decode attention\n", fixed_g(h.attention_flops / 1e12));
    if (h.prefill_attention_flops > 0)
      t += fmt::format("prefill_attention_tflops = {}  # fitted\n", fixed_g(h.prefill_attention_flops / 1e12));
    for (const auto& d : f.dropped) t += "# fitted as free, so left out: " + d + "\n";
    t += fmt::format("# Fit over {} shapes, {} thread(s) per rank: rms relative error {:.1f} %, max {:.1f} %.\n",
                     f.points.size(), f.threads_per_rank, 100 * f.rms_relative_error, 100 * f.max_relative_error);
    if (f.median_pass_spread > 0)
      t += fmt::format("# The shapes' passes spread {:.1f} % (median over the shapes){}.\n", 100 * f.median_pass_spread,
                       f.median_pass_spread > noisy_pass_spread ? ": a noisy machine, the residuals are as much noise" : "");
    t += "#   shape                              measured ms  predicted ms   error  spread  costliest op\n";
    t += "#   (measured: median over passes of each pass's median step; spread: (max - min) / median over passes)\n";
    for (const auto& p : f.points)
      t += fmt::format("#   {:<34} {:11.3f} {:13.3f} {:+6.1f} % {:5.1f} %  {}\n", p.shape.describe(), p.measured_s * 1e3,
                       p.predicted_s * 1e3, 100 * (p.predicted_s / p.measured_s - 1), 100 * p.spread, p.bound);
  }
  return t;
}

}  // namespace actorlm::bench
