#pragma once
// Drives the scheduler policy against the real BlockManager through apply_reservation (the
// block-manager actor's own code path) and a scripted model: the token a sample produces at
// position p is a fixed function of (request, sample, p), so the exact output of every request
// is known in advance, with or without preemption. Checks the step-level invariants as it goes.

#include "actors/kv/block_manager.hpp"
#include "actors/kv/block_manager_batch.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/shard/sequence_state.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <random>

namespace actorlm::scheduler::testing {

inline constexpr TokenId stop_token = 10;

inline TokenId scripted_token(RequestId r, std::uint32_t sample, std::uint32_t position) {
  std::uint64_t h = r * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(sample) << 32) ^ position;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return TokenId(10 + h % 150);  // stop_token about once in 150
}

// How often the interesting paths ran, so a test can require that they did.
struct Coverage {
  std::uint64_t swap_outs = 0, swap_ins = 0, copies = 0, prefix_hits = 0, padding_rows = 0;
  std::uint64_t chunks = 0, forks = 0, no_room = 0;
  std::uint64_t cached_reported = 0;  // requests whose tokens report prefix-cache hits
  std::uint64_t prompt_logprobs = 0;  // requests whose prompt log-probabilities came
};

// The whole output a sample produces: scripted tokens up to the first stop token (included)
// or max_tokens.
inline std::vector<TokenId> scripted_output(RequestId id, std::uint32_t sample,
                                            std::uint32_t prompt_len, std::uint32_t max_tokens) {
  std::vector<TokenId> v;
  for (std::uint32_t k = 0; k < max_tokens; ++k) {
    v.push_back(scripted_token(id, sample, prompt_len + k));
    if (v.back() == stop_token) break;
  }
  return v;
}

// The scripted log-probability of the prompt token at `position`.
inline float scripted_prompt_logprob(std::uint32_t position) { return -0.5f - float(position); }

// What a scripted shard answers to a step, once `held` has applied it: the scripted token of
// every sample it asks for.
inline shard::StepResult scripted_result(const shard::SequenceState& held, const shard::Step& step,
                                         std::int64_t duration_ns) {
  shard::StepResult r;
  r.step_id = step.id;
  r.duration_ns = duration_ns;
  for (const auto& w : step.seqs) {
    if (w.padding) continue;
    const auto* s = held.find(w.seq);
    BOOST_REQUIRE(s != nullptr);
    if (s->sampling.prompt_logprobs >= 0)  // position p's row scores prompt token p + 1
      for (std::uint32_t p = w.begin; p < w.end && p + 1 < s->prompt_len; ++p)
        r.prompt_logprobs.push_back({w.seq, p + 1, s->tokens[p + 1], scripted_prompt_logprob(p + 1), {}, 1});
    if (w.num_samples == 0) continue;
    for (std::uint32_t j = 0; j < w.num_samples; ++j) {
      const std::uint32_t sample = w.num_samples > 1 ? j : s->sample;
      r.tokens.push_back({w.seq, scripted_token(s->request, sample, w.end), -1.0f, {}});
    }
  }
  return r;
}

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;  // per sample
  std::vector<int> finishes;                 // per sample: how many finish events
  std::vector<FinishReason> reasons;
};

class Harness {
 public:
  Harness(SchedulerOptions o) : sched_(o), bm_(bm_options(o)) {}

  static kv::BlockManagerOptions bm_options(const SchedulerOptions& o) {
    kv::BlockManagerOptions b;
    b.num_device_blocks = o.num_device_blocks;
    b.num_host_blocks = o.num_host_blocks;
    b.block_size = o.block_size;
    b.watermark = o.watermark;
    b.mode = o.kv_mode();
    return b;
  }

  Scheduler& scheduler() { return sched_; }
  kv::BlockManager& block_manager() { return bm_; }
  Time now() const { return now_; }
  void advance_to(Time t) { now_ = std::max(now_, t); }
  const std::map<RequestId, Outcome>& outcomes() const { return out_; }
  const std::map<RequestId, RequestSpec>& specs() const { return specs_; }
  std::uint64_t steps() const { return steps_; }
  const Coverage& coverage() const { return cov_; }
  std::uint32_t max_running_seqs() const { return max_running_; }

