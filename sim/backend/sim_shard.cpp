// The sim shard: per step, one pass over the sequences (their shape for the cost model and
// their tokens), and the answer scheduled on the actor clock for the moment the modelled step
// ends. Nothing else allocates.
#include "sim/backend/sim_shard.hpp"

#include "kernels/splitmix64.hpp"

#include <caf/actor_clock.hpp>
#include <caf/actor_system.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/response_promise.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace actorlm::sim {

namespace {

// splitmix64 (a bijection with good avalanche) chained over the coordinates: the sequence's
// (request, request seed, sim seed) into a key, kept per sequence by SimSequences, then the
// key with (sample, position): two rounds per token.
std::uint64_t draw_key(std::uint64_t sim_seed, std::uint64_t request_seed, shard::RequestId request) {
  return kernels::splitmix64(sim_seed ^ kernels::splitmix64(request_seed ^ kernels::splitmix64(request)));
}

std::uint64_t draw_hash(std::uint64_t key, std::uint32_t sample, std::uint64_t position) {
  return kernels::splitmix64(key ^ kernels::splitmix64((std::uint64_t{sample} << 40) ^ position));
}

__extension__ using uint128 = unsigned __int128;  // GCC and Clang; __extension__: no -Wpedantic note

kv::TokenId token_of(std::uint64_t h, std::uint32_t vocab_size, std::int32_t avoid) {
  // Lemire's multiply-shift maps the hash onto [0, vocab_size) with one multiplication (the
  // 64-bit modulo it replaces was most of a draw); as uniform for a vocabulary far below 2^64.
  auto token = static_cast<std::uint32_t>((static_cast<uint128>(h) * vocab_size) >> 64);
  if (avoid >= 0 && token == static_cast<std::uint32_t>(avoid) && vocab_size > 1)
    token = (token + 1) % vocab_size;
  return static_cast<kv::TokenId>(token);
}

}  // namespace

kv::TokenId sim_token(std::uint64_t sim_seed, std::uint64_t request_seed, shard::RequestId request,
                      std::uint32_t sample, std::uint64_t position, std::uint32_t vocab_size,
                      std::int32_t avoid) {
  return token_of(draw_hash(draw_key(sim_seed, request_seed, request), sample, position), vocab_size, avoid);
}

