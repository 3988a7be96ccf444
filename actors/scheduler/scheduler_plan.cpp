// plan(): which sequences run in the next step, what they need from the block manager, and
// who is preempted to make room.
#include "actors/scheduler/scheduler.hpp"

#include <algorithm>
#include <bit>
#include <set>
#include <stdexcept>

namespace actorlm::scheduler {

struct Scheduler::Budget {
  std::uint32_t tokens;      // max_num_batched_tokens left
  std::uint32_t seqs;        // max_num_seqs left
  std::int64_t blocks;       // device blocks left (estimate)
  std::uint32_t watermark;   // blocks admissions and swap-ins leave free
  bool preempted = false;    // someone was preempted: no admission this step
};

double Scheduler::effective_priority(const Request& r, Time now) const {
  const double waited_s = double(now - r.record.arrival) * 1e-9;
  return double(r.spec.priority) - opt_.aging_per_s * std::max(0.0, waited_s);
}

// Lower (effective) priority first, then arrival order.
std::vector<Scheduler::Slot> Scheduler::sorted(const std::vector<Slot>& ids, Time now,
                                               bool aging) const {
  // Common case, checked in O(n): one priority level and the list already in arrival order.
  // Aging then keeps that order (earlier arrivals have waited longer), so no sort is needed;
  // this keeps a long waiting queue from costing n log n on every step.
  if (!ids.empty()) {
    const Request* prev = &requests_[ids.front()];
    bool in_order = true;
    for (std::size_t i = 1; i < ids.size() && in_order; ++i) {
      const Request* r = &requests_[ids[i]];
      in_order = r->spec.priority == prev->spec.priority && r->order > prev->order &&
                 r->record.arrival >= prev->record.arrival;
      prev = r;
    }
    if (in_order) return ids;
  }
  struct Key {
    double priority;
    std::uint64_t order;
    Slot slot;
  };
  std::vector<Key> keys;
  keys.reserve(ids.size());
  for (Slot slot : ids) {
    const Request& r = requests_[slot];
    keys.push_back({aging ? effective_priority(r, now) : double(r.spec.priority), r.order, slot});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.order < b.order;
  });
  std::vector<Slot> out;
  out.reserve(keys.size());
  for (const Key& k : keys) out.push_back(k.slot);
  return out;
}

std::uint32_t Scheduler::blocks_for(std::uint32_t tokens) const {
  // A shift for the power-of-two sizes the block manager takes: a division was most of this
  // function's cost, several times per running sequence and step.
  const std::uint32_t bs = opt_.block_size;
  if ((bs & (bs - 1)) == 0) return (tokens + bs - 1) >> std::countr_zero(bs);
  return (tokens + bs - 1) / bs;
}

// Device blocks a running sequence needs to hold KV slots up to token `end`.
std::uint32_t Scheduler::growth_blocks(const Seq& s, std::uint32_t end) const {
  if (end <= s.slots) return 0;
  const bool reserved = opt_.kv_mode() == kv::AllocationMode::reserved;
  const std::uint32_t have = reserved ? static_cast<std::uint32_t>(s.table.size()) : blocks_for(s.slots);
  const std::uint32_t want = blocks_for(end);
  const bool cow = s.maybe_shared_tail && s.slots % opt_.block_size != 0;
  return (want > have ? want - have : 0) + (cow ? 1 : 0);
}

std::uint32_t Scheduler::admission_blocks(const Request& r) const {
  const bool reserved = opt_.kv_mode() == kv::AllocationMode::reserved;
  const auto prompt = static_cast<std::uint32_t>(r.spec.prompt.size());
  const std::uint32_t max_total = prompt + r.spec.max_tokens;
  // Samples admitted after the first find its full prompt blocks in the prefix cache (it is
  // admitted and computed first, in the same reservation): only their own blocks are new.
  const std::uint32_t shared = !reserved && opt_.prefix_caching ? (prompt - 1) / opt_.block_size : 0;
  std::uint32_t need = 0;
  bool first = true;
  for (const Seq& s : r.seqs) {
    if (s.finished) continue;
    const auto len = static_cast<std::uint32_t>(s.tokens.size());
    need += reserved ? blocks_for(std::max(len, max_total)) : blocks_for(len) - (first ? 0 : shared);
    first = false;
  }
  // Reserved memory is private: the samples forked after the prompt each need their own.
  if (reserved && !r.forked) need *= r.spec.n;
  return need;
}

