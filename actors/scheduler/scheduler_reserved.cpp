// on_reserved(): folds the block manager's answer into the mirror and builds the shard step.
#include "actors/scheduler/scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace actorlm::scheduler {

void Scheduler::drop_from_shards(Seq& s) {
  if (!s.on_shards) return;
  shard_drops_.push_back(s.id);
  s.on_shards = false;
}

void Scheduler::add_work(const Request& r, Seq& s, const Work& w, shard::Step& step) {
  shard::SeqWork& out = step.seqs.emplace_back();
  out.seq = s.id;
  out.padding = w.padding;
  if (w.padding) return;
  const auto held = static_cast<std::uint32_t>(s.tokens.size());
  // A sequence runs at most one token ahead of the shards (the one its last step sampled);
  // anything else (not expected) is sent again whole rather than trusted.
  if (s.on_shards && held > s.shard_tokens + 1) drop_from_shards(s);
  if (!s.on_shards) {
    step.added.push_back({s.id, r.spec.id, s.sample, static_cast<std::uint32_t>(r.spec.prompt.size()), s.tokens,
                          r.spec.sampling});
    // The prompt's log-probabilities are asked of the sequence that computes the prompt first,
    // until they are delivered: not of a fork, nor of a recompute after their delivery.
    if (r.prompt_logprobs_sent) step.added.back().sampling.prompt_logprobs = -1;
    s.on_shards = true;
    s.shard_tokens = held;
    s.table_sent = 0;
  } else if (held == s.shard_tokens + 1) {
    out.appended = w.last_token;
    s.shard_tokens = held;
  }
  out.begin = w.begin;
  out.end = w.end;
  out.table_first = s.table_sent;
  out.table_blocks.assign(s.table.begin() + s.table_sent, s.table.end());
  s.table_sent = static_cast<std::uint32_t>(s.table.size());
  out.num_samples = w.num_samples;
}

