#include "tools/bench/load_commands.hpp"

#include "tools/bench/client_process.hpp"
#include "tools/bench/load_client.hpp"
#include "tools/bench/timing.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <random>
#include <string>

namespace actorlm::bench {

namespace {

using nlohmann::json;

Endpoint endpoint_of(const json& cmd) {
  return {cmd.value("host", std::string("127.0.0.1")), cmd.at("port").get<std::uint16_t>()};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The text of a chunk: completions' choices[0].text, chat's choices[0].delta.content.
std::string chunk_text(const json& chunk) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return {};
  const auto& c = (*choices)[0];
  if (auto t = c.find("text"); t != c.end() && t->is_string()) return *t;
  if (auto d = c.find("delta"); d != c.end())
    if (auto t = d->find("content"); t != d->end() && t->is_string()) return *t;
  return {};
}

void run_streams(const json& cmd, std::ostream& out) {
  LoadClient client({endpoint_of(cmd)});
  const auto n = cmd.at("n").get<std::size_t>();
  LoadRequest req;
  req.body = cmd.at("body").dump();
  std::vector<LoadRequest> reqs(n, req);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  const auto results = client.run_all(std::move(reqs));
  const double seconds = seconds_since(t0);
  const double cpu = process_cpu_seconds() - cpu0;
  std::vector<double> lag_us;
  for (const auto& r : results) {
    std::vector<std::int64_t> token_ns;
    bool done = false;
    for (const auto& e : r.events) {
      if (e.data == "[DONE]") {
        done = true;
        continue;
      }
      const auto chunk = json::parse(e.data, nullptr, false);
      if (chunk.is_discarded()) continue;
      for (char ch : chunk_text(chunk))
        if (ch == ' ') {
          token_ns.push_back(e.arrival_ns);
          lag_us.push_back(double(e.read_ns - e.arrival_ns) / 1e3);
        }
    }
    out << json{{"stream", r.tag},   {"request_id", r.request_id}, {"status", r.status},
                {"outcome", to_string(r.outcome)}, {"failure", r.error}, {"done", done}, {"token_ns", token_ns}}
               .dump()
        << '\n';
  }
  out << json{{"end", "streams"},
              {"seconds", seconds},
              {"client_cpu_s", cpu},
              {"client_lag_us_p50", percentile(lag_us, 50)},
              {"client_lag_us_p99", percentile(lag_us, 99)}}
             .dump()
      << std::endl;
}

void run_health(const json& cmd, std::ostream& out) {
  LoadClient client({endpoint_of(cmd)});
  const auto slow = cmd.value("slow", std::size_t{2000});
  const auto samples = cmd.value("samples", 5);
  json ms = json::array(), status = json::array(), held = json::array(), failures = json::array();
  for (int i = 0; i < samples; ++i) {
    client.open_slow(slow - client.slow_still_open());
    held.push_back(client.slow_still_open());
    LoadRequest health;
    health.method = "GET";
    health.target = "/health";
    health.timeout = std::chrono::seconds(120);
    const auto r = client.run_all({health});
    ms.push_back(double(r[0].end_ns - r[0].start_ns) / 1e6);
    status.push_back(r[0].outcome == LoadOutcome::complete ? r[0].status : 0);
    if (r[0].outcome != LoadOutcome::complete) failures.push_back(r[0].error);
  }
  client.close_slow();
  out << json{{"end", "health"}, {"health_ms", ms}, {"status", status}, {"slow_held", held}, {"failures", failures}}.dump() << std::endl;
}

// What a soak request does; chosen at random per request.
enum class SoakKind { streamed, non_streamed, aborted_mid_stream, disconnected };

// The soak's mix: 45 % streamed to the end, 25 % not streamed, 15 % streams closed after 1 to
// max_tokens/2 events, 15 % closed right after the request; half completions, half chat.
class SoakMix {
 public:
  SoakMix(const json& cmd)
      : model_(cmd.at("model").get<std::string>()), max_tokens_(cmd.value("max_tokens", 64u)),
        rng_(cmd.value("seed", 1u)) {}

