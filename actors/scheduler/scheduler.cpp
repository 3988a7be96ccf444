// Submission, abort, results of executed steps and records. Planning: scheduler_plan.cpp;
// the block manager's answer: scheduler_reserved.cpp.
#include "actors/scheduler/scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace actorlm::scheduler {

SchedulerOptions SchedulerOptions::from(const config::Config& c, std::uint32_t device_blocks,
                                        std::uint32_t host_blocks) {
  SchedulerOptions o;
  o.batching = c.engine.batching;
  o.max_num_seqs = static_cast<std::uint32_t>(c.scheduler.max_num_seqs);
  o.max_num_batched_tokens = static_cast<std::uint32_t>(c.scheduler.max_num_batched_tokens);
  o.batch_size = static_cast<std::uint32_t>(c.scheduler.batch_size);
  o.max_batch_delay = static_cast<Time>(c.scheduler.max_batch_delay_ms * 1e6);
  o.chunked_prefill = c.scheduler.chunked_prefill;
  o.preemption = c.scheduler.preemption;
  o.max_queue_len = static_cast<std::uint32_t>(c.scheduler.max_queue_len);
  o.aging_per_s = c.scheduler.priority_aging_per_s;
  o.max_model_len = static_cast<std::uint32_t>(c.model.max_model_len);
  o.block_size = static_cast<std::uint32_t>(c.cache.block_size);
  o.num_device_blocks = device_blocks;
  o.num_host_blocks = host_blocks;
  o.watermark = c.cache.watermark;
  o.prefix_caching = c.cache.prefix_caching;
  o.step_timeout = static_cast<Time>(c.engine.step_timeout_s * 1e9);
  return o;
}

Scheduler::Scheduler(SchedulerOptions o)
    : opt_(o), kv_available_(o.num_device_blocks), host_available_(o.num_host_blocks) {}

Scheduler::Request* Scheduler::find(RequestId id) {
  auto it = slot_of_.find(id);
  return it == slot_of_.end() ? nullptr : &requests_[it->second];
}

void Scheduler::remove_from(std::vector<Slot>& v, Slot slot) {
  v.erase(std::remove(v.begin(), v.end(), slot), v.end());
}