namespace {

// The EOS is never sampled, unless a positive logit bias asks for it.
bool eos_banned(const SimShardModel& m, const SimSequences::Seq& s) {
  return m.eos_token_id >= 0 && std::none_of(s.logit_bias.begin(), s.logit_bias.end(), [&](const shard::LogitBias& b) {
           return b.token == m.eos_token_id && b.bias > 0;
         });
}

// The tokens a draw may not return now: the EOS (eos_banned) and, before min_tokens, the stop
// ids. Sorted, within the vocabulary.
std::vector<kv::TokenId> banned_tokens(const SimShardModel& m, const SimSequences::Seq& s, std::uint32_t generated) {
  std::vector<kv::TokenId> out;
  if (generated < s.min_tokens) out = s.min_tokens_stop_ids;
  if (eos_banned(m, s)) out.push_back(m.eos_token_id);
  std::erase_if(out, [&](kv::TokenId t) { return t < 0 || static_cast<std::uint32_t>(t) >= m.vocab_size; });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool contains(const std::vector<kv::TokenId>& sorted, kv::TokenId t) {
  return std::binary_search(sorted.begin(), sorted.end(), t);
}

// The j-th id (from 0, by id) of [0, vocab) that is not in `excluded` (sorted, unique, in range).
kv::TokenId nth_not_excluded(std::uint64_t j, const std::vector<kv::TokenId>& excluded) {
  std::uint64_t t = j;
  for (kv::TokenId e : excluded) {  // each excluded id at or below the answer pushes it up by one
    if (static_cast<std::uint64_t>(e) > t) break;
    ++t;
  }
  return static_cast<kv::TokenId>(t);
}

// -log(vocab): a uniform draw's log-probability.
float uniform_logprob_of(std::uint32_t vocab_size) { return -std::log(static_cast<float>(vocab_size)); }

// sim_draw with the sequence's draw key and the uniform log-probability given: simulate_step
// keeps the key per sequence and takes the logarithm once per step (a logf per token was ~1 %
// of a simulation).
SimDraw draw(const SimShardModel& m, const SimSequences::Seq& s, std::uint64_t key, float uniform_logprob,
             std::uint32_t sample, std::uint64_t position, std::uint32_t generated) {
  // The common case, with nothing to allocate: no bias and no stop ids banned now, so the EOS
  // alone is banned, which sim_token already avoids.
  if (s.logit_bias.empty() && (generated >= s.min_tokens || s.min_tokens_stop_ids.empty()))
    return {token_of(draw_hash(key, sample, position), m.vocab_size, m.eos_token_id), uniform_logprob};
  // banned_tokens' set, asked token by token (nothing to allocate).
  const bool stops_masked = generated < s.min_tokens;
  const bool eos = eos_banned(m, s);
  const auto is_banned = [&](kv::TokenId t) {
    return (stops_masked && contains(s.min_tokens_stop_ids, t)) || (eos && t == m.eos_token_id);
  };
  // Without a bias that counts now (none, or every biased token banned, as a capped workload's
  // stop token is until its length): sim_token's draw, moved past every banned id.
  if (std::all_of(s.logit_bias.begin(), s.logit_bias.end(), [&](const shard::LogitBias& b) {
        return b.token < 0 || static_cast<std::uint32_t>(b.token) >= m.vocab_size || is_banned(b.token);
      })) {
    auto t = static_cast<std::uint32_t>(token_of(draw_hash(key, sample, position), m.vocab_size, m.eos_token_id));
    for (std::uint32_t tries = 0; is_banned(static_cast<kv::TokenId>(t)) && tries < m.vocab_size; ++tries)
      t = (t + 1) % m.vocab_size;
    return {static_cast<kv::TokenId>(t), uniform_logprob};
  }
  const auto banned = banned_tokens(m, s, generated);
  // Weights: e^bias for a biased token, 1 for the others, 0 for the banned.
  std::vector<kv::TokenId> excluded = banned;  // from the unit-weight rest: banned or biased
  std::vector<std::pair<kv::TokenId, double>> biased;
  double biased_mass = 0;
  for (const auto& b : s.logit_bias) {
    if (b.token < 0 || static_cast<std::uint32_t>(b.token) >= m.vocab_size) continue;
    excluded.push_back(b.token);
    if (contains(banned, b.token)) continue;
    biased.emplace_back(b.token, std::exp(double(b.bias)));
    biased_mass += biased.back().second;
  }
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  const double rest = double(m.vocab_size) - double(excluded.size());
  const double mass = biased_mass + rest;
  if (!(mass > 0)) return {m.eos_token_id >= 0 ? m.eos_token_id : 0, 0.0f};  // nothing drawable: not reachable
  const std::uint64_t h = draw_hash(key, sample, position);
  const double x = double(h >> 11) * 0x1.0p-53 * mass;  // uniform in [0, mass)
  double below = 0;
  for (const auto& [token, w] : biased) {
    below += w;
    if (x < below) return {token, static_cast<float>(std::log(w / mass))};
  }
  if (rest < 1) return {biased.back().first, static_cast<float>(std::log(biased.back().second / mass))};  // rounding
  const auto j = std::min(static_cast<std::uint64_t>(std::max(0.0, x - biased_mass)), static_cast<std::uint64_t>(rest) - 1);
  return {nth_not_excluded(j, excluded), static_cast<float>(-std::log(mass))};
}

}  // namespace

SimDraw sim_draw(const SimShardModel& m, const SimSequences::Seq& s, std::uint32_t sample, std::uint64_t position,
                 std::uint32_t generated) {
  return draw(m, s, draw_key(m.seed, s.seed, s.request), uniform_logprob_of(m.vocab_size), sample, position,
              generated);
}

StepShape step_shape(const shard::Step& step, const SimSequences* seqs) {
  StepShape s;
  std::uint32_t longest = 1;
  bool padded = false;
  for (const auto& w : step.seqs) {
    if (w.padding) {
      padded = true;
      continue;
    }
    if (w.end <= w.begin) continue;
    longest = std::max(longest, w.end);
    const bool scores = seqs != nullptr && [&] {
      const auto& q = seqs->at(w.seq);
      return shard::scores_prompt(w, q.prompt_logprobs, q.prompt_len);
    }();
    s.add(w.end - w.begin, w.end, w.num_samples > 0, scores);
  }
  if (padded)
    for (const auto& w : step.seqs)
      if (w.padding) s.add(1, longest, true);
  s.swapped_blocks = static_cast<std::uint32_t>(step.swap_out.size() + step.swap_in.size());
  s.copied_blocks = static_cast<std::uint32_t>(step.copies.size());
  return s;
}

void SimSequences::apply(const shard::Step& step, std::uint64_t sim_seed) {
  for (kv::SeqId id : step.dropped) seqs_.erase(id);
  for (const auto& n : step.added) {
    Seq s{n.request, n.sample, n.prompt_len, n.sampling.seed, n.sampling.logprobs, n.sampling.top_logprobs,
          n.sampling.min_tokens, n.sampling.min_tokens_stop_ids, n.sampling.logit_bias, 0,
          n.sampling.prompt_logprobs, {}};
    s.draw_key = draw_key(sim_seed, s.seed, s.request);
    if (s.prompt_logprobs >= 0) s.prompt.assign(n.tokens.begin(), n.tokens.begin() + n.prompt_len);
    std::sort(s.min_tokens_stop_ids.begin(), s.min_tokens_stop_ids.end());
    std::sort(s.logit_bias.begin(), s.logit_bias.end(),
              [](const shard::LogitBias& a, const shard::LogitBias& b) { return a.token < b.token; });
    seqs_[n.seq] = std::move(s);
  }
}

const SimSequences::Seq& SimSequences::at(kv::SeqId id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    throw std::invalid_argument("sim shard: step for unknown sequence " + std::to_string(id));
  return it->second;
}

shard::StepResult simulate_step(const SimShardModel& m, SimSequences& seqs, const shard::Step& step) {
  seqs.apply(step, m.seed);
  shard::StepResult r;
  r.step_id = step.id;
  const double seconds = m.cost.step_seconds(step_shape(step, &seqs));
  r.duration_ns = std::max<std::int64_t>(1, std::llround(seconds * 1e9));
  std::size_t n = 0;
  for (const auto& w : step.seqs)
    if (!w.padding) n += w.num_samples;
  r.tokens.reserve(n);
  const float uniform_logprob = uniform_logprob_of(m.vocab_size);
  // The model draws every token uniformly: a prompt token has the same log-probability as a draw,
  // and a token's alternatives are the ids after it.
  const auto alternatives = [&](kv::TokenId token, std::uint32_t asked, float logprob) {
    std::vector<shard::TopLogprob> top;
    const std::uint32_t k = std::min({asked, shard::max_top_logprobs, m.vocab_size});
    for (std::uint32_t i = 0; i < k; ++i)
      top.push_back({static_cast<kv::TokenId>((std::uint32_t(token) + i) % m.vocab_size), logprob});
    return top;
  };
  for (const auto& w : step.seqs) {
    if (w.padding) continue;
    const auto& s = seqs.at(w.seq);
    if (shard::scores_prompt(w, s.prompt_logprobs, s.prompt_len))  // position p scores token p + 1
      for (std::uint32_t p = w.begin; p < w.end && p + 1 < s.prompt_len; ++p)
        r.prompt_logprobs.push_back({w.seq, p + 1, s.prompt[p + 1], uniform_logprob,
                                     alternatives(s.prompt[p + 1], static_cast<std::uint32_t>(s.prompt_logprobs), uniform_logprob),
                                     1});  // every token alike: none is more likely
    const std::uint64_t position = w.end;  // of the new token
    const std::uint32_t generated = w.end > s.prompt_len ? w.end - s.prompt_len : 0;
    for (std::uint32_t j = 0; j < w.num_samples; ++j) {
      const std::uint32_t sample = w.num_samples > 1 ? j : s.sample;
      const SimDraw d = draw(m, s, s.draw_key, uniform_logprob, sample, position, generated);
      shard::SampledToken t{w.seq, d.token, d.logprob, {}};
      if (s.logprobs) t.top = alternatives(t.token, s.top_logprobs, d.logprob);
      r.tokens.push_back(std::move(t));
    }
  }
  return r;
}

namespace {

using sim_shard_actor = caf::typed_actor<caf::replies_to<shard::Step>::with<shard::StepResult>>;

struct SimShardState {
  std::shared_ptr<const SimShardModel> model;
  SimSequences seqs;
  static inline const char* name = "sim_shard";
};

// Answers the request being handled at `t` on the actor clock (virtual or wall): the clock
// delivers the response itself, so a step costs one clock entry and no message to the shard.
// Steps may overlap; each answer comes at its own time.
caf::result<shard::StepResult> answer_at(sim_shard_actor::pointer self, caf::actor_clock::time_point t,
                                         shard::StepResult r) {
  auto rp = self->make_response_promise();  // marks the request answered
  if (!rp.pending()) return caf::delegated<shard::StepResult>{};  // an anonymous send: nobody waits
  if (!rp.stages().empty())  // the engine asks directly; a forwarding chain would need its own path
    return caf::make_error(caf::sec::runtime_error, "sim shard: a forwarded step request");
  self->clock().schedule_message(
      t, rp.source(),
      caf::make_mailbox_element(self->ctrl(), rp.id().response_id(), {}, std::move(r)));
  return caf::delegated<shard::StepResult>{};
}

bool faulty(const SimShardModel& m, std::uint32_t rank, const shard::Step& step) {
  return m.fault != config::SimFault::none && step.id == m.fault_step && rank == m.fault_rank;
}

caf::error fault_error(const SimShardModel& m, std::uint32_t rank) {
  return caf::make_error(caf::sec::runtime_error, "sim.fault = \"" + std::string(config::to_string(m.fault)) +
                                                      "\" injected by rank " + std::to_string(rank) +
                                                      " at step " + std::to_string(m.fault_step));
}

sim_shard_actor::behavior_type sim_shard(sim_shard_actor::stateful_pointer<SimShardState> self,
                                         std::uint32_t rank, std::shared_ptr<const SimShardModel> model) {
  self->state.model = std::move(model);
  return {
      [self, rank](const shard::Step& step) -> caf::result<shard::StepResult> {
        const SimShardModel& m = *self->state.model;
        if (rank != 0) {
          if (faulty(m, rank, step)) self->quit(fault_error(m, rank));  // only "exit" passes the config check
          return shard::StepResult{step.id, {}, {}, 0};
        }
        shard::StepResult r;
        try {
          r = simulate_step(*self->state.model, self->state.seqs, step);
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
        if (faulty(m, rank, step)) {
          if (m.fault == config::SimFault::hang) return self->make_response_promise<shard::StepResult>();  // never kept
          if (m.fault == config::SimFault::exit) self->quit(fault_error(m, rank));
          return fault_error(m, rank);
        }
        const auto end = self->clock().now() + std::chrono::nanoseconds(r.duration_ns);
        return answer_at(self, end, std::move(r));
      },
  };
}

}  // namespace

shard::shard_actor spawn_sim_shard(caf::actor_system& sys, std::uint32_t rank,
                                   std::shared_ptr<const SimShardModel> model) {
  return caf::actor_cast<shard::shard_actor>(sys.spawn(sim_shard, rank, std::move(model)));
}

}  // namespace actorlm::sim