  SubmitStatus submit(RequestSpec spec) {
    const auto st = sched_.submit(spec, now_);
    if (st == SubmitStatus::accepted) {
      auto& o = out_[spec.id];
      o.tokens.assign(spec.n, {});
      o.finishes.assign(spec.n, 0);
      o.reasons.assign(spec.n, FinishReason::length);
      specs_[spec.id] = std::move(spec);
    }
    return st;
  }

  void abort(RequestId id) { record(sched_.abort(id, now_)); }
  // Aborts `id` during the next step, between the block manager's reservation and its answer
  // reaching the scheduler (as an abort message can overtake the reply in the actor).
  void abort_during_next_reservation(RequestId id) { abort_in_flight_.push_back(id); }

  // Runs one step if there is one to run now; returns false otherwise.
  bool step(Time step_ns = 1'000'000) {
    auto req = sched_.plan(now_);
    if (!req) return false;
    const auto reply = kv::apply_reservation(bm_, *req);
    cov_.swap_outs += !reply.swap_out.empty();
    cov_.swap_ins += !reply.swap_in.empty();
    cov_.copies += reply.copies.size();
    cov_.forks += req->forks.size();
    cov_.no_room += reply.no_room.size();
    for (const auto& a : reply.admitted) cov_.prefix_hits += a.cached_tokens > 0;
    for (RequestId id : abort_in_flight_) abort(id);
    abort_in_flight_.clear();
    const auto st = sched_.on_reserved(reply);
    for (const auto& w : st.seqs) {
      cov_.padding_rows += w.padding;
      cov_.chunks += !w.padding && w.num_samples == 0;
    }
    // Prompt log-probabilities are asked only until they are out (not of a later recompute).
    for (const auto& n : st.added)
      if (n.sampling.prompt_logprobs >= 0) BOOST_REQUIRE(!prompt_logprobs_seen_.contains(n.request));
    const auto& held = shard_.apply(st);  // the deltas, as every shard rank folds them
    check_step(st, held);
    const auto result = scripted_result(shard_, st, step_ns);
    now_ += step_ns;
    const auto ev = sched_.on_executed(result, now_);
    for (const auto& t : ev.tokens) {
      out_[t.request].tokens[t.sample].push_back(t.token);
      check_cached_report(t);
      check_prompt_logprobs(t);
    }
    record(ev.finished);
    ++steps_;
    return true;
  }

  // Expected output of a sample run to completion: scripted tokens up to the first stop token
  // (included) or max_tokens.
  std::vector<TokenId> expected(RequestId id, std::uint32_t sample) const {
    const auto& spec = specs_.at(id);
    return scripted_output(id, sample, static_cast<std::uint32_t>(spec.prompt.size()), spec.max_tokens);
  }

  // Frees what the scheduler still owes the block manager.
  void drain_frees() {
    for (auto s : sched_.take_pending_frees())
      if (bm_.contains(s)) bm_.free(s);
  }

 private:
  void record(const std::vector<FinishEvent>& fin) {
    for (const auto& f : fin) {
      out_[f.request].finishes[f.sample]++;
      out_[f.request].reasons[f.sample] = f.reason;
    }
  }

  // Every token of a request reports the same prefix-cache hit, that of its first admission
  // (a readmission after a recompute preemption may hit more, or less, of the cache): whole
  // blocks, and never the prompt's last token.
  void check_cached_report(const TokenEvent& t) {
    const auto [it, first] = cached_.try_emplace(t.request, t.cached_prompt_tokens);
    BOOST_REQUIRE_EQUAL(it->second, t.cached_prompt_tokens);
    if (!first) return;
    BOOST_REQUIRE_EQUAL(t.cached_prompt_tokens % sched_.options().block_size, 0u);
    BOOST_REQUIRE_LT(t.cached_prompt_tokens, specs_.at(t.request).prompt.size());
    cov_.cached_reported += t.cached_prompt_tokens > 0;
  }