  LoadRequest next(std::vector<SoakKind>& kinds) {
    std::uniform_real_distribution<double> u(0, 1);
    const double r = u(rng_);
    const SoakKind kind = r < 0.45 ? SoakKind::streamed
                          : r < 0.70 ? SoakKind::non_streamed
                          : r < 0.85 ? SoakKind::aborted_mid_stream
                                     : SoakKind::disconnected;
    const bool chat = u(rng_) < 0.5;
    const auto max_tokens = std::uniform_int_distribution<std::uint32_t>(4, std::max(4u, max_tokens_))(rng_);
    const bool stream = kind != SoakKind::non_streamed && !(kind == SoakKind::disconnected && u(rng_) < 0.5);
    json body = {{"model", model_}, {"max_tokens", max_tokens}, {"stream", stream}};
    if (chat)
      body["messages"] = json::array({{{"role", "user"}, {"content", "Tell me a story about a GPU."}}});
    else
      body["prompt"] = "Tell me a story about a GPU.";
    LoadRequest req;
    req.target = chat ? "/v1/chat/completions" : "/v1/completions";
    req.body = body.dump();
    req.timeout = std::chrono::seconds(120);
    if (kind == SoakKind::aborted_mid_stream)
      req.close_after_events = std::uniform_int_distribution<std::int64_t>(1, std::max(1u, max_tokens / 2))(rng_);
    req.close_after_send = kind == SoakKind::disconnected;
    req.tag = kinds.size();
    kinds.push_back(kind);
    return req;
  }

 private:
  std::string model_;
  std::uint32_t max_tokens_;
  std::mt19937_64 rng_;
};

// Which count a soak exchange goes to; says why on stderr when it is lost.
void count(const LoadResult& r, SoakKind kind, SoakCounts& c) {
  auto lost = [&](const std::string& why) {
    if (c.lost++ < 10) std::cerr << "bench load-client: request lost (" << why << ")\n";
  };
  if (r.outcome == LoadOutcome::closed) {
    ++(kind == SoakKind::disconnected ? c.disconnected : c.aborted);
    return;
  }
  if (r.outcome == LoadOutcome::failed) return lost(r.error);
  if (r.status != 200) {
    ++c.errored;
    return;
  }
  if (!r.events.empty()) {
    for (const auto& e : r.events)
      if (e.data.starts_with("{\"error\"")) {
        ++c.errored;
        return;
      }
    if (r.events.back().data != "[DONE]") return lost("stream ended without [DONE]");
    ++c.finished;
    return;
  }
  const auto body = json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.contains("choices")) return lost("no completion in the answer: " + r.body.substr(0, 200));
  ++c.finished;
}

void run_soak(const json& cmd, std::ostream& out) {
  LoadClient client({endpoint_of(cmd)});
  SoakMix mix(cmd);
  std::vector<SoakKind> kinds;
  SoakCounts counts;
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration<double>(cmd.at("seconds").get<double>());
  auto last_progress = t0;
  client.run(
      cmd.value("concurrency", 64u),
      [&]() -> std::optional<LoadRequest> {
        if (std::chrono::steady_clock::now() >= end) return std::nullopt;
        ++counts.sent;
        return mix.next(kinds);
      },
      [&](LoadResult r) {
        count(r, kinds[r.tag], counts);
        if (std::chrono::steady_clock::now() - last_progress >= std::chrono::seconds(10)) {
          last_progress = std::chrono::steady_clock::now();
          out << json{{"progress", soak_counts_json(counts, seconds_since(t0))}}.dump() << std::endl;
        }
      });
  json end_line = soak_counts_json(counts, seconds_since(t0));
  end_line["end"] = "soak";
  out << end_line.dump() << std::endl;
}

}  // namespace

json soak_counts_json(const SoakCounts& c, double seconds) {
  return {{"sent", c.sent},       {"finished", c.finished},         {"errored", c.errored},
          {"aborted", c.aborted}, {"disconnected", c.disconnected}, {"lost", c.lost}, {"seconds", seconds}};
}

SoakCounts soak_counts_from(const json& j) {
  SoakCounts c;
  c.sent = j.at("sent");
  c.finished = j.at("finished");
  c.errored = j.at("errored");
  c.aborted = j.at("aborted");
  c.disconnected = j.at("disconnected");
  c.lost = j.at("lost");
  return c;
}

int run_load_commands(std::istream& in, std::ostream& out) {
  raise_open_files_limit();
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const auto cmd = json::parse(line);
      const auto name = cmd.at("cmd").get<std::string>();
      if (name == "streams") run_streams(cmd, out);
      else if (name == "health") run_health(cmd, out);
      else if (name == "soak") run_soak(cmd, out);
      else out << json{{"error", "unknown command \"" + name + "\""}}.dump() << std::endl;
    } catch (const std::exception& e) {
      out << json{{"error", e.what()}}.dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace actorlm::bench
