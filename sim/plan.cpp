// run_plan: the grid's simulations on a pool of threads, then costs, the Pareto front and
// the answer.
#include "sim/plan.hpp"

#include "sim/report.hpp"
#include "sim/backend/sim_backend.hpp"
#include "sim/simulation.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>

namespace actorlm::sim {

namespace {

double latency_of(const Summary& s, const std::string& metric) {
  if (metric == "ttft_p90") return s.ttft_s.p90;
  if (metric == "tpot_p90") return s.tpot_s.p90;
  return s.e2e_s.p90;
}

// Cost, latency and SLO verdict of a finished run.
void assess(PlanOutcome& o, const Catalogue& cat, const Slo& slo, const std::string& metric) {
  const Instance& inst = cat.instance(o.point.instance);
  o.replica_price_per_hour = inst.price_per_hour * o.point.degree / inst.gpus;
  const double tokens_per_hour = o.summary.output_tokens_per_s * 3600.0;
  o.cost_per_million = tokens_per_hour > 0 ? o.replica_price_per_hour / tokens_per_hour * 1e6
                                           : std::numeric_limits<double>::infinity();
  o.latency_s = latency_of(o.summary, metric);
  double ratio = 0;
  if (slo.ttft_s) ratio = std::max(ratio, o.summary.ttft_s.p90 / *slo.ttft_s);
  if (slo.tpot_s) ratio = std::max(ratio, o.summary.tpot_s.p90 / *slo.tpot_s);
  if (slo.e2e_s) ratio = std::max(ratio, o.summary.e2e_s.p90 / *slo.e2e_s);
  o.slo_ratio = ratio;
  o.meets_slo = o.summary.failed == 0 && o.summary.completed > 0 && ratio <= 1.0;
}

bool ran(const PlanOutcome& o) { return o.skipped.empty() && o.summary.failed == 0; }

}  // namespace

std::string PlanPoint::label() const {
  const auto stages = config.engine.pipeline_parallel_degree;
  std::string s = instances_label(instance, nodes) + " " +
                  (stages > 1 ? "TP " + std::to_string(config.engine.tensor_parallel_degree) + " x " +
                                    std::to_string(stages) + " stages"
                              : (config.sim.parallelism == config::SimParallelism::layers ? "layers " : "TP ") +
                                    std::to_string(degree)) +
                  " " + regime;
  if (config.engine.batching == config::Batching::dynamic)
    s += " batch " + std::to_string(config.scheduler.batch_size);
  else
    s += " seqs " + std::to_string(config.scheduler.max_num_seqs) + " tokens " +
         std::to_string(config.scheduler.max_num_batched_tokens);
  return s;
}

namespace {

// One point per batch setting of `base`'s regime: dynamic regimes take each batch_size, the
// others each max_num_seqs x max_num_batched_tokens (an empty list keeps the regime's value).
void add_batch_settings(const PlanSpec& p, const PlanPoint& base, std::vector<PlanPoint>& out) {
  const auto& sched = base.config.scheduler;
  if (base.config.engine.batching == config::Batching::dynamic) {
    std::vector<std::uint32_t> sizes = p.batch_size;
    if (sizes.empty()) sizes.push_back(static_cast<std::uint32_t>(sched.batch_size));
    for (auto b : sizes) {
      PlanPoint pt = base;
      pt.config.scheduler.batch_size = b;
      out.push_back(std::move(pt));
    }
    return;
  }
  std::vector<std::uint32_t> seqs = p.max_num_seqs, tokens = p.max_num_batched_tokens;
  if (seqs.empty()) seqs.push_back(static_cast<std::uint32_t>(sched.max_num_seqs));
  if (tokens.empty()) tokens.push_back(static_cast<std::uint32_t>(sched.max_num_batched_tokens));
  for (auto n : seqs)
    for (auto t : tokens) {
      PlanPoint pt = base;
      pt.config.scheduler.max_num_seqs = n;
      pt.config.scheduler.max_num_batched_tokens = t;
      out.push_back(std::move(pt));
    }
}

}  // namespace

std::vector<PlanPoint> plan_grid(const Scenario& s) {
  if (!s.plan) throw std::invalid_argument(s.file + ": no [plan] table");
  const PlanSpec& p = *s.plan;
  const Catalogue& cat = catalogue_for(s.base);
  std::vector<std::uint32_t> degrees = p.tensor_parallel_degrees, node_counts = p.nodes;
  if (degrees.empty()) degrees.push_back(static_cast<std::uint32_t>(s.base.engine.tensor_parallel_degree));
  if (node_counts.empty()) node_counts.push_back(static_cast<std::uint32_t>(s.base.sim.nodes));
  std::vector<PlanPoint> out;
  for (const auto& inst : p.instances) {
    const std::uint32_t gpus = cat.instance(inst).gpus;
    for (std::uint32_t nodes : node_counts)
      for (std::uint32_t d : degrees) {
        for (const auto& regime : s.regimes) {
          if (!p.regimes.empty() && std::find(p.regimes.begin(), p.regimes.end(), regime.name) == p.regimes.end())
            continue;
          // A regime's stages (engine.pipeline_parallel_degree) of d GPUs each.
          const auto replica_gpus = d * static_cast<std::uint32_t>(regime.config.engine.pipeline_parallel_degree);
          // A replica over more nodes than it needs, or over unequal ones, is not a configuration
          // anyone would pick (the same GPUs, more network): not tried.
          if (nodes > 1 && (replica_gpus % nodes != 0 || replica_gpus <= (nodes - 1) * gpus)) continue;
          PlanPoint base{inst, replica_gpus, nodes, regime.name, regime.config};
          base.config.sim.instance = inst;
          base.config.sim.nodes = nodes;
          base.config.engine.tensor_parallel_degree = d;
          add_batch_settings(p, base, out);
        }
      }
  }
  return out;
}

PlanResult run_plan(const Scenario& s, const PlanOptions& opt) {
  const auto points = plan_grid(s);
  const PlanSpec& p = *s.plan;
  const ScenarioWorkload* w = &s.workloads.front();
  for (const auto& x : s.workloads)
    if (x.name == p.workload) w = &x;
  WorkloadSpec spec = w->spec;
  if (p.requests) spec.requests = *p.requests;
  return run_plan(points, spec, w->name, s.slo, s.seed, p.latency, opt);
}

PlanResult run_plan(const std::vector<PlanPoint>& points, const WorkloadSpec& spec,
                    std::string workload_name, const Slo& slo, std::uint64_t seed,
                    const std::string& latency, const PlanOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  PlanResult r;
  r.latency = latency;
  r.slo = slo;
  r.workload = workload_name + ": " + to_string(spec);
  r.jobs = opt.jobs ? opt.jobs : std::max(1u, std::thread::hardware_concurrency());
  r.outcomes.resize(points.size());

  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  std::mutex progress_mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < points.size();) {
      PlanOutcome& o = r.outcomes[i];
      o.point = points[i];
      try {
        const Catalogue cat = catalogue_for(o.point.config);
        SimulationOptions so;
        so.summary.slo = slo;
        so.keep_records = false;
        const auto res = simulate(o.point.config, cat, spec, seed, so);
        o.summary = res.summary;
        o.wall_seconds = res.wall_seconds;
        assess(o, cat, slo, latency);
      } catch (const std::invalid_argument& e) {  // does not fit, does not split...
        o.skipped = e.what();
      } catch (const std::exception& e) {
        o.skipped = std::string("failed: ") + e.what();
      }
      if (opt.progress) {
        std::lock_guard lock(progress_mutex);
        opt.progress(++done, points.size());
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < std::min<std::size_t>(r.jobs, points.size()); ++j) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  // Pareto front: a run is dominated when another is no costlier and no slower, and better in
  // one. Runs with failed requests have no meaningful latency and stay off the front.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i)
    if (ran(r.outcomes[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = r.outcomes[a];
    const auto& y = r.outcomes[b];
    return std::tie(x.cost_per_million, x.latency_s) < std::tie(y.cost_per_million, y.latency_s);
  });
  double best_latency = std::numeric_limits<double>::infinity();
  for (std::size_t i : order)
    if (r.outcomes[i].latency_s < best_latency) {
      best_latency = r.outcomes[i].latency_s;
      r.pareto.push_back(i);
    }
  for (std::size_t i : order)
    if (r.outcomes[i].meets_slo) {
      r.cheapest = i;
      break;
    }
  if (!r.cheapest) {
    for (std::size_t i = 0; i < r.outcomes.size(); ++i)
      if (r.outcomes[i].skipped.empty() && r.outcomes[i].summary.completed > 0 &&
          (!r.closest || r.outcomes[i].slo_ratio < r.outcomes[*r.closest].slo_ratio))
        r.closest = i;
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

std::string plan_report(const PlanResult& r) {
  std::string out = "workload " + r.workload + "\nSLO (p90):";
  if (r.slo.ttft_s) out += " TTFT <= " + format_fixed(*r.slo.ttft_s, 3) + " s";
  if (r.slo.tpot_s) out += " TPOT <= " + format_fixed(*r.slo.tpot_s * 1e3, 1) + " ms";
  if (r.slo.e2e_s) out += " E2E <= " + format_fixed(*r.slo.e2e_s, 3) + " s";
  if (!r.slo.ttft_s && !r.slo.tpot_s && !r.slo.e2e_s) out += " none";
  out += "\n\n";
  const auto line = [&](const PlanOutcome& o) {
    std::string l = o.point.label();
    l.resize(std::max<std::size_t>(l.size(), 48), ' ');
    l += "  $" + format_fixed(o.cost_per_million, 2) + "/M tok  " + r.latency + " " +
         format_fixed(o.latency_s, 3) + " s  TTFT p90 " + format_fixed(o.summary.ttft_s.p90, 3) +
         " s  TPOT p90 " + format_fixed(o.summary.tpot_s.p90 * 1e3, 1) + " ms  " +
         format_fixed(o.summary.output_tokens_per_s, 0) + " tok/s";
    if (o.summary.failed) l += "  " + std::to_string(o.summary.failed) + " failed";
    return l + (o.meets_slo ? "  meets SLO" : "") + "\n";
  };
  std::size_t skipped = 0;
  out += "runs (" + std::to_string(r.outcomes.size()) + "):\n";
  for (const auto& o : r.outcomes)
    if (o.skipped.empty()) out += "  " + line(o);
    else ++skipped;
  if (skipped) {
    out += "\nskipped, does not fit (" + std::to_string(skipped) + "):\n";
    for (const auto& o : r.outcomes)
      if (!o.skipped.empty()) out += "  " + o.point.label() + ": " + o.skipped + "\n";
  }
  out += "\nPareto front (cost per million output tokens vs " + r.latency + "):\n";
  for (std::size_t i : r.pareto) out += "  " + line(r.outcomes[i]);
  if (r.cheapest) {
    out += "\ncheapest meeting the SLO: " + line(r.outcomes[*r.cheapest]);
  } else {
    out += "\nno configuration meets the SLO";
    if (r.closest)
      out += "; closest (p90 at " + format_fixed(r.outcomes[*r.closest].slo_ratio, 2) +
             "x the SLO): " + line(r.outcomes[*r.closest]);
    else
      out += "\n";
  }
  return out;
}

std::string plan_csv(const PlanResult& r) {
  std::string out = "instance,nodes,parallelism,degree,regime,batch_size,max_num_seqs,max_num_batched_tokens,"
                    "fits,replica_price_per_hour,output_tokens_per_s,cost_per_million,ttft_p90_s,"
                    "tpot_p90_s,e2e_p90_s,failed,meets_slo,pareto\n";
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    const auto& c = o.point.config;
    const bool fits = o.skipped.empty();
    out += o.point.instance + "," + std::to_string(o.point.nodes) + "," +
           (c.engine.pipeline_parallel_degree > 1
                ? "stages" + std::to_string(c.engine.pipeline_parallel_degree) + "-of-tp" +
                      std::to_string(c.engine.tensor_parallel_degree)
                : std::string(config::to_string(c.sim.parallelism))) +
           "," + std::to_string(o.point.degree) + "," + o.point.regime + "," +
           std::to_string(c.scheduler.batch_size) + "," + std::to_string(c.scheduler.max_num_seqs) + "," +
           std::to_string(c.scheduler.max_num_batched_tokens) + "," + (fits ? "1" : "0") + ",";
    if (fits)
      out += format_fixed(o.replica_price_per_hour, 4) + "," + format_fixed(o.summary.output_tokens_per_s, 3) +
             "," + format_fixed(o.cost_per_million, 4) + "," + format_fixed(o.summary.ttft_s.p90, 6) + "," +
             format_fixed(o.summary.tpot_s.p90, 6) + "," + format_fixed(o.summary.e2e_s.p90, 6) + "," +
             std::to_string(o.summary.failed) + "," + (o.meets_slo ? "1" : "0") + ",";
    else
      out += ",,,,,,,0,";
    out += std::find(r.pareto.begin(), r.pareto.end(), i) != r.pareto.end() ? "1\n" : "0\n";
  }
  return out;
}

}  // namespace actorlm::sim
