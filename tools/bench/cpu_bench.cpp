#include "tools/bench/cpu_bench.hpp"

#include "actors/engine/completions.hpp"
#include "actors/serving/served_model.hpp"
#include "actors/shard/cpu/cpu_backend.hpp"
#include "kernels/cpu/model/transformer.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "model/format/open.hpp"
#include "model/format/read_architecture.hpp"
#include "model/format/tensor_source.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <numeric>
#include <chrono>
#include <stdexcept>
#include <thread>

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
                         const std::vector<std::vector<model::Token>>& prompts, std::uint32_t n,
                         std::uint32_t c, std::uint32_t max_tokens, scheduler::RequestId& next_id) {
  engine::Completions done(sys, 1, {}, m.engine().actors().scheduler);
  std::uint32_t submitted = 0;
  std::vector<Clock::time_point> submit_time;
  const auto submit = [&] {
    auto spec = m.request(next_id++, prompts[submitted % prompts.size()], max_tokens);
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
  return {c, n, double(tokens) / secs, secs, ttft.empty() ? 0.0 : ttft[ttft.size() / 2]};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One layer's attention for one decode row over `positions` cached ones (the model's heads of
// rank 0, the KV cache's dtype, blocks in a shuffled order as a long-running cache has them), on
// a pool of the shard's size: the median of `repeats` calls, in seconds.
double measure_decode_attention(const model::Architecture& arch, const model::RankShard& heads,
                                kernels::cpu::KvDtype dtype, std::int32_t threads, std::uint32_t positions,
                                std::uint32_t repeats) {
  constexpr std::uint32_t block_size = 16;
  const std::uint32_t blocks = (positions + block_size - 1) / block_size;
  kernels::cpu::KvCache cache(arch, heads, block_size, blocks, 0, dtype);
  std::vector<std::uint32_t> table(blocks);
  for (std::uint32_t i = 0; i < blocks; ++i) table[i] = (i * 7 + 3) % blocks;
  if (std::gcd(7u, blocks) != 1)
    for (std::uint32_t i = 0; i < blocks; ++i) table[i] = i;
  const auto hd = static_cast<std::int64_t>(arch.head_dim);
  const std::int64_t width = (std::int64_t(heads.q_heads) + 2 * heads.kv_heads) * hd;
  std::vector<float> rows(static_cast<std::size_t>(width) * positions);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::sin(0.37f * float(i % 9973)) * 0.5f;
  const float* k = rows.data() + heads.q_heads * hd;
  kernels::cpu::write_kv(cache.k(0), cache.v(0), table, 0, positions, k, k + heads.kv_heads * hd, width);
  std::vector<float> out(static_cast<std::size_t>(heads.q_heads * hd));
  kernels::cpu::ThreadPool pool(threads);
  std::vector<double> secs;
  const float* q = rows.data() + (positions - 1) * width;
  for (std::uint32_t r = 0; r < std::max(1u, repeats); ++r) {
    const auto t0 = Clock::now();
    kernels::cpu::paged_attention(cache.k(0), cache.v(0), table, positions - 1, 1, q, width,
                                  static_cast<std::int32_t>(heads.q_heads), 0.125f, out.data(), &pool);
    secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(secs);
}

// One request at a time, prefill then one decode step per token, on its own copy of the
// weights: the forward the shards run, without the engine. Then one long prefill.
void run_sequential(const CpuBenchOptions& o, const std::string& model_path, const config::Config& cfg,
                    const std::vector<std::vector<model::Token>>& prompts, CpuBenchPath& out) {
  const auto source = model::open_tensor_source(model_path);
  const auto arch = model::read_architecture(*source);
  const auto storage = cfg.model.weights == config::CpuWeights::stored ? kernels::cpu::WeightStorage::stored
                                                                       : kernels::cpu::WeightStorage::f32;
  const auto weights = kernels::cpu::load_weights(*source, arch, 0, 1, storage);
  out.weight_bytes_per_token = weights.matrix_bytes_per_step();
  out.weight_bytes = weights.bytes();
  config::Config one = cfg;
  one.engine.tensor_parallel_degree = 1;
  kernels::cpu::Transformer t(weights, {}, shard::configure_cpu_threads(one));
  constexpr std::uint32_t block_size = 16;
  std::size_t longest = o.prefill_tokens;
  for (const auto& p : prompts) longest = std::max(longest, p.size() + o.max_tokens);
  const auto blocks = static_cast<std::uint32_t>(longest / block_size + 1);
  kernels::cpu::KvCache cache(arch, weights.heads, block_size, blocks, 0, shard::kv_dtype(cfg.cache.dtype));
  std::vector<std::uint32_t> table(blocks);
  for (std::uint32_t i = 0; i < blocks; ++i) table[i] = i;
  std::vector<float> logits;
  std::uint64_t tokens = 0, decoded = 0;
  double decode_seconds = 0;
  const auto start = Clock::now();
  for (const auto& p : prompts) {
    kernels::cpu::ForwardSeq s{p, 0, table, true, false};
    t.forward({&s, 1}, cache, true, logits);
    auto pos = static_cast<std::uint32_t>(p.size());
    for (std::uint32_t i = 0; i < o.max_tokens; ++i) {
      const std::int32_t next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ++tokens;  // `next` is this request's token i
      if (i + 1 == o.max_tokens) break;
      kernels::cpu::ForwardSeq d{{&next, 1}, pos++, table, true, false};
      const auto step = Clock::now();
      t.forward({&d, 1}, cache, true, logits);
      decode_seconds += std::chrono::duration<double>(Clock::now() - step).count();
      ++decoded;
    }
  }
  out.sequential_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.sequential_tokens_per_s = double(tokens) / out.sequential_seconds;
  out.decode_tokens_per_s = decode_seconds > 0 ? double(decoded) / decode_seconds : 0.0;

  out.decode_attention_s = measure_decode_attention(arch, weights.heads, shard::kv_dtype(cfg.cache.dtype),
                                                    shard::configure_cpu_threads(one), decode_attention_positions, 200);
  if (o.prefill_tokens == 0) return;
  std::vector<std::int32_t> prompt;  // the chat prompts one after another, cut to length
  while (prompt.size() < o.prefill_tokens)
    for (const auto& p : prompts) prompt.insert(prompt.end(), p.begin(), p.end());
  prompt.resize(o.prefill_tokens);
  std::vector<double> rates;
  for (std::uint32_t r = 0; r < std::max(1u, o.repeats); ++r) {
    kernels::cpu::ForwardSeq s{prompt, 0, table, true, false};
    const auto t0 = Clock::now();
    t.forward({&s, 1}, cache, true, logits);
    rates.push_back(double(prompt.size()) / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  out.prefill_tokens_per_s = median(rates);
}


}  // namespace

double measure_read_bandwidth(std::int32_t threads, std::size_t bytes, std::uint32_t repeats) {
  std::vector<std::uint64_t> buffer(bytes / sizeof(std::uint64_t), 1);  // written: pages are real
  kernels::cpu::ThreadPool pool(threads);
  std::vector<double> rates;
  std::atomic<std::uint64_t> sink{0};
  for (std::uint32_t r = 0; r < std::max(1u, repeats); ++r) {
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<std::int64_t>(buffer.size()), 4096, [&](std::int64_t b, std::int64_t e) {
      // Four independent sums: loads, not an addition chain, set the pace.
      std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      std::int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buffer[i];
        s1 += buffer[i + 1];
        s2 += buffer[i + 2];
        s3 += buffer[i + 3];
      }
      for (; i < e; ++i) s0 += buffer[i];
      sink += s0 + s1 + s2 + s3;
    });
    rates.push_back(double(buffer.size() * sizeof(std::uint64_t)) / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (sink.load() != std::uint64_t(buffer.size()) * std::max(1u, repeats))
    throw std::logic_error("bench cpu: the bandwidth pass summed the wrong thing");
  return median(rates);
}

CpuBenchResult run_cpu_bench(const CpuBenchOptions& o) {
  auto say = [&](const std::string& s) { if (o.progress) o.progress(s); };
  caf::actor_system_config sys_cfg;
  serving::configure_actor_system(sys_cfg);
  caf::actor_system sys{sys_cfg};
  CpuBenchResult r;
  r.model = shard::resolve_model_path(o.config);
  r.threads = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  scheduler::RequestId next_id = 1;
  const auto kv_dtypes = o.kv_dtypes.empty() ? std::vector{o.config.cache.dtype} : o.kv_dtypes;
  // Every path's model is loaded first, and each concurrency is measured on the paths one after
  // the other, so that a ratio between paths compares runs minutes apart at most: the machines
  // are shared, and their speed drifts by more than the differences measured over a longer span.
  struct Loaded {
    std::string name;
    config::Config cfg;
    std::unique_ptr<serving::ServedModel> model;
    std::vector<std::vector<model::Token>> prompts;
  };
  std::vector<Loaded> loaded;
  for (const config::CpuWeights weights : o.weights)
    for (const config::CacheDtype kv_dtype : kv_dtypes) {
      Loaded l;
      l.name = std::string(config::to_string(weights)) + " weights, " + std::string(config::to_string(kv_dtype)) + " KV";
      // Prefix caching off: the chat prompts share their system message, and the ratio should
      // measure batching alone against a loop that cannot reuse anything.
      l.cfg = o.config;
      l.cfg.cache.prefix_caching = false;
      l.cfg.model.weights = weights;
      l.cfg.cache.dtype = kv_dtype;
      l.model = std::make_unique<serving::ServedModel>(sys, l.cfg);
      l.prompts = make_prompts(*l.model, o.requests);
      CpuBenchPath path;
      path.weights = weights;
      path.kv_dtype = kv_dtype;
      path.kv_blocks = l.model->kv_blocks();
      r.paths.push_back(std::move(path));
      loaded.push_back(std::move(l));
    }
  r.prompt_tokens = 0;
  for (const auto& p : loaded.front().prompts) r.prompt_tokens += p.size();
  for (std::uint32_t c : o.concurrency)
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      Loaded& l = loaded[i];
      const std::uint32_t n = std::max(o.requests, c);
      say(l.name + ": engine, " + std::to_string(c) + " concurrent request(s), " + std::to_string(n) +
          " requests of " + std::to_string(o.max_tokens) + " tokens");
      r.paths[i].engine.push_back(run_engine(sys, *l.model, l.prompts, n, c, o.max_tokens, next_id));
      say("  " + std::to_string(r.paths[i].engine.back().tokens_per_s) + " tokens/s");
    }
  for (Loaded& l : loaded) l.model.reset();  // the engines' memory back before the plain loops load their own
  // Just before the plain loops, whose decode steps bandwidth_fraction_1 sets against it.
  say("read bandwidth: " + std::to_string(r.threads) + " thread(s) over 1 GiB");
  r.read_bytes_per_s = measure_read_bandwidth(r.threads, std::size_t{1} << 30, o.repeats);
  say("  " + std::to_string(r.read_bytes_per_s / 1e9) + " GB/s");
  if (!o.sequential_baseline) return r;
  for (std::size_t i = 0; i < r.paths.size(); ++i) {
    const Loaded& l = loaded[i];
    CpuBenchPath& path = r.paths[i];
    say(l.name + ": one at a time without the engine (plain generate loop), then a " +
        std::to_string(o.prefill_tokens) + "-token prefill");
    run_sequential(o, r.model, l.cfg, l.prompts, path);
    say("  " + std::to_string(path.sequential_tokens_per_s) + " tokens/s, decode steps " +
        std::to_string(path.decode_tokens_per_s) + " tokens/s, prefill " +
        std::to_string(path.prefill_tokens_per_s) + " tokens/s, one layer's decode attention over " +
        std::to_string(decode_attention_positions) + " positions " + std::to_string(path.decode_attention_s * 1e6) + " us");
  }
  return r;
}

}  // namespace actorlm::bench