shard::Step Scheduler::on_reserved(const kv::ReserveReply& reply) {
  if (!in_flight_) throw std::logic_error("Scheduler::on_reserved: no step planned");
  auto seq_of = [&](SeqId id) -> Seq* {
    auto it = owner_.find(id);  // owner_ holds live requests' sequences only
    return it == owner_.end() ? nullptr : &requests_[it->second.first].seqs[it->second.second];
  };
  // 1. Block tables.
  std::unordered_set<SeqId> whole_table;  // sequences whose whole table was (re)sent
  // A request aborted while the reservation was out is gone, but the block manager allocated
  // for it meanwhile (an admission, a fork, growth, a swap-in): those sequences go back with
  // the next reservation, or their blocks would stay in use for good.
  std::unordered_set<SeqId> orphans;
  for (const auto& d : reply.tables)
    if (Seq* s = seq_of(d.seq)) {
      s->table.resize(d.first);
      s->table.insert(s->table.end(), d.blocks.begin(), d.blocks.end());
      s->table_sent = std::min(s->table_sent, d.first);
      if (d.first == 0) whole_table.insert(d.seq);
    } else {
      orphans.insert(d.seq);
    }
  for (const auto& a : reply.admitted)
    if (seq_of(a.seq) == nullptr) orphans.insert(a.seq);
  for (SeqId id : orphans)
    if (std::find(pending_frees_.begin(), pending_frees_.end(), id) == pending_frees_.end()) pending_frees_.push_back(id);
  const std::unordered_set<SeqId> no_room(reply.no_room.begin(), reply.no_room.end());
  std::unordered_set<RequestId> dropped;  // requests whose work leaves this step

  // 2. Forks applied now; those refused or not sent are retried with the next reservation.
  std::erase_if(pending_forks_, [&](const kv::ForkOp& f) {
    if (no_room.contains(f.child) || !whole_table.contains(f.child)) return false;
    if (Seq* c = seq_of(f.child)) {
      c->allocated = true;
      c->slots = c->computed = static_cast<std::uint32_t>(c->tokens.size()) - 1;
      c->maybe_shared_tail = true;
    }
    return true;
  });
  // A finished parent whose forks are all made is freed now.
  std::erase_if(lending_, [&](SeqId id) {
    Seq* s = seq_of(id);
    if (s == nullptr || !s->allocated) return true;  // retired or preempted meanwhile
    if (std::any_of(pending_forks_.begin(), pending_forks_.end(),
                    [&](const kv::ForkOp& f) { return f.parent == id; }))
      return false;
    pending_frees_.push_back(id);
    s->allocated = false;
    return true;
  });
  // 3. A refused swap-out leaves the request running (preempted again if still needed).
  // (A request aborted while the reservation was out is gone: find() skips it.)
  for (RequestId id : swapping_out_) {
    Request* r = find(id);
    if (r == nullptr || no_room.empty()) continue;
    if (std::any_of(r->seqs.begin(), r->seqs.end(),
                    [&](const Seq& s) { return s.allocated && no_room.contains(s.id); })) {
      remove_from(swapped_, r->slot);
      r->state = State::running;
      running_.push_back(r->slot);
    }
  }
  // 4. A refused swap-in (no whole table came back) leaves the request swapped.
  for (RequestId id : swapping_in_) {
    Request* r = find(id);
    if (r == nullptr) continue;
    const bool in = std::all_of(r->seqs.begin(), r->seqs.end(), [&](const Seq& s) {
      return !s.allocated || whole_table.contains(s.id);
    });
    if (in) continue;
    remove_from(running_, r->slot);
    r->state = State::swapped;
    swapped_.push_back(r->slot);
    dropped.insert(id);
  }
  // 5. Admissions: a refused one goes back to waiting, freeing any of its samples that got in.
  for (const Work& w : planned_) {
    if (!w.admit || no_room.empty() || dropped.contains(w.request)) continue;
    Request* live_request = live(w);
    if (live_request == nullptr) continue;
    Request& r = *live_request;
    if (!no_room.contains(r.seqs[w.sample].id)) continue;
    dropped.insert(w.request);
    for (Seq& s : r.seqs) {
      if (!s.finished && !no_room.contains(s.id)) pending_frees_.push_back(s.id);
      drop_from_shards(s);
      s.allocated = false;
      s.slots = s.computed = 0;
      s.table.clear();
    }
    remove_from(running_, r.slot);
    remove_from(batch_, r.slot);
    r.state = State::waiting;
    waiting_.push_back(r.slot);
  }
  for (const auto& a : reply.admitted)
    if (Seq* s = seq_of(a.seq);
        s != nullptr && !dropped.contains(requests_[owner_.at(a.seq).first].spec.id)) {
      s->allocated = true;
      s->slots = static_cast<std::uint32_t>(s->tokens.size());
      s->computed = std::max(s->computed, a.cached_tokens);
      Request& r = requests_[owner_.at(a.seq).first];
      if (!r.admitted_once) {
        r.admitted_once = true;
        r.record.cached_tokens = a.cached_tokens;
      }
    }
  // 6. The step, in one pass over the planned work: refused growth sits this step out,
  // prefix-cache hits shorten prefills, and the rest goes to the shards as deltas.
  shard::Step step;
  step.id = step_id_;
  step.block_size = opt_.block_size;
  step.copies = reply.copies;
  step.swap_out = reply.swap_out;
  step.swap_in = reply.swap_in;
  step.seqs.reserve(planned_.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < planned_.size(); ++i) {
    // In place, not a copy: a copy stalled on store forwarding for every sequence (see
    // plan_request_work). Entries dropped here lie past `kept` and are cut off below.
    Work& w = planned_[i];
    Request* r = live(w);
    if (r == nullptr || (!dropped.empty() && dropped.contains(w.request))) continue;
    Seq& s = r->seqs[w.sample];
    if (!w.padding) {
      if (!no_room.empty() && no_room.contains(s.id)) continue;
      // In locals, stored once: w.begin written and then read back with w.end as one 8-byte
      // load (GCC's vectorized compare) stalled on store forwarding for every sequence.
      const std::uint32_t end = w.end;
      std::uint32_t begin = std::max(w.begin, s.computed);
      if (begin >= end && w.num_samples == 0) continue;
      if (begin >= end) begin = end - 1;  // a sampling position is always computed
      w.begin = begin;
      const bool decode = !w.admit && end - begin == 1 && s.computed + 1 == s.tokens.size() &&
                          s.generated > 0;
      if (end > s.slots) s.maybe_shared_tail = false;  // grew: any copy-on-write is done
      s.slots = std::max(s.slots, end);
      s.computed = end;
      (decode ? current_.decode_tokens : current_.prefill_tokens) += end - begin;
    }
    add_work(*r, s, w, step);
    if (kept != i) planned_[kept] = w;
    ++kept;
  }
  planned_.resize(kept);
  // Sequences to forget ride on a step the shards will receive (the actor skips empty ones).
  if (!step.seqs.empty() || !step.copies.empty() || !step.swap_out.empty() || !step.swap_in.empty())
    step.dropped.swap(shard_drops_);
  kv_available_ = reply.stats.device_free + reply.stats.device_cached;
  host_available_ = reply.stats.host_total - reply.stats.host_used;
  current_.batch_size = static_cast<std::uint32_t>(step.seqs.size());
  current_.kv_used_blocks = reply.stats.device_used;
  current_.kv_total_blocks = reply.stats.device_total;
  return step;
}

}  // namespace actorlm::scheduler