  // A request that asks for its prompt's log-probabilities gets them once, whole and in order,
  // on its first token, and computed all of its prompt (no prefix-cache hit at first admission).
  void check_prompt_logprobs(const TokenEvent& t) {
    const auto& spec = specs_.at(t.request);
    const bool first = prompt_logprobs_seen_.insert(t.request).second;
    if (spec.sampling.prompt_logprobs < 0 || !first) {
      BOOST_REQUIRE(t.prompt_logprobs.empty());
      return;
    }
    BOOST_REQUIRE_EQUAL(t.cached_prompt_tokens, 0u);
    BOOST_REQUIRE_EQUAL(t.prompt_logprobs.size(), spec.prompt.size() - 1);
    for (std::uint32_t p = 1; p < spec.prompt.size(); ++p) {
      const auto& e = t.prompt_logprobs[p - 1];
      BOOST_REQUIRE_EQUAL(e.position, p);
      BOOST_REQUIRE_EQUAL(e.token, spec.prompt[p]);
      BOOST_REQUIRE_EQUAL(e.logprob, scripted_prompt_logprob(p));
    }
    ++cov_.prompt_logprobs;
  }

  // The property the incremental protocol must keep: a shard that rebuilds every sequence from
  // the steps' deltas holds exactly the block manager's table and tokens for each one it runs.
  void check_step(const shard::Step& st, const std::vector<const shard::SequenceState::Sequence*>& held) {
    const auto& o = sched_.options();
    std::uint32_t tokens = 0, seqs = 0;
    for (std::size_t i = 0; i < st.seqs.size(); ++i) {
      const auto& w = st.seqs[i];
      ++seqs;
      if (w.padding) continue;
      tokens += w.end - w.begin;
      BOOST_REQUIRE(w.begin < w.end);
      BOOST_REQUIRE(bm_.contains(w.seq));
      const auto table = bm_.block_table(w.seq);
      const auto& s = *held[i];
      BOOST_REQUIRE(std::equal(s.block_table.begin(), s.block_table.end(), table.begin(), table.end()));
      const auto slots = bm_.tokens(w.seq);
      BOOST_REQUIRE(w.end <= slots.size());
      BOOST_REQUIRE(w.end <= s.tokens.size());
      BOOST_REQUIRE(std::equal(s.tokens.begin(), s.tokens.begin() + w.end, slots.begin()));
      if (w.num_samples > 0) BOOST_REQUIRE_EQUAL(w.end, s.tokens.size());  // samples the next token
    }
    // Nothing dropped is still in use, and the shard holds no more than the live sequences.
    for (auto id : st.dropped) BOOST_REQUIRE(held_ids_.erase(id) == 1);
    for (const auto& n : st.added) BOOST_REQUIRE(held_ids_.insert(n.seq).second);
    BOOST_REQUIRE_EQUAL(held_ids_.size(), shard_.size());
    if (o.batching != config::Batching::dynamic) {
      BOOST_REQUIRE(seqs <= o.max_num_seqs);
      BOOST_REQUIRE(tokens <= o.max_num_batched_tokens);
    }
    const auto stats = bm_.stats();
    BOOST_REQUIRE(stats.device_used <= stats.device_total);
    max_running_ = std::max(max_running_, seqs);
  }

  Scheduler sched_;
  kv::BlockManager bm_;
  std::map<RequestId, std::uint32_t> cached_;  // per request: the prefix-cache hit its tokens report
  std::set<RequestId> prompt_logprobs_seen_;   // requests that had a token
  shard::SequenceState shard_;
  std::set<kv::SeqId> held_ids_;
  Time now_ = 0;
  std::map<RequestId, Outcome> out_;
  std::map<RequestId, RequestSpec> specs_;
  std::uint64_t steps_ = 0;
  std::uint32_t max_running_ = 0;
  std::vector<RequestId> abort_in_flight_;
  Coverage cov_;
};

}  // namespace actorlm::scheduler::testing
