// The simulator's driver actor (sim_driver.hpp).
#include "sim/sim_driver.hpp"

#include "kernels/splitmix64.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace actorlm::sim::detail {

namespace {

using arrive_atom = caf::atom_constant<caf::atom("sim_arrive")>;  // open loop: next arrival due
using client_atom = caf::atom_constant<caf::atom("sim_client")>;  // closed loop: think time over
using driver_actor = scheduler::token_sink::extend<caf::reacts_to<arrive_atom>,
                                                   caf::reacts_to<client_atom>>;

// Drain the scheduler's records this often: it keeps at most 65,536 of each kind.
constexpr std::uint64_t drain_steps_every = 4096;     // sink batches (at most one per step)
constexpr std::uint64_t drain_requests_every = 8192;  // finished requests

struct DriverState {
  Run* run = nullptr;
  scheduler::scheduler_actor scheduler;
  std::int64_t t0 = 0;              // ns on the actor clock when the run started
  std::uint32_t vocab = 0;
  std::optional<ClosedLoopArrivals> closed;
  double think_s = 0;
  std::size_t next = 0;             // the next request to submit
  std::uint64_t batches = 0;        // sink batches since the last step-record drain
  std::uint64_t finishes = 0;       // finishes since the last request-record drain
  int final_drains = 0;             // replies still awaited once every request is done
  static inline const char* name = "sim_driver";
};
using driver_ptr = driver_actor::stateful_pointer<DriverState>;

std::int64_t now_ns(driver_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// A prompt no other request shares (so prefix caching finds nothing, as with real traffic of
// distinct prompts): a splitmix64 hash of (request, position), below the vocabulary size.
std::vector<scheduler::TokenId> make_prompt(std::uint64_t id, std::uint32_t length,
                                            std::uint32_t vocab) {
  std::vector<scheduler::TokenId> out(length);
  const std::uint64_t v = std::max<std::uint32_t>(vocab, 2);
  for (std::uint32_t i = 0; i < length; ++i) {
    const std::uint64_t z = kernels::splitmix64_mix(id * kernels::splitmix64_gamma + i + 1);
    out[i] = static_cast<scheduler::TokenId>(z % v);
  }
  return out;
}

// The run cannot end as it should: say why, and let the caller's loop go.
void stop(driver_ptr self, const std::string& why) {
  auto& run = *self->state.run;
  if (run.drained || run.stopped) return;
  run.stop_reason = why;
  run.stopped = true;
  self->quit();
}

void drain_failed(driver_ptr self, const caf::error& e) {
  stop(self, "the scheduler did not hand over its records: " + self->system().render(e));
}

void drain_steps(driver_ptr self, bool final = false) {
  self->request(self->state.scheduler, caf::infinite, scheduler::sched_records_atom::value)
      .then([self, final](std::vector<scheduler::StepRecord>& records) {
        auto& st = self->state;
        for (auto& r : records) {
          if (r.batch_size == 0) continue;  // bookkeeping only (frees, forks): no work ran
          r.start -= st.t0;
          r.end -= st.t0;
          st.run->steps.push_back(r);
        }
        if (final && --st.final_drains == 0) st.run->drained = true;
      },
      [self](const caf::error& e) { drain_failed(self, e); });
}

void drain_requests(driver_ptr self, bool final = false) {
  self->request(self->state.scheduler, caf::infinite, scheduler::sched_requests_atom::value)
      .then([self, final](const std::vector<scheduler::RequestRecord>& records) {
        auto& st = self->state;
        for (const auto& r : records) {
          if (r.id == 0 || r.id > st.run->timings.size()) continue;
          if (r.first_scheduled >= 0)
            st.run->timings[r.id - 1].first_scheduled_ns = r.first_scheduled - st.t0;
        }
        if (final && --st.final_drains == 0) st.run->drained = true;
      },
      [self](const caf::error& e) { drain_failed(self, e); });
}

void request_done(driver_ptr self);

void submit(driver_ptr self) {
  auto& st = self->state;
  const std::size_t i = st.next++;
  const WorkloadRequest& w = st.run->workload[i];
  RequestTiming& t = st.run->timings[i];
  t.id = i + 1;
  t.arrival_ns = now_ns(self) - st.t0;
  t.input_tokens = w.input_tokens;
  t.token_ns.reserve(w.output_tokens);
  scheduler::RequestSpec spec;
  spec.id = i + 1;
  spec.prompt = make_prompt(spec.id, w.input_tokens, st.vocab);
  // No eos: a request runs to its length, or stops early there as bench client asks a server to.
  spec.max_tokens = requested_max_tokens(w);
  if (stops_early(w)) {
    spec.stop_token_ids = {early_stop_token};
    spec.min_tokens = w.output_tokens - 1;
    spec.sampling.logit_bias = {{early_stop_token, early_stop_bias}};
  }
  self->request(st.scheduler, caf::infinite, std::move(spec), caf::actor_cast<scheduler::token_sink>(self))
      .then([self](scheduler::SubmitStatus status) {
        if (status == scheduler::SubmitStatus::accepted) return;
        // A failed request: the engine lost a component (a worker), or queue_full, too_long or
        // invalid.
        ++(status == scheduler::SubmitStatus::unavailable ? self->state.run->unavailable : self->state.run->refused);
        if (status == scheduler::SubmitStatus::too_long) ++self->state.run->too_long;
        if (status == scheduler::SubmitStatus::invalid) ++self->state.run->invalid;
        request_done(self);
      },
      [self](const caf::error&) {  // no answer at all: the scheduler is gone (its down message says why)
        ++self->state.run->unavailable;
        request_done(self);
      });
}

// Open loop: submit every request due by now, then wake up at the next arrival.
void arrivals_due(driver_ptr self) {
  auto& st = self->state;
  const std::int64_t now = now_ns(self) - st.t0;
  const auto& w = st.run->workload;
  while (st.next < w.size() && w[st.next].arrival_ns <= now) submit(self);
  if (st.next < w.size())
    self->delayed_send(self, std::chrono::nanoseconds(w[st.next].arrival_ns - now),
                       arrive_atom::value);
}

void request_done(driver_ptr self) {
  auto& st = self->state;
  Run& run = *st.run;
  ++run.done;
  if (st.closed && st.next < run.workload.size()) {  // this request's client sends its next one
    if (st.think_s > 0)
      self->delayed_send(self, std::chrono::nanoseconds(std::llround(st.think_s * 1e9)),
                         client_atom::value);
    else
      submit(self);
  }
  if (run.done == run.workload.size()) {  // collect what the scheduler still holds
    st.final_drains = 2;
    drain_steps(self, true);
    drain_requests(self, true);
  }
}

driver_actor::behavior_type driver(driver_ptr self, Run* run, scheduler::scheduler_actor sched,
                                   std::int64_t t0, std::uint32_t vocab,
                                   std::optional<ClosedLoopArrivals> closed) {
  auto& st = self->state;
  st.run = run;
  st.scheduler = std::move(sched);
  st.t0 = t0;
  st.vocab = vocab;
  st.closed = closed;
  if (closed) {
    st.think_s = closed->think_time_s;
    const std::size_t first = std::min<std::size_t>(closed->clients, run->workload.size());
    for (std::size_t c = 0; c < first; ++c) submit(self);
  } else if (!run->workload.empty()) {
    arrivals_due(self);
  }
  if (run->workload.empty()) run->drained = true;
  // Requests in flight would never finish without the scheduler: the run stops, saying why.
  self->monitor(st.scheduler);
  self->set_down_handler([self](const caf::down_msg& dm) {
    stop(self, "the engine's scheduler stopped: " + self->system().render(dm.reason));
  });
  return {
      [self](const scheduler::SinkBatch& batch) {
        auto& st = self->state;
        const std::int64_t now = now_ns(self) - st.t0;
        for (const auto& tok : batch.tokens) {
          if (tok.sample != 0) continue;
          RequestTiming& t = st.run->timings[tok.request - 1];
          if (t.first_token_ns < 0) t.first_token_ns = now;
          t.token_ns.push_back(now);
        }
        if (++st.batches >= drain_steps_every) {
          st.batches = 0;
          drain_steps(self);
        }
        for (const auto& f : batch.finished) {
          if (f.sample != 0) continue;
          RequestTiming& t = st.run->timings[f.request - 1];
          t.finished_ns = now;
          // An abort or an engine failure (a lost worker, a failed step) is a request that did not complete.
          t.completed = f.reason != scheduler::FinishReason::abort && f.reason != scheduler::FinishReason::error;
          if (f.reason == scheduler::FinishReason::error && ++st.run->errored == 1)
            st.run->first_error = batch.error.empty() ? "(no reason given)" : batch.error;
          t.output_tokens = static_cast<std::uint32_t>(t.token_ns.size());
          if (++st.finishes >= drain_requests_every) {
            st.finishes = 0;
            drain_requests(self);
          }
          request_done(self);
        }
      },
      [self](arrive_atom) { arrivals_due(self); },
      [self](client_atom) {
        if (self->state.next < self->state.run->workload.size()) submit(self);
      },
  };
}

}  // namespace

caf::actor spawn_driver(caf::actor_system& sys, Run* run, scheduler::scheduler_actor sched, std::int64_t t0,
                        std::uint32_t vocab, const WorkloadSpec& workload) {
  const auto* loop = std::get_if<ClosedLoopArrivals>(&workload.arrival);
  auto drv = sys.spawn(driver, run, std::move(sched), t0, vocab, loop ? std::optional(*loop) : std::nullopt);
  // Whatever ends the driver early (an exception in a handler, an unexpected exit) ends the run.
  drv->attach_functor([run](const caf::error& reason) {
    if (run->drained || run->stopped) return;
    run->stop_reason = "the simulation's driver stopped: " + to_string(reason);
    run->stopped = true;
  });
  return caf::actor_cast<caf::actor>(drv);
}

void print_progress(const std::string& label, std::size_t done, std::size_t total, double t_s, bool wall) {
  constexpr int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu requests, %.1f s %s", label.c_str(), filled,
               "##############################", width - filled, "", done, total, t_s, wall ? "elapsed" : "simulated");
  std::fflush(stderr);
}

}  // namespace actorlm::sim::detail
