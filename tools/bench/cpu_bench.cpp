#include "tools/bench/cpu_bench.hpp"

#include "actors/engine/completions.hpp"
#include "actors/serving/served_model.hpp"
#include "actors/shard/cpu/cpu_backend.hpp"
#include "kernels/cpu/model/transformer.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"
#include "model/format/tensor_source.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace actorlm::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Different user questions, so prompts differ in content and length.
const char* const questions[] = {
    "What is the capital of France?", "Explain photosynthesis in one sentence.",
    "Write a haiku about the sea.", "How many legs does a spider have?",
    "Name three prime numbers.", "What does a CPU do?", "Give me a synonym for happy.",
    "Why is the sky blue?", "Translate 'good morning' into Spanish.",
    "What is the boiling point of water at sea level?", "Suggest a name for a cat.",
    "What is 12 times 12?", "Describe a rainbow.", "Who wrote Romeo and Juliet?",
    "List two renewable energy sources.", "What is machine learning?",
};

std::vector<std::vector<model::Token>> make_prompts(const serving::ServedModel& m, std::uint32_t n) {
  std::vector<std::vector<model::Token>> out;
  constexpr std::size_t q = std::size(questions);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string text = questions[i % q];
    if (i >= q) text += " Answer briefly, please (" + std::to_string(i / q) + ").";
    out.push_back(m.chat_prompt({{"user", text}}));
  }
  return out;
}

CpuBenchPoint run_engine(caf::actor_system& sys, serving::ServedModel& m,
                         const std::vector<std::vector<model::Token>>& prompts, std::uint32_t c,
                         std::uint32_t max_tokens, scheduler::RequestId& next_id) {
  engine::Completions done(sys, 1, {}, m.engine().actors().scheduler);
  const auto n = static_cast<std::uint32_t>(prompts.size());
  std::uint32_t submitted = 0;
  std::vector<Clock::time_point> submit_time;
  const auto submit = [&] {
    auto spec = m.request(next_id++, prompts[submitted], max_tokens);
    spec.stop_token_ids.clear();  // every request generates exactly max_tokens
    submit_time.push_back(Clock::now());
    if (m.engine().submit(std::move(spec), done.sink()) != scheduler::SubmitStatus::accepted)
      throw std::runtime_error("bench cpu: a request was refused (raise cache.cpu_kv_space?)");
    ++submitted;
  };
  const scheduler::RequestId first_id = next_id;
  const auto start = Clock::now();
  while (submitted < std::min(c, n)) submit();
  for (std::uint32_t finished = 1; finished <= n; ++finished) {
    if (!done.wait_finished(finished, std::chrono::minutes(30)))
      throw std::runtime_error("bench cpu: " + (done.failure().empty() ? std::string("requests did not finish within 30 minutes")
                                                                        : done.failure()));
    if (submitted < n) submit();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const auto out = done.take();
  std::uint64_t tokens = 0;
  std::vector<double> ttft;
  for (const auto& [id, comp] : out) {
    tokens += comp.samples.at(0).size();
    ttft.push_back(std::chrono::duration<double>(comp.first_token - submit_time.at(id - first_id)).count());
  }
  std::sort(ttft.begin(), ttft.end());
  return {c, double(tokens) / secs, secs, ttft.empty() ? 0.0 : ttft[ttft.size() / 2]};
}

// One request at a time, prefill then one decode step per token, on its own copy of the
// weights: the forward the shards run, without the engine.
double run_sequential(const std::string& model_path, const std::vector<std::vector<model::Token>>& prompts,
                      std::uint32_t max_tokens, double& seconds) {
  const auto source = model::open_tensor_source(model_path);
  const auto arch = model::read_architecture(*source);
  const auto weights = kernels::cpu::load_weights(*source, arch);
  kernels::cpu::Transformer t(weights);
  constexpr std::uint32_t block_size = 16;
  std::size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const auto blocks = static_cast<std::uint32_t>((longest + max_tokens) / block_size + 1);
  kernels::cpu::KvCache cache(arch, weights.heads, block_size, blocks, 0);
  std::vector<std::uint32_t> table(blocks);
  for (std::uint32_t i = 0; i < blocks; ++i) table[i] = i;
  std::vector<float> logits;
  std::uint64_t tokens = 0;
  const auto start = Clock::now();
  for (const auto& p : prompts) {
    kernels::cpu::ForwardSeq s{p, 0, table, true, false};
    t.forward({&s, 1}, cache, true, logits);
    auto pos = static_cast<std::uint32_t>(p.size());
    for (std::uint32_t i = 0; i < max_tokens; ++i) {
      const std::int32_t next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ++tokens;  // `next` is this request's token i
      if (i + 1 == max_tokens) break;
      kernels::cpu::ForwardSeq d{{&next, 1}, pos++, table, true, false};
      t.forward({&d, 1}, cache, true, logits);
    }
  }
  seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return double(tokens) / seconds;
}

}  // namespace

CpuBenchResult run_cpu_bench(const CpuBenchOptions& o) {
  auto say = [&](const std::string& s) { if (o.progress) o.progress(s); };
  caf::actor_system_config sys_cfg;
  serving::register_engine_types(sys_cfg);
  caf::actor_system sys{sys_cfg};
  // Prefix caching off: the chat prompts share their system message, and the ratio should
  // measure batching alone against a loop that cannot reuse anything.
  auto cfg = o.config;
  cfg.cache.prefix_caching = false;
  serving::ServedModel m(sys, cfg);
  CpuBenchResult r;
  r.model = shard::resolve_model_path(cfg);
  const auto prompts = make_prompts(m, o.requests);
  for (const auto& p : prompts) r.prompt_tokens += p.size();
  scheduler::RequestId next_id = 1;
  for (std::uint32_t c : o.concurrency) {
    say("engine, " + std::to_string(c) + " concurrent request(s), " + std::to_string(o.requests) +
        " requests of " + std::to_string(o.max_tokens) + " tokens");
    r.engine.push_back(run_engine(sys, m, prompts, c, o.max_tokens, next_id));
    say("  " + std::to_string(r.engine.back().tokens_per_s) + " tokens/s");
  }
  if (o.sequential_baseline) {
    say("one at a time without the engine (plain generate loop)");
    r.sequential_tokens_per_s = run_sequential(r.model, prompts, o.max_tokens, r.sequential_seconds);
    say("  " + std::to_string(r.sequential_tokens_per_s) + " tokens/s");
  }
  return r;
}

}  // namespace actorlm::bench