std::uint32_t Scheduler::distinct_blocks(const Request& r) const {
  std::set<kv::BlockId> blocks;
  for (const Seq& s : r.seqs)
    if (s.allocated) blocks.insert(s.table.begin(), s.table.end());
  return static_cast<std::uint32_t>(blocks.size());
}

void Scheduler::add_growth(const Request& r, const Seq& s, const Work& w, kv::ReserveRequest& req) {
  if (w.admit) {
    req.add_growth(s.id, true, s.tokens,
                   static_cast<std::uint32_t>(r.spec.prompt.size()) + r.spec.max_tokens, w.end,
                   r.spec.sampling.prompt_logprobs < 0 || r.prompt_logprobs_sent);
    return;
  }
  const std::span<const TokenId> all(s.tokens);
  req.add_growth(s.id, false, all.subspan(s.slots, std::max(s.slots, w.end) - s.slots), 0, w.end);
}

// Plans the running request's sequences into the step, each as far as the token and sequence
// budgets allow (a whole remaining prefill without chunked prefill); a sequence left out keeps
// its blocks and runs in a later step. Returns whether anything was planned.
bool Scheduler::plan_request_work(Request& r, Budget& b) {
  bool any = false;
  for (const Seq& s : r.seqs) {
    if (s.finished || !s.allocated || b.seqs == 0) continue;
    // A parent waits until its forks are made: they must copy it as it was at the fork.
    if (std::any_of(pending_forks_.begin(), pending_forks_.end(),
                    [&](const kv::ForkOp& f) { return f.parent == s.id; }))
      continue;
    const auto len = static_cast<std::uint32_t>(s.tokens.size());
    const std::uint32_t remaining = len - s.computed;
    const std::uint32_t take = opt_.chunked_prefill ? std::min(remaining, b.tokens)
                                                    : (remaining <= b.tokens ? remaining : 0);
    if (take == 0) continue;
    // Built in place: a local copied into the vector cost a store-forwarding stall per
    // sequence (GCC copies the struct with vector loads of fields just stored one by one).
    Work& w = planned_.emplace_back();
    w.slot = r.slot;
    w.request = r.spec.id;
    w.sample = s.sample;
    w.begin = s.computed;
    w.end = s.computed + take;
    w.num_samples = w.end == len ? ((!r.forked && r.spec.n > 1) ? r.spec.n : 1) : 0;
    w.last_token = s.tokens.back();
    b.tokens -= take;
    b.blocks -= growth_blocks(s, w.end);
    --b.seqs;
    any = true;
  }
  return any;
}

// Frees (recompute) or swaps out a running request to make room; see SchedulerOptions for
// how "auto" chooses.
void Scheduler::preempt(Request& r, Budget& b, kv::ReserveRequest& req) {
  const std::uint32_t blocks = distinct_blocks(r);
  std::uint64_t tokens = 0;
  for (const Seq& s : r.seqs)
    if (!s.finished) tokens += s.tokens.size();
  bool swap = false;
  if (blocks <= host_available_ && opt_.num_host_blocks > 0) {
    if (opt_.preemption == config::Preemption::swap) swap = true;
    if (opt_.preemption == config::Preemption::automatic)
      swap = 2.0 * blocks * opt_.swap_s_per_block < double(tokens) * opt_.recompute_s_per_token;
  }
  std::vector<SeqId> group;
  for (Seq& s : r.seqs) {
    if (!s.allocated) continue;
    group.push_back(s.id);
    if (!swap) {  // recompute: the shards forget it too (swap keeps it: same tokens, new table)
      s.allocated = false;
      s.slots = s.computed = 0;
      s.table.clear();
      drop_from_shards(s);
    }
  }
  // A sample not yet forked in the block manager is forked again after the group returns.
  if (swap) {
    req.swap_out.push_back(group);
    ++swap_outs_;
    swapping_out_.push_back(r.spec.id);
    host_available_ -= blocks;
    r.state = State::swapped;
    swapped_.push_back(r.slot);
  } else {
    req.free.insert(req.free.end(), group.begin(), group.end());
    r.state = State::waiting;
    waiting_.push_back(r.slot);
    std::erase_if(pending_forks_, [&](const kv::ForkOp& f) { return owner_.at(f.child).first == r.slot; });
    for (Seq& s : r.seqs) s.maybe_shared_tail = false;
  }
  remove_from(running_, r.slot);
  b.blocks += blocks;
  b.preempted = true;
  ++r.record.preemptions;
  ++current_.preemptions;
  ++preemptions_;
}

