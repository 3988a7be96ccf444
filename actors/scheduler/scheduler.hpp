#pragma once
// The scheduler policy: queues, batching regimes, preemption, admission control, finish
// conditions. Plain C++ with no CAF include; the scheduler actor drives it once per iteration:
//
//   plan(now)          -> kv::ReserveRequest   (to the block-manager actor)
//   on_reserved(reply) -> shard::Step          (to every shard)
//   on_executed(result, now) -> StepEvents     (tokens and finishes for the request sinks)
//
// One step is in flight at a time. The policy keeps a mirror of every sequence's block table
// (from the reply's deltas) and of the free blocks (from the reply's stats), so it can budget
// a step and choose preemption victims before asking; a "no room" answer (only possible when
// that estimate was optimistic, e.g. blocks shared with other requests) drops the sequence
// from this step and it is retried in the next.

#include "actors/config/config.hpp"
#include "actors/kv/block_manager_messages.hpp"
#include "actors/scheduler/request.hpp"
#include "actors/shard/shard_messages.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace actorlm::scheduler {

struct SchedulerOptions {
  config::Batching batching = config::Batching::paged;
  std::uint32_t max_num_seqs = 256;
  std::uint32_t max_num_batched_tokens = 8192;
  std::uint32_t batch_size = 4;            // dynamic
  Time max_batch_delay = 100'000'000;      // dynamic, ns
  bool chunked_prefill = false;
  config::Preemption preemption = config::Preemption::automatic;
  std::uint32_t max_queue_len = 1024;
  std::uint32_t max_model_len = 2048;
  std::uint32_t vocab_size = 0;      // token ids must be below it (0: not checked)
  // The block manager's geometry (it must be built with the same numbers).
  std::uint32_t block_size = 16;
  std::uint32_t num_device_blocks = 0;
  std::uint32_t num_host_blocks = 0;
  double watermark = 0.01;
  bool prefix_caching = true;  // lets admission count the prompt blocks samples share
  // Aging: a waiting request gains this many priority levels per second waited.
  double aging_per_s = 1.0;
  // Modelled costs that decide "auto" preemption: recompute its tokens, or move its blocks
  // out and back in (the simulator supplies its own; these suit a PCIe 4 GPU).
  double recompute_s_per_token = 5e-5;
  double swap_s_per_block = 2e-5;
  // The scheduler actor's deadline for a step's answer and a reservation's (engine.step_timeout_s).
  Time step_timeout = 60'000'000'000;
  // Where each rank's shard runs, for error messages ("worker 10.0.0.2:7001"); empty: here.
  std::vector<std::string> shard_locations;
  // The rank whose answer to a step carries its tokens and is awaited (the others are sent the
  // step and answer no one): 0, or a layer split's last stage (engine::KvCapacity).
  std::uint32_t answering_rank = 0;
  // RequestRecord::token_times kept (the daemon's inter-token latency metrics). A client that
  // times the tokens it receives itself (the simulator's driver) turns it off: one store per
  // token and a max_tokens buffer per request less.
  bool record_token_times = true;

  static SchedulerOptions from(const config::Config&, std::uint32_t num_device_blocks,
                               std::uint32_t num_host_blocks);
  // Allocation mode the block manager must use: paged, or reserved for dynamic/continuous.
  kv::AllocationMode kv_mode() const {
    return batching == config::Batching::paged ? kv::AllocationMode::paged
                                               : kv::AllocationMode::reserved;
  }
};