namespace {
// Sampling parameters a shard can run (kernels/cpu/sampling.hpp's contract), token ids the
// model has: anything else would make a shard fail and stop the engine for everyone.
bool valid_inputs(const RequestSpec& s, std::uint32_t vocab) {
  const auto& p = s.sampling;
  if (!(p.temperature >= 0.0f && p.temperature <= 1e6f) || !(p.top_p > 0.0f && p.top_p <= 1.0f) ||
      p.top_k < 0 || !(p.min_p >= 0.0f && p.min_p <= 1.0f) ||
      !(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f) ||
      !(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f) ||
      !(p.repetition_penalty > 0.0f && p.repetition_penalty <= 1e6f) ||  // finite penalised logits
      s.min_tokens > s.max_tokens || p.prompt_logprobs < -1 ||
      p.prompt_logprobs > static_cast<std::int32_t>(shard::max_top_logprobs) ||
      !std::all_of(p.logit_bias.begin(), p.logit_bias.end(),
                   [](const shard::LogitBias& b) { return b.bias >= -100.0f && b.bias <= 100.0f; }))
    return false;
  if (vocab == 0) return true;
  const auto in_vocab = [vocab](TokenId t) { return t >= 0 && static_cast<std::uint32_t>(t) < vocab; };
  return std::all_of(s.prompt.begin(), s.prompt.end(), in_vocab) &&
         std::all_of(p.logit_bias.begin(), p.logit_bias.end(),
                     [&](const shard::LogitBias& b) { return in_vocab(b.token); });
}

// The ids the shards mask until the sample has min_tokens tokens: every id that could end it,
// with what the caller put there already. Masking the whole vocabulary would leave nothing to
// draw (a shard would fail): refused.
bool complete_min_tokens_mask(RequestSpec& s, std::uint32_t vocab) {
  auto& p = s.sampling;
  p.min_tokens = s.min_tokens;
  if (s.min_tokens == 0) {
    p.min_tokens_stop_ids.clear();  // nothing to send to the shards
    return true;
  }
  auto& ids = p.min_tokens_stop_ids;
  ids.insert(ids.end(), s.stop_token_ids.begin(), s.stop_token_ids.end());
  if (s.eos_token_id >= 0) ids.push_back(s.eos_token_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (vocab == 0) return true;
  const auto in_vocab = std::count_if(ids.begin(), ids.end(), [vocab](TokenId t) {
    return t >= 0 && static_cast<std::uint32_t>(t) < vocab;
  });
  return static_cast<std::uint32_t>(in_vocab) < vocab;
}

// Whether the token a sample has just produced, its `generated`-th, ends it.
bool ends_sample(const RequestSpec& spec, TokenId token, std::uint32_t generated) {
  if (generated <= spec.min_tokens) return false;
  if (!spec.ignore_eos && spec.eos_token_id >= 0 && spec.eos_token_id == token) return true;
  return std::find(spec.stop_token_ids.begin(), spec.stop_token_ids.end(), token) != spec.stop_token_ids.end();
}
}  // namespace

SubmitStatus Scheduler::submit(RequestSpec spec, Time now) {
  if (spec.prompt.empty() || spec.max_tokens == 0 || spec.n == 0 || slot_of_.contains(spec.id) ||
      !valid_inputs(spec, opt_.vocab_size) || !complete_min_tokens_mask(spec, opt_.vocab_size))
    return SubmitStatus::invalid;
  const std::uint64_t total = std::uint64_t(spec.prompt.size()) + spec.max_tokens;
  const bool reserved = opt_.kv_mode() == kv::AllocationMode::reserved;
  const std::uint64_t kv_need = std::uint64_t(blocks_for(static_cast<std::uint32_t>(
                                    reserved ? total : spec.prompt.size()))) *
                                    (reserved ? spec.n : 1);
  const std::uint32_t watermark =
      static_cast<std::uint32_t>(opt_.watermark * opt_.num_device_blocks);
  if (total > opt_.max_model_len || kv_need + watermark > opt_.num_device_blocks ||
      (!opt_.chunked_prefill && opt_.batching != config::Batching::dynamic &&
       spec.prompt.size() > opt_.max_num_batched_tokens) ||
      spec.n > opt_.max_num_seqs)
    return SubmitStatus::too_long;
  if (waiting_.size() >= opt_.max_queue_len) return SubmitStatus::queue_full;
  Slot slot = static_cast<Slot>(requests_.size());
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    requests_.emplace_back();
  }
  Request& r = requests_[slot];
  r = Request{};
  r.live = true;
  r.slot = slot;
  r.order = next_order_++;
  r.record.id = spec.id;
  r.record.prompt_tokens = static_cast<std::uint32_t>(spec.prompt.size());
  r.record.n = spec.n;
  r.record.arrival = now;
  r.record.output_tokens.assign(spec.n, 0);
  r.record.reasons.assign(spec.n, FinishReason::length);
  if (spec.sampling.prompt_logprobs >= 0) r.prompt_logprobs.resize(spec.prompt.size() - 1);
  Seq s;
  s.id = next_seq_++;
  s.tokens.reserve(total);  // no reallocation on the per-token path
  s.tokens = spec.prompt;
  if (opt_.record_token_times) r.record.token_times.reserve(spec.max_tokens);
  owner_[s.id] = {slot, 0};
  r.seqs.push_back(std::move(s));
  r.spec = std::move(spec);
  slot_of_.emplace(r.spec.id, slot);
  waiting_.push_back(slot);
  return SubmitStatus::accepted;
}

std::vector<FinishEvent> Scheduler::abort(RequestId id, Time now) {
  Request* r = find(id);
  if (r == nullptr) return {};
  StepEvents ev;
  end_request(*r, FinishReason::abort, now, ev);
  return ev.finished;
}

void Scheduler::end_request(Request& r, FinishReason why, Time now, StepEvents& ev) {
  const RequestId id = r.spec.id;
  bool all_done = true;  // a dynamic batch's member that finished and waits for its batch
  for (Seq& s : r.seqs)
    if (!s.finished) {
      all_done = false;
      finish_sample(r, s, why, now, ev);
    }
  // Samples not yet forked have no sequence: they end too.
  for (std::uint32_t j = static_cast<std::uint32_t>(r.seqs.size()); j < r.spec.n; ++j) {
    all_done = false;
    r.record.reasons[j] = why;
    ev.finished.push_back({id, j, why});
  }
  retire(r.slot, all_done && r.record.finished >= 0 ? r.record.finished : now);
}

void Scheduler::finish_sample(Request& r, Seq& s, FinishReason why, Time, StepEvents& ev) {
  s.finished = true;
  drop_from_shards(s);
  r.record.reasons[s.sample] = why;
  r.record.output_tokens[s.sample] = s.generated;
  ev.finished.push_back({r.spec.id, s.sample, why});
  // A sample 0 that finishes on its first token still lends its blocks to the forks of the
  // other samples: it is freed once they are made (on_reserved).
  const bool lends = std::any_of(pending_forks_.begin(), pending_forks_.end(),
                                 [&](const kv::ForkOp& f) { return f.parent == s.id; });
  if (s.allocated && !lends) {
    pending_frees_.push_back(s.id);
    s.allocated = false;
  } else if (s.allocated) {
    lending_.push_back(s.id);
  }
}