void Scheduler::admit(Request& r, Budget& b, kv::ReserveRequest& req) {
  for (Seq& s : r.seqs) {
    if (s.finished) continue;
    const auto len = static_cast<std::uint32_t>(s.tokens.size());
    Work& w = planned_.emplace_back();  // in place, as in plan_request_work
    w.slot = r.slot;
    w.request = r.spec.id;
    w.sample = s.sample;
    w.admit = true;
    w.begin = 0;
    // Without chunked prefill a sample's prefill is whole or waits for a later step (the
    // samples of a recomputed n > 1 request may not all fit in one step's budget).
    w.end = opt_.chunked_prefill ? std::min(len, b.tokens) : (len <= b.tokens ? len : 0);
    w.num_samples = w.end == len ? ((!r.forked && r.spec.n > 1) ? r.spec.n : 1) : 0;
    w.last_token = s.tokens.back();
    b.tokens -= w.end;
    add_growth(r, s, w, req);
  }
  b.blocks -= admission_blocks(r);
  b.seqs -= r.forked ? static_cast<std::uint32_t>(r.seqs.size()) : r.spec.n;
  r.state = State::running;
  remove_from(waiting_, r.slot);
  running_.push_back(r.slot);
  if (r.record.first_scheduled < 0) r.record.first_scheduled = current_.start;
}

// Admits waiting requests in (aged) priority order while every budget allows; stops at the
// first that does not fit, so a large request is not overtaken forever by small ones.
void Scheduler::plan_admissions(Time now, Budget& b, kv::ReserveRequest& req,
                                std::uint32_t max_requests) {
  std::uint32_t admitted = 0;
  for (Slot slot : sorted(waiting_, now, true)) {
    if (admitted == max_requests) break;
    Request& r = requests_[slot];
    std::uint32_t tokens = 0, seqs = r.forked ? 0 : r.spec.n;
    for (const Seq& s : r.seqs)
      if (!s.finished) {
        if (tokens == 0) tokens = static_cast<std::uint32_t>(s.tokens.size());  // first sample
        if (r.forked) ++seqs;
      }
    const bool dynamic = opt_.batching == config::Batching::dynamic;
    if (!dynamic && (seqs > b.seqs || (opt_.chunked_prefill ? b.tokens == 0 : tokens > b.tokens)))
      break;
    if (std::int64_t(admission_blocks(r)) + b.watermark > b.blocks) break;
    admit(r, b, req);
    ++admitted;
  }
}

void Scheduler::plan_dynamic(Time now, Budget& b, kv::ReserveRequest& req) {
  if (batch_.empty()) {
    if (waiting_.empty()) return;
    Time oldest = now;
    for (Slot slot : waiting_) oldest = std::min(oldest, requests_[slot].record.arrival);
    if (waiting_.size() < opt_.batch_size && now < oldest + opt_.max_batch_delay) return;
    plan_admissions(now, b, req, opt_.batch_size);
    batch_ = running_;
    return;
  }
  // The batch runs to completion; finished members are padding rows.
  for (Slot slot : batch_) {
    Request& r = requests_[slot];
    for (const Seq& s : r.seqs) {
      if (!s.finished) continue;
      Work w;
      w.slot = slot;
      w.request = r.spec.id;
      w.sample = s.sample;
      w.padding = true;
      planned_.push_back(w);
    }
    plan_request_work(r, b);
  }
  for (const Work& w : planned_) {
    if (w.padding) continue;
    const Request& r = requests_[w.slot];
    add_growth(r, r.seqs[w.sample], w, req);
  }
}

