#include "tools/bench/scheduler_bench.hpp"

#include "actors/engine/engine.hpp"
#include "actors/kv/block_manager_batch.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "tools/bench/timing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace actorlm::bench {

namespace {

// Asks the shard for the serialized size of one step (the bytes it would cost on the network).
struct ByteProbe {
  std::atomic<bool> wanted{false};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> full_bytes{0};  // the same step in the full-table format
};

// The shard protocol before incremental steps (until commit 4d94c36): every step carried each
// sequence's whole block table, its tokens to compute, request, sample and sampling parameters.
// Kept here only to report what the delta protocol saves; the fields are serialized as they were.
struct FullSeqWork {
  kv::SeqId seq = 0;
  shard::RequestId request = 0;
  std::uint32_t sample = 0;
  std::vector<kv::TokenId> tokens;
  std::uint32_t first_position = 0;
  std::vector<kv::BlockId> block_table;
  std::uint32_t num_samples = 0;
  bool padding = false;
  shard::SamplingParams sampling;
  std::vector<kv::TokenId> output_tokens;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FullSeqWork& x) {
  return f(caf::meta::type_name("SeqWork"), x.seq, x.request, x.sample, x.tokens, x.first_position,
           x.block_table, x.num_samples, x.padding, x.sampling, x.output_tokens);
}

// A decode step in the full format: the tokens computed, and a table covering them (the
// serializer writes integers at fixed width, so the block ids' values do not matter).
std::uint64_t full_format_bytes(caf::actor_system& sys, const shard::Step& step) {
  std::vector<FullSeqWork> seqs;
  for (const auto& w : step.seqs) {
    FullSeqWork f;
    f.seq = w.seq;
    f.tokens.assign(w.end - w.begin, 1);
    f.first_position = w.begin;
    f.block_table.assign((w.end + step.block_size - 1) / step.block_size, 0);
    f.num_samples = w.num_samples;
    seqs.push_back(std::move(f));
  }
  std::vector<char> buf;
  caf::binary_serializer out{sys, buf};
  auto id = step.id;
  auto block_size = step.block_size;
  auto copies = step.copies;
  auto swap_out = step.swap_out, swap_in = step.swap_in;
  out(id, block_size, seqs, copies, swap_out, swap_in);
  return buf.size();
}

// A shard that costs nothing: it answers every step at once with token 1 for each sample.
// It isolates the runtime's own overhead; it is part of this benchmark, not a backend.
shard::shard_actor::behavior_type zero_cost_shard(shard::shard_actor::pointer self, std::shared_ptr<ByteProbe> probe) {
  return {[self, probe](const shard::Step& step) {
    if (probe->wanted.exchange(false)) {
      std::vector<char> buf;
      caf::binary_serializer out{self->system(), buf};
      auto copy = step;
      out(copy);
      probe->bytes = buf.size();
      probe->full_bytes = full_format_bytes(self->system(), step);
    }
    shard::StepResult r;
    r.step_id = step.id;
    for (const auto& w : step.seqs)
      for (std::uint32_t j = 0; j < w.num_samples; ++j) r.tokens.push_back({w.seq, 1, 0.0f, {}});
    return r;
  }};
}

// Counts the tokens it receives, and the finishes (none is expected while measuring: every
// request runs longer than the measurement), keeping the last one's reason.
struct SinkCounts {
  std::atomic<std::uint64_t> tokens{0};
  std::atomic<std::uint64_t> finished{0};
  std::atomic<int> last_reason{-1};
};

scheduler::token_sink::behavior_type counting_sink(scheduler::token_sink::pointer, std::shared_ptr<SinkCounts> n) {
  return {[n](const scheduler::SinkBatch& b) {
    n->tokens.fetch_add(b.tokens.size(), std::memory_order_relaxed);
    n->finished.fetch_add(b.finished.size(), std::memory_order_relaxed);
    if (!b.finished.empty()) n->last_reason = static_cast<int>(b.finished.back().reason);
  }};
}

SchedulerBenchPoint measure(caf::actor_system& sys, std::uint32_t running, std::uint32_t steps) {
  config::Config cfg;
  cfg.engine.batching = config::Batching::paged;
  cfg.scheduler.max_num_seqs = running;
  cfg.scheduler.max_num_batched_tokens = running * 16;
  // Long outputs, so nobody finishes before the measured iterations are over, however long
  // submitting every request takes.
  // (A loaded machine once took longer to submit 256 requests than 2,048 steps last: the first
  // ones finished and the wait for all of them to run never ended.)
  const std::uint32_t max_tokens = steps + 16384;
  const std::uint32_t max_len = 16 + max_tokens;
  cfg.model.max_model_len = max_len;
  const std::uint32_t blocks = running * (max_len / 16 + 2);
  // Shared with the actors: the engine and the sink stop asynchronously, so a last step or batch
  // may reach them after this function has returned.
  auto probe = std::make_shared<ByteProbe>();
  engine::Engine eng(sys, cfg, {blocks, 0}, [probe](caf::actor_system& s, std::uint32_t, std::uint32_t) {
    return s.spawn(zero_cost_shard, probe);
  });
  auto counts = std::make_shared<SinkCounts>();
  auto sink = sys.spawn(counting_sink, counts);
  // Every request sent before any answer is awaited: one blocking submit after another took
  // long enough on a loaded machine (a round trip each, while the first requests decoded alone
  // at a few microseconds a step) for the first ones to finish before the last was in.
  {
    caf::scoped_actor self{sys};
    for (std::uint32_t i = 0; i < running; ++i) {
      scheduler::RequestSpec spec;
      spec.id = i + 1;
      spec.prompt.assign(16, kv::TokenId(i % 1000));
      spec.max_tokens = max_tokens;
      self->send(eng.actors().scheduler, std::move(spec), sink);
    }
    std::uint32_t answered = 0;
    self->receive_for(answered, running)([&](scheduler::SubmitStatus status) {
      if (status != scheduler::SubmitStatus::accepted)
        throw std::runtime_error("bench scheduler: a request was refused (status " +
                                 std::to_string(static_cast<int>(status)) + ")");
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto wait_until = [&](auto done, const char* what) {
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        const auto st = eng.stats();
        throw std::runtime_error(std::string("bench scheduler: timed out waiting for ") + what +
                                 " (running " + std::to_string(st.counts.running) + ", waiting " +
                                 std::to_string(st.counts.waiting) + ", steps " + std::to_string(st.steps) +
                                 ", free blocks " + std::to_string(st.kv.device_free) + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  // Wait until every request decodes, drop what came before, then measure `steps` iterations.
  wait_until([&] {
    const auto st = eng.stats();
    if (st.counts.running + st.counts.waiting + st.counts.swapped < running)
      throw std::runtime_error("bench scheduler: requests finished before all were running (running " +
                               std::to_string(st.counts.running) + ", waiting " + std::to_string(st.counts.waiting) +
                               ", swapped " + std::to_string(st.counts.swapped) + ", steps " +
                               std::to_string(st.steps) + ", finishes seen " + std::to_string(counts->finished.load()) +
                               ", last reason " + std::to_string(counts->last_reason.load()) +
                               (st.healthy ? "" : ", engine failed: " + st.failure) + ")");
    return st.counts.running == running && st.counts.waiting == 0;
  }, "every request to run");
  eng.take_step_records();
  const std::uint64_t start = eng.stats().steps;
  wait_until([&] { return eng.stats().steps >= start + steps + 1; }, "the measured steps");
  auto records = eng.take_step_records();
  // One more decode step, serialized.
  const std::uint64_t probed = eng.stats().steps;
  probe->wanted = true;
  wait_until([&] { return eng.stats().steps >= probed + 2 && !probe->wanted; }, "a serialized step");
  std::vector<double> gaps;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const auto& a = records[i - 1];
    const auto& b = records[i];
    if (a.decode_tokens == running && a.prefill_tokens == 0 && b.decode_tokens == running)
      gaps.push_back(double(b.start - a.start) / 1e3);
  }
  SchedulerBenchPoint p;
  p.running = running;
  p.steps = static_cast<std::uint32_t>(gaps.size());
  p.step_bytes = probe->bytes;
  p.step_bytes_full_format = probe->full_bytes;
  if (!gaps.empty()) {
    auto sorted = gaps;
    std::sort(sorted.begin(), sorted.end());
    p.p90_us = sorted[sorted.size() * 9 / 10];
    p.step_overhead_us = median(std::move(gaps));
  }
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  return p;
}

// The same decode steps through the policies directly: no actors, no threads, no messages.
double policy_step_us(std::uint32_t running, std::uint32_t steps) {
  scheduler::SchedulerOptions o;
  o.max_num_seqs = running;
  o.max_num_batched_tokens = running * 16;
  const std::uint32_t max_tokens = steps + 64;
  o.max_model_len = 16 + max_tokens;
  o.num_device_blocks = running * (o.max_model_len / 16 + 2);
  scheduler::Scheduler policy(o);
  kv::BlockManagerOptions bo;
  bo.num_device_blocks = o.num_device_blocks;
  bo.block_size = o.block_size;
  kv::BlockManager bm(bo);
  for (std::uint32_t i = 0; i < running; ++i) {
    scheduler::RequestSpec spec;
    spec.id = i + 1;
    spec.prompt.assign(16, kv::TokenId(i % 1000));
    spec.max_tokens = max_tokens;
    if (policy.submit(std::move(spec), 0) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("bench scheduler: the policy refused a request");
  }
  std::vector<double> times;
  for (std::uint32_t k = 0; k < steps + 2; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    auto req = policy.plan(k);
    if (!req) throw std::runtime_error("bench scheduler: the policy planned nothing");
    const auto step = policy.on_reserved(kv::apply_reservation(bm, *req));
    shard::StepResult r;
    r.step_id = step.id;
    for (const auto& w : step.seqs)
      for (std::uint32_t j = 0; j < w.num_samples; ++j) r.tokens.push_back({w.seq, 1, 0.0f, {}});
    policy.on_executed(r, k);
    const auto t1 = std::chrono::steady_clock::now();
    if (k >= 2) times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());  // decode only
  }
  return median(std::move(times));
}

}  // namespace

std::vector<SchedulerBenchPoint> run_scheduler_bench(const SchedulerBenchOptions& opt) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{opt.threads});  // CAF's default is 4 threads
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  std::vector<SchedulerBenchPoint> out;
  for (auto n : opt.running) {
    if (opt.progress) opt.progress(std::to_string(n) + " running sequences, " +
                                   std::to_string(opt.steps) + " decode steps");
    out.push_back(measure(sys, n, opt.steps));
    out.back().policy_step_us = policy_step_us(n, opt.steps);
  }
  return out;
}

}  // namespace actorlm::bench
