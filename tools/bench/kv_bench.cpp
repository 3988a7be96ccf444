#include "tools/bench/kv_bench.hpp"

#include "actors/kv/block_manager.hpp"
#include "tools/bench/timing.hpp"

#include <random>

namespace actorlm::bench {

using kv::BlockManager;
using kv::BlockManagerOptions;
using kv::SeqId;
using kv::TokenId;

namespace {

std::vector<TokenId> random_tokens(std::mt19937_64& rng, std::size_t n) {
  std::uniform_int_distribution<TokenId> d(0, 49151);
  std::vector<TokenId> v(n);
  for (auto& t : v) t = d(rng);
  return v;
}

// One decode step for `n` running sequences, as the block-manager actor does it: check,
// append and mark computed (try_append).
double append_step_us(std::uint32_t n, const KvBenchOptions& opt) {
  BlockManagerOptions o;
  o.block_size = opt.block_size;
  constexpr std::uint32_t prompt = 128, steps = 1000;
  o.num_device_blocks = n * ((prompt + steps) / opt.block_size + 2);
  BlockManager bm(o);
  std::mt19937_64 rng(opt.seed);
  for (SeqId s = 0; s < n; ++s) {
    auto p = random_tokens(rng, prompt);
    bm.allocate(s, p, prompt);
    bm.mark_computed(s, prompt);
  }
  std::vector<double> samples;
  samples.reserve(steps);
  const auto next = random_tokens(rng, steps);
  for (std::uint32_t i = 0; i < steps; ++i) {
    const TokenId tok[1] = {next[i]};
    samples.push_back(time_us([&] {
      BlockManager::Appended out;
      for (SeqId s = 0; s < n; ++s)
        if (!bm.try_append(s, tok, prompt + i + 1, out)) std::abort();  // sized so this never happens
    }));
  }
  return median(std::move(samples));
}

double allocate_prefix_us(const KvBenchOptions& opt) {
  BlockManagerOptions o;
  o.block_size = opt.block_size;
  o.num_device_blocks = 4 * 2048 / opt.block_size;
  BlockManager bm(o);
  std::mt19937_64 rng(opt.seed);
  const auto prefix = random_tokens(rng, 1024);
  auto warm = prefix;
  warm.push_back(1);  // so that all 1,024 prefix tokens sit before the last prompt token
  bm.allocate(0, warm, std::uint32_t(warm.size()));
  bm.mark_computed(0, std::uint32_t(warm.size()));
  bm.free(0);
  std::vector<double> samples;
  constexpr int reps = 2000;
  samples.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    auto prompt = prefix;
    const auto suffix = random_tokens(rng, 1024);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    std::uint32_t cached = 0;
    samples.push_back(time_us([&] {
      const auto m = bm.match_prefix(prompt);
      if (!bm.can_allocate(prompt, 2048, m)) std::abort();
      cached = bm.allocate(1, prompt, 2048, m);
    }));
    if (cached != 1024) std::abort();  // the benchmark would be measuring something else
    bm.free(1);
  }
  return median(std::move(samples));
}

}  // namespace

KvBenchResult run_kv_bench(const KvBenchOptions& opt) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  KvBenchResult r;
  say("append: 1,000 decode steps of 256 sequences");
  r.append_256_us = append_step_us(256, opt);
  say("append: 1,000 decode steps of 1,024 sequences");
  r.append_1024_us = append_step_us(1024, opt);
  say("allocate: 2,000 prompts of 2,048 tokens with 1,024 cached");
  r.allocate_2k_prefix_us = allocate_prefix_us(opt);

  const auto requests = sharegpt_like(opt.replay_requests, opt.max_len, opt.seed);
  auto progress_for = [&](const char* name) {
    return [&, name](std::uint32_t done) {
      if (done % 2000 == 0 || done == requests.size())
        say(std::string("replay ") + name + ": " + std::to_string(done) + "/" +
            std::to_string(requests.size()) + " requests finished");
    };
  };
  r.paged = replay(kv::AllocationMode::paged, requests, opt,
                   [](const ReplayRequest& q) { return q.prompt_tokens; }, progress_for("paged"));
  r.reserved = replay(kv::AllocationMode::reserved, requests, opt,
                      [&](const ReplayRequest& q) { return q.prompt_tokens + opt.max_len; },
                      progress_for("reserved"));
  r.reserved_oracle = replay(
      kv::AllocationMode::reserved, requests, opt,
      [](const ReplayRequest& q) { return q.prompt_tokens + q.output_tokens; },
      progress_for("reserved (oracle lengths)"));
  return r;
}

}  // namespace actorlm::bench