std::optional<kv::ReserveRequest> Scheduler::plan(Time now) {
  if (in_flight_) throw std::logic_error("Scheduler::plan: a step is already in flight");
  planned_.clear();
  swapping_in_.clear();
  swapping_out_.clear();
  current_ = {};
  current_.id = step_id_ + 1;
  current_.start = now;
  kv::ReserveRequest req;
  req.free = take_pending_frees();
  req.grow.reserve(running_.size() + waiting_.size());
  req.tokens.reserve(opt_.max_num_batched_tokens);  // one allocation, not one per doubling
  Budget b{opt_.max_num_batched_tokens, opt_.max_num_seqs, kv_available_,
           static_cast<std::uint32_t>(opt_.watermark * opt_.num_device_blocks)};
  if (opt_.batching == config::Batching::dynamic) {  // only batch_size and KV limit a batch
    b.tokens = ~0u >> 1;
    b.seqs = ~0u >> 1;
  }

  if (opt_.batching == config::Batching::dynamic) {
    plan_dynamic(now, b, req);
  } else {
    // 1. Running requests, highest priority first; the lowest, newest ones make room.
    std::vector<Slot> order = sorted(running_, now, false);
    for (std::size_t i = 0; i < order.size(); ++i) {
      Request& r = requests_[order[i]];
      std::int64_t need = 0;
      for (const Seq& s : r.seqs)
        if (!s.finished && s.allocated) need += growth_blocks(s, static_cast<std::uint32_t>(s.tokens.size()));
      while (need > b.blocks && order.size() > i + 1) {
        preempt(requests_[order.back()], b, req);
        order.pop_back();
      }
      if (need > b.blocks) {  // nobody left to preempt but itself
        preempt(r, b, req);
        break;
      }
      const std::size_t before = planned_.size();
      if (!plan_request_work(r, b)) continue;
      for (std::size_t k = before; k < planned_.size(); ++k)
        add_growth(r, r.seqs[planned_[k].sample], planned_[k], req);
    }
    // 2. Swapped requests come back before anyone new is admitted.
    if (!b.preempted) {
      for (Slot slot : sorted(swapped_, now, true)) {
        Request& r = requests_[slot];
        const std::uint32_t blocks = distinct_blocks(r);
        std::int64_t growth = 0;
        for (const Seq& s : r.seqs)
          if (!s.finished && s.allocated) growth += growth_blocks(s, static_cast<std::uint32_t>(s.tokens.size()));
        if (std::int64_t(blocks) + growth + b.watermark > b.blocks) break;
        std::vector<SeqId> group;
        for (const Seq& s : r.seqs)
          if (s.allocated) group.push_back(s.id);
        const std::size_t before = planned_.size();
        b.blocks -= blocks;
        // Coming back is progress even when no work fits this step (or a parent must first
        // make the forks it was swapped out with).
        plan_request_work(r, b);
        req.swap_in.push_back(group);
        swapping_in_.push_back(r.spec.id);
        host_available_ += blocks;
        r.state = State::running;
        remove_from(swapped_, slot);
        running_.push_back(slot);
        for (std::size_t k = before; k < planned_.size(); ++k)
          add_growth(r, r.seqs[planned_[k].sample], planned_[k], req);
      }
    }
    // 3. New (and recompute-preempted) requests.
    if (!b.preempted && swapped_.empty()) plan_admissions(now, b, req, ~0u);
  }

  // Forks last: preemption above may have removed some, and a parent that is not on the
  // device (swapped out) forks after it returns.
  for (const auto& f : pending_forks_) {
    const auto [slot, sample] = owner_.at(f.parent);
    const Request& r = requests_[slot];
    if (r.state == State::running && r.seqs[sample].allocated) req.forks.push_back(f);
  }
  if (planned_.empty() && req.free.empty() && req.forks.empty() && req.swap_out.empty())
    return std::nullopt;
  in_flight_ = true;
  ++step_id_;
  return req;
}

std::optional<Time> Scheduler::next_wakeup() const {
  if (opt_.batching != config::Batching::dynamic || !batch_.empty() || waiting_.empty())
    return std::nullopt;
  Time oldest = requests_[waiting_.front()].record.arrival;
  for (Slot slot : waiting_) oldest = std::min(oldest, requests_[slot].record.arrival);
  return oldest + opt_.max_batch_delay;
}

}  // namespace actorlm::scheduler