// Removes a request whose samples have all finished; its record joins the finished ones.
void Scheduler::retire(Slot slot, Time now) {
  Request& r = requests_[slot];
  remove_from(waiting_, slot);
  remove_from(running_, slot);
  remove_from(swapped_, slot);
  remove_from(batch_, slot);
  std::erase_if(pending_forks_, [&](const kv::ForkOp& f) { return owner_.at(f.child).first == slot; });
  r.record.finished = now;
  for (Seq& s : r.seqs) {
    drop_from_shards(s);
    if (s.allocated) pending_frees_.push_back(s.id);  // e.g. a parent kept for its forks
    owner_.erase(s.id);
  }
  finished_records_.push_back(std::move(r.record));
  slot_of_.erase(r.spec.id);
  r = Request{};  // releases its memory; the slot serves a later submission
  free_slots_.push_back(slot);
}

StepEvents Scheduler::on_executed(const shard::StepResult& result, Time now) {
  if (!in_flight_ || result.step_id != step_id_) return {};  // a late reply for a failed step
  in_flight_ = false;
  StepEvents ev;
  ev.tokens.reserve(result.tokens.size());
  std::size_t next = 0;
  std::vector<Slot> done;
  // Prompt log-probabilities first: a chunk that ends the prompt brings its last ones together
  // with the first token, which carries them all.
  for (const shard::PromptLogprob& p : result.prompt_logprobs) {
    const auto it = owner_.find(p.seq);
    if (it == owner_.end()) continue;  // aborted while the step ran
    Request& r = requests_[it->second.first];
    if (r.prompt_logprobs_sent || p.position == 0 || p.position > r.prompt_logprobs.size()) continue;
    r.prompt_logprobs[p.position - 1] = p;
  }
  for (const Work& w : planned_) {
    if (w.num_samples == 0) continue;
    if (next + w.num_samples > result.tokens.size())
      throw std::logic_error("Scheduler::on_executed: the step result lacks tokens");
    const std::size_t first = next;
    next += w.num_samples;
    Request* r = live(w);
    if (r == nullptr) continue;  // aborted while the step ran
    if (r->record.first_token < 0) r->record.first_token = now;
    // n > 1: the prompt's last logits give every sample its first token; samples 1..n-1
    // become forks of sample 0, created in the block manager by the next reservation.
    if (w.num_samples > 1) {
      r->seqs[0].maybe_shared_tail = true;
      const Seq parent = r->seqs[0];  // a copy: push_back below moves the vector
      for (std::uint32_t j = 1; j < w.num_samples; ++j) {
        Seq child = parent;
        child.tokens.reserve(r->spec.prompt.size() + r->spec.max_tokens);  // as submit() does
        child.id = next_seq_++;
        child.sample = j;
        child.allocated = false;  // until the fork is applied
        child.on_shards = false;  // added to the shards with its first step
        child.shard_tokens = child.table_sent = 0;
        owner_[child.id] = {r->slot, j};
        pending_forks_.push_back({parent.id, child.id});
        r->seqs.push_back(std::move(child));
      }
      r->forked = true;
    }
    for (std::uint32_t j = 0; j < w.num_samples; ++j) {
      const shard::SampledToken& t = result.tokens[first + j];
      Seq& s = r->seqs[w.num_samples > 1 ? j : w.sample];
      s.tokens.push_back(t.token);
      ++s.generated;
      if (s.sample == 0 && opt_.record_token_times) r->record.token_times.push_back(now);
      ev.tokens.push_back({r->spec.id, s.sample, t.token, t.logprob, r->record.cached_tokens, t.top, {}});
      if (r->spec.sampling.prompt_logprobs >= 0 && !r->prompt_logprobs_sent) {
        // Every position was computed by this sequence (admitted without the prefix cache).
        if (std::any_of(r->prompt_logprobs.begin(), r->prompt_logprobs.end(),
                        [](const shard::PromptLogprob& p) { return p.position == 0; }))
          throw std::logic_error("Scheduler::on_executed: request " + std::to_string(r->spec.id) +
                                 " lacks some of its prompt log-probabilities");
        ev.tokens.back().prompt_logprobs = std::move(r->prompt_logprobs);
        r->prompt_logprobs = {};
        r->prompt_logprobs_sent = true;
      }
      if (ends_sample(r->spec, t.token, s.generated))
        finish_sample(*r, s, FinishReason::stop, now, ev);
      else if (s.generated >= r->spec.max_tokens || s.tokens.size() >= opt_.max_model_len)
        finish_sample(*r, s, FinishReason::length, now, ev);
    }
    // Every sample exists by now (the forks were created above), so this is the whole request.
    if (std::all_of(r->seqs.begin(), r->seqs.end(), [](const Seq& s) { return s.finished; }))
      done.push_back(r->slot);
  }
  if (next != result.tokens.size())
    throw std::logic_error("Scheduler::on_executed: the step result has extra tokens");
  // Dynamic batching runs the batch to completion: its finished members stay as padding.
  for (Slot slot : done) {
    if (opt_.batching == config::Batching::dynamic) {
      requests_[slot].record.finished = now;
      continue;
    }
    retire(slot, now);
  }
  if (opt_.batching == config::Batching::dynamic && !batch_.empty()) {
    // batch_ holds live requests only: retire() removes them.
    const bool batch_done = std::all_of(batch_.begin(), batch_.end(), [&](Slot slot) {
      const auto& seqs = requests_[slot].seqs;
      return std::all_of(seqs.begin(), seqs.end(), [](const Seq& s) { return s.finished; });
    });
    if (batch_done) {
      const auto members = batch_;
      for (Slot slot : members) {
        const Time t = requests_[slot].record.finished;
        retire(slot, t >= 0 ? t : now);
      }
      batch_.clear();
    }
  }
  current_.end = now;
  current_.shard_ns = result.duration_ns;
  current_.shard_host_ns = result.host_ns;
  keep_step_record();
  planned_.clear();
  return ev;
}