struct SchedulerCounts {
  std::uint32_t waiting = 0, running = 0, swapped = 0;  // requests
  std::uint64_t preemptions = 0;
  std::uint64_t swap_outs = 0;  // of those preemptions, by swapping out (the rest recompute)
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions);

  const SchedulerOptions& options() const { return opt_; }
  SubmitStatus submit(RequestSpec, Time now);
  // Cancels a request in any state; returns its samples' finish events (empty if unknown).
  // Its blocks are freed by the next reservation, before anything else in it.
  std::vector<FinishEvent> abort(RequestId, Time now);

  // Plans the next step; nullopt when there is nothing to run now (see next_wakeup()).
  std::optional<kv::ReserveRequest> plan(Time now);
  // When the dynamic regime's batching delay ends, if it is waiting for one.
  std::optional<Time> next_wakeup() const;
  shard::Step on_reserved(const kv::ReserveReply&);
  // A result for a step that is not in flight (a late reply for a step already failed by
  // fail_step or fail_all) changes nothing and produces no events.
  StepEvents on_executed(const shard::StepResult&, Time now);

  // Failures (scheduler.cpp). The step `step_id`, sent to the shards, failed (an error
  // reply, its deadline passed): every request with work in it, and every request whose blocks
  // it was swapping out, ends with FinishReason::error; their blocks go to the pending frees as
  // an abort's do, and the next plan() may run. No events when that step is not in flight.
  StepEvents fail_step(std::uint64_t step_id, Time now);
  // The engine cannot go on (a shard or the block manager is gone): every request, in any
  // state, ends with FinishReason::error and nothing is in flight afterwards. The block
  // manager's answer to a reservation still in flight, if any, must be ignored.
  StepEvents fail_all(Time now);
  // The step planned last (the one in flight, if any).
  std::uint64_t step_id() const { return step_id_; }

  bool in_flight() const { return in_flight_; }
  bool has_work() const { return !waiting_.empty() || !running_.empty() || !swapped_.empty(); }
  // Sequences to free while no step is planned (an abort when idle): send as kv_abort.
  std::vector<SeqId> take_pending_frees();
  SchedulerCounts counts() const;
  std::vector<RequestRecord> take_finished_records();
  std::vector<StepRecord> take_step_records();

 private:
  // Requests live in a dense vector, by slot (reused after a request retires); the per-step
  // path works on slots. Ids are looked up only at the edges: submit, abort, the block
  // manager's rare answers about one sequence (tables, refusals), failures.
  using Slot = std::uint32_t;
  struct Seq {
    SeqId id = 0;
    std::uint32_t sample = 0;
    std::vector<TokenId> tokens;       // prompt, then this sample's generated tokens
    std::uint32_t generated = 0;
    std::uint32_t slots = 0;           // tokens with KV slots in the block manager
    std::uint32_t computed = 0;        // tokens whose KV is written
    std::vector<kv::BlockId> table;    // mirror of the block manager's table
    bool allocated = false;            // known to the block manager (device or host)
    bool maybe_shared_tail = false;    // forked since its last append: may copy on write
    bool finished = false;
    // What the shards hold of it (incremental steps, shard::NewSeq / SeqWork deltas).
    bool on_shards = false;            // added to the shards and not dropped since
    std::uint32_t shard_tokens = 0;    // tokens[0, shard_tokens) are on the shards
    std::uint32_t table_sent = 0;      // the shards' table is table[0, table_sent)
  };
  enum class State : std::uint8_t { waiting, running, swapped };
  struct Request {
    bool live = false;                 // false: a free slot
    Slot slot = 0;
    RequestSpec spec;
    State state = State::waiting;
    std::uint64_t order = 0;           // arrival order: FCFS within a priority
    std::vector<Seq> seqs;             // index = sample; one until the prompt is done
    bool forked = false;               // n > 1 samples created
    bool admitted_once = false;        // record.cached_tokens is set
    // spec.sampling.prompt_logprobs >= 0: entry p - 1 for prompt position p (position 0 until the
    // shards send it); they go out with the first token, and until then admissions do not use
    // the prefix cache (every position must be computed here).
    std::vector<shard::PromptLogprob> prompt_logprobs;
    bool prompt_logprobs_sent = false;
    RequestRecord record;
  };
  // One sequence's work in the step being planned.
  struct Work {
    Slot slot = 0;
    RequestId request = 0;             // tells a slot reused while the step ran apart
    std::uint32_t sample = 0;
    std::uint32_t begin = 0, end = 0;  // token range processed: [begin, end)
    std::uint32_t num_samples = 0;
    TokenId last_token = 0;            // the sequence's last token when planned (add_work
                                       // sends it without touching the token vector again)
    bool admit = false;
    bool padding = false;
  };

  struct Budget;  // what the step being planned may still use (scheduler_plan.cpp)
  // plan() helpers (scheduler_plan.cpp)
  double effective_priority(const Request&, Time now) const;
  std::vector<Slot> sorted(const std::vector<Slot>&, Time now, bool aging) const;
  std::uint32_t blocks_for(std::uint32_t tokens) const;
  std::uint32_t growth_blocks(const Seq&, std::uint32_t end) const;
  std::uint32_t admission_blocks(const Request&) const;
  std::uint32_t distinct_blocks(const Request&) const;
  bool plan_request_work(Request&, Budget&);
  void preempt(Request&, Budget&, kv::ReserveRequest&);
  void plan_dynamic(Time now, Budget&, kv::ReserveRequest&);
  void plan_admissions(Time now, Budget&, kv::ReserveRequest&, std::uint32_t max_requests);
  void admit(Request&, Budget&, kv::ReserveRequest&);
  void add_growth(const Request&, const Seq&, const Work&, kv::ReserveRequest&);
  // bookkeeping (scheduler.cpp)
  Request* find(RequestId);  // by id (a hash lookup): nullptr when retired
  // The work's request, or nullptr when it retired (and its slot may serve another) meanwhile.
  Request* live(const Work& w) {
    Request& r = requests_[w.slot];
    return r.live && r.spec.id == w.request ? &r : nullptr;
  }
  void finish_sample(Request&, Seq&, FinishReason, Time now, StepEvents&);
  // Ends every sample of a request still going (forked or not yet) with `why` and retires it.
  void end_request(Request&, FinishReason why, Time now, StepEvents&);
  void retire(Slot, Time now);
  void keep_step_record();  // current_, within max_kept_records
  void remove_from(std::vector<Slot>&, Slot);
  // The step's work for one sequence, as a delta against what the shards hold (NewSeq first).
  void add_work(const Request&, Seq&, const Work&, shard::Step&);
  // The shards forget the sequence with the next step (finished, aborted, recomputed).
  void drop_from_shards(Seq&);

  SchedulerOptions opt_;
  std::vector<Request> requests_;         // by slot
  std::vector<Slot> free_slots_;          // of requests_, for the next submissions
  std::unordered_map<RequestId, Slot> slot_of_;  // live requests
  std::unordered_map<SeqId, std::pair<Slot, std::uint32_t>> owner_;  // seq -> (slot, sample)
  std::vector<Slot> waiting_, running_, swapped_;
  std::vector<Slot> batch_;               // dynamic: the batch being run to completion
  std::vector<SeqId> pending_frees_;
  std::vector<SeqId> shard_drops_;        // for the next step's Step::dropped
  std::vector<kv::ForkOp> pending_forks_;
  std::vector<SeqId> lending_;            // finished parents kept until their forks are made
  std::uint64_t next_order_ = 0;
  SeqId next_seq_ = 1;
  std::uint32_t kv_available_;            // free + cached device blocks after the last reply
  std::uint32_t host_available_;
  bool in_flight_ = false;
  std::uint64_t step_id_ = 0;
  std::vector<Work> planned_;
  std::vector<RequestId> swapping_in_;    // swap-ins asked for by the step being planned
  std::vector<RequestId> swapping_out_;   // swap-outs asked for by the step being planned
  StepRecord current_;
  std::uint64_t preemptions_ = 0;
  std::uint64_t swap_outs_ = 0;
  std::vector<RequestRecord> finished_records_;
  std::vector<StepRecord> step_records_;
};

}  // namespace actorlm::scheduler
