// actorlm generate: one prompt through the real engine on the cpu backend, text streamed to
// stdout as tokens arrive; timing on stderr. The quickest way to see the model answer.
#include "actors/engine/completions.hpp"
#include "actors/shard/cpu/cpu_backend.hpp"
#include "model/format/gguf_file.hpp"
#include "model/format/tensor_source.hpp"
#include "model/tokenizer/chat_template.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "tools/actorlm/commands.hpp"
#include "actors/serving/served_model.hpp"

#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

namespace actorlm::tools {

namespace {

struct GenerateOptions {
  std::string config_file, model, prompt = "What is the capital of France?";
  bool raw = false;
  std::uint32_t max_tokens = 64;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  std::int32_t top_k = 0;
  std::uint64_t seed = 0;
  std::int64_t tp = 0, pp = 0;
};

int run_generate(const GenerateOptions& o) {
  auto cfg = load_config_or_report(o.config_file);
  if (!cfg) return 1;
  if (!o.model.empty()) cfg->model.path = o.model;
  if (o.tp > 0) cfg->engine.tensor_parallel_degree = o.tp;
  if (o.pp > 0) cfg->engine.pipeline_parallel_degree = o.pp;
  try {
    caf::actor_system_config sys_cfg;
    serving::configure_actor_system(sys_cfg, *cfg);
    caf::actor_system sys{sys_cfg};
    serving::ServedModel session(sys, *cfg);
    const auto prompt = o.raw ? session.raw_prompt(o.prompt) : session.chat_prompt({{"user", o.prompt}});
    spdlog::info("prompt: {} tokens", prompt.size());

    const auto detok = session.codec().detokenizer();  // special tokens show no text
    engine::Completions done(
        sys, 1, [&](const scheduler::TokenEvent& t) { std::cout << detok->push(t.token) << std::flush; },
        session.engine().actors().scheduler);
    scheduler::RequestSpec spec = session.request(1, prompt, o.max_tokens);
    spec.sampling.temperature = o.temperature;
    spec.sampling.top_p = o.top_p;
    spec.sampling.top_k = o.top_k;
    spec.sampling.min_p = o.min_p;
    spec.sampling.seed = o.seed;
    const auto start = std::chrono::steady_clock::now();
    const auto status = session.engine().submit(std::move(spec), done.sink());
    if (status != scheduler::SubmitStatus::accepted) {
      if (status == scheduler::SubmitStatus::too_long)
        std::cerr << "generate: the prompt (" << prompt.size() << " tokens) plus --max-tokens " << o.max_tokens
                  << " exceed model.max_model_len (" << cfg->model.max_model_len << ") or the KV cache\n";
      else
        std::cerr << "generate: the request was refused (" << (status == scheduler::SubmitStatus::queue_full
                                                                   ? "queue full" : "invalid parameters")
                  << ")\n";
      return 1;
    }
    if (!done.wait_finished(1, std::chrono::hours(24))) {
      std::cout << detok->flush() << std::endl;
      std::cerr << "generate: " << (done.failure().empty() ? "no answer within 24 hours" : done.failure()) << '\n';
      return 1;
    }
    std::cout << detok->flush() << std::endl;
    auto out = done.take().at(1);
    const double ttft = std::chrono::duration<double>(out.first_token - start).count();
    const double total = std::chrono::duration<double>(out.finished - start).count();
    const auto n = out.samples.at(0).size();
    spdlog::info("{} tokens, finish reason {}; time to first token {:.3f} s, {:.1f} tokens/s after it",
                 n, out.reasons.at(0) == scheduler::FinishReason::stop ? "stop" : "length", ttft,
                 n > 1 ? double(n - 1) / (total - ttft) : 0.0);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "generate: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* g = app.add_subcommand(
      "generate", "Answer one prompt with the configured backend (the cpu backend and the default model unless the config or --model says "
                  "otherwise), streaming the text to stdout");
  g->add_option("--config", o->config_file, "TOML config (default: the built-in configs/default.toml)");
  g->add_option("--model", o->model, "GGUF file or HF safetensors folder (overrides model.path)");
  g->add_option("-p,--prompt", o->prompt, "The user message (or raw text with --raw)")->capture_default_str();
  g->add_flag("--raw", o->raw, "Complete the prompt as plain text instead of as a chat message");
  g->add_option("-n,--max-tokens", o->max_tokens, "New tokens at most")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  g->add_option("--temperature", o->temperature, "0: greedy")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  g->add_option("--top-p", o->top_p, "Nucleus sampling mass, in (0, 1]")->capture_default_str()->check(CLI::Range(1e-6, 1.0));
  g->add_option("--top-k", o->top_k, "0: off")->capture_default_str()->check(CLI::NonNegativeNumber);
  g->add_option("--min-p", o->min_p, "Drop tokens below this share of the top probability")->check(CLI::Range(0.0, 1.0));
  g->add_option("--seed", o->seed, "Sampling seed (same seed, same text)")->capture_default_str();
  g->add_option("--tp", o->tp, "Tensor parallel degree (cpu shards, summed in process memory)")->check(CLI::Range(1, 64));
  g->add_option("--pp", o->pp, "Layer split over this many stages (engine.pipeline_parallel_degree; hidden states "
                "go stage to stage in process memory)")->check(CLI::Range(1, 64));
  g->callback([o, &exit_code] { exit_code = run_generate(*o); });
}

}  // namespace actorlm::tools