void Scheduler::keep_step_record() {
  // Kept until taken; a daemon nobody asks keeps the newest ones only.
  if (step_records_.size() >= max_kept_records)
    step_records_.erase(step_records_.begin(), step_records_.begin() + records_dropped_when_full);
  step_records_.push_back(current_);
}

StepEvents Scheduler::fail_step(std::uint64_t id, Time now) {
  StepEvents ev;
  if (!in_flight_ || id != step_id_) return ev;
  in_flight_ = false;
  // The step's work, and the block moves it carried: a swap whose copy may not have happened
  // leaves the request's KV unknown. (Refused moves were undone by on_reserved: those requests
  // are back in their old state and keep going.)
  std::vector<RequestId> failed;
  for (const Work& w : planned_) failed.push_back(w.request);
  for (RequestId rid : swapping_out_)
    if (const Request* r = find(rid); r != nullptr && r->state == State::swapped) failed.push_back(rid);
  for (RequestId rid : swapping_in_)
    if (const Request* r = find(rid); r != nullptr && r->state == State::running) failed.push_back(rid);
  for (RequestId rid : failed)
    if (Request* r = find(rid)) end_request(*r, FinishReason::error, now, ev);  // once each: retired
  current_.end = now;
  keep_step_record();
  planned_.clear();
  swapping_in_.clear();
  swapping_out_.clear();
  return ev;
}

StepEvents Scheduler::fail_all(Time now) {
  StepEvents ev;
  in_flight_ = false;
  std::vector<RequestId> ids;
  for (const auto* list : {&running_, &swapped_, &waiting_, &batch_})
    for (Slot slot : *list) ids.push_back(requests_[slot].spec.id);
  for (const Work& w : planned_) ids.push_back(w.request);
  for (RequestId rid : ids)
    if (Request* r = find(rid)) end_request(*r, FinishReason::error, now, ev);
  planned_.clear();
  swapping_in_.clear();
  swapping_out_.clear();
  pending_forks_.clear();
  lending_.clear();
  return ev;
}

std::vector<SeqId> Scheduler::take_pending_frees() {
  std::vector<SeqId> out;
  out.swap(pending_frees_);
  return out;
}

SchedulerCounts Scheduler::counts() const {
  return {static_cast<std::uint32_t>(waiting_.size()), static_cast<std::uint32_t>(running_.size()),
          static_cast<std::uint32_t>(swapped_.size()), preemptions_, swap_outs_};
}

std::vector<RequestRecord> Scheduler::take_finished_records() {
  std::vector<RequestRecord> out;
  out.swap(finished_records_);
  return out;
}

std::vector<StepRecord> Scheduler::take_step_records() {
  std::vector<StepRecord> out;
  out.swap(step_records_);
  return out;
}

}  // namespace actorlm::scheduler
