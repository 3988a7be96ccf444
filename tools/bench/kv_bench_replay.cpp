// The utilization replay of `actorlm bench kv`: a minimal FCFS continuous-batching loop over
// the real BlockManager (the scheduler proper is another issue's; this loop only drives KV).
#include "tools/bench/kv_bench.hpp"

#include "actors/kv/block_manager.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <stdexcept>

namespace actorlm::bench {

std::vector<ReplayRequest> sharegpt_like(std::uint32_t n, std::uint32_t max_len,
                                         std::uint64_t seed) {
  // Log-normal with sigma 1 and mean m: mu = ln(m) - sigma^2 / 2.
  constexpr double sigma = 1.0;
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> in(std::log(161.0) - sigma * sigma / 2, sigma);
  std::lognormal_distribution<double> out(std::log(338.0) - sigma * sigma / 2, sigma);
  auto clamp = [&](double x) {
    return static_cast<std::uint32_t>(std::clamp(std::llround(x), 1ll, (long long)max_len));
  };
  std::vector<ReplayRequest> v(n);
  for (auto& r : v) {
    r.prompt_tokens = clamp(in(rng));
    r.output_tokens = clamp(out(rng));
  }
  return v;
}

namespace {
struct Running {
  std::uint32_t index;      // into requests
  kv::SeqId seq;
  std::uint32_t generated;  // output tokens so far
};
}  // namespace

ReplayResult replay(kv::AllocationMode mode, const std::vector<ReplayRequest>& requests,
                    const KvBenchOptions& opt,
                    const std::function<std::uint32_t(const ReplayRequest&)>& reserve_tokens,
                    const std::function<void(std::uint32_t)>& on_progress) {
  kv::BlockManagerOptions o;
  o.num_device_blocks = opt.replay_device_blocks;
  o.block_size = opt.block_size;
  o.prefix_caching = false;  // random token ids: nothing to share
  o.mode = mode;
  kv::BlockManager bm(o);

  std::deque<Running> waiting;
  for (std::uint32_t i = 0; i < requests.size(); ++i) waiting.push_back({i, 0, 0});
  std::vector<Running> running;
  ReplayResult res;
  double filled = 0, allocated = 0, running_sum = 0;
  std::uint32_t finished = 0;
  kv::SeqId next_seq = 1;
  const std::vector<kv::TokenId> one{1};

  while (finished < requests.size()) {
    // Admit FCFS. A preempted request comes back with its generated tokens as prompt.
    while (!waiting.empty()) {
      Running w = waiting.front();
      const auto& rq = requests[w.index];
      const std::vector<kv::TokenId> prompt(rq.prompt_tokens + w.generated, 1);
      const std::uint32_t reserve = std::max(reserve_tokens(rq), rq.prompt_tokens + rq.output_tokens);
      if (!bm.can_allocate(prompt, reserve)) {
        if (running.empty())
          throw std::runtime_error("replay: a request does not fit in an empty cache");
        break;
      }
      w.seq = next_seq++;
      bm.allocate(w.seq, prompt, reserve);
      running.push_back(w);
      waiting.pop_front();
    }
    // One decode step. Out of blocks: preempt the newest (recompute), as vLLM does.
    for (std::size_t i = 0; i < running.size();) {
      if (!bm.can_append(running[i].seq)) {
        Running victim = running.back();
        running.pop_back();
        bm.free(victim.seq);
        waiting.push_front(victim);
        ++res.preemptions;
        continue;  // retry sequence i (unless it was the victim)
      }
      bm.append(running[i].seq, one);
      ++running[i].generated;
      ++i;
    }
    const auto st = bm.stats();
    filled += double(st.slots_filled);
    allocated += double(st.slots_allocated);
    running_sum += double(running.size());
    res.max_running = std::max<std::uint32_t>(res.max_running, std::uint32_t(running.size()));
    ++res.steps;
    // Finish: a sequence that has produced its output frees its blocks.
    std::erase_if(running, [&](const Running& r) {
      if (r.generated < requests[r.index].output_tokens) return false;
      bm.free(r.seq);
      ++finished;
      if (on_progress) on_progress(finished);
      return true;
    });
  }
  res.utilization = allocated == 0 ? 1.0 : filled / allocated;
  res.mean_running = res.steps == 0 ? 0 : running_sum / double(res.steps);
  return res;
}

}  // namespace actorlm::bench
